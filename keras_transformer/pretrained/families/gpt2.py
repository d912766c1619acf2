"""GPT-2 checkpoints in this package's terms: config, weights, tokenizer, generation settings.

The module of one family of checkpoints, `model_type: "gpt2"`, in the four
parts every family has (`keras_transformer.pretrained.families`). GPT-2 is
the Transformer's decoder alone (`build_decoder_only`): learned positions,
pre-norm blocks with a final LayerNorm (`ln_f`), the tanh GELU (`gelu_new`),
an output tied to the token embedding. Its projections are `Conv1D`s, whose
weights are stored `(in, out)`, transposed against a `Linear`'s, and its
query, key and value are one `c_attn` matrix `[q | k | v]`. One id,
`<|endoftext|>`, starts, ends and pads.

A `GPT2Model` file (openai-community/gpt2's) names its tensors without the
`transformer.` prefix and holds no `lm_head`: its output is tied to `wte`,
as a `GPT2LMHeadModel`'s is (`LAYOUT`: every file is read under the
latter's names). Older files hold each layer's causal-mask buffers
(`attn.bias`, `attn.masked_bias`), which transformers passes over, and some
the tied copy `lm_head.weight`, which must equal `wte`.

Every field is read with its kind and range, and the sizes are held against
the weights file's tensors before anything is built (`shapes`). The run
keeps the checkpoint's tokenizer files as they were read
(`TOKENIZER_FILES`), which an export (`gpt2_export`) writes back byte for
byte, and is fine-tuned as a causal language model (`fine_tuning_preset`).
"""

import math

from keras_transformer.config import ModelConfig
from keras_transformer.kinds import MAX_LENGTH
from keras_transformer.pretrained import buffers, shapes
from keras_transformer.pretrained.families.generation import language_model_decoding
from keras_transformer.pretrained.families.weights import as_is, assign, dense_sources, norm_sources, transposed
from keras_transformer.pretrained.fields import Fields
from keras_transformer.pretrained.tensor_names import Layout
from keras_transformer.runs import Tokenizers

MODEL_TYPE = "gpt2"
FAMILY = "GPT-2"
ADD_SOURCE_END = False  # a prompt is continued, not ended
ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu", "relu": "relu"}
PREFIX = "transformer."
# A `GPT2LMHeadModel`'s names (a `GPT2Model`'s read with the prefix); the causal masks older files saved.
LAYOUT = Layout(prefix=PREFIX, heads=("lm_head.",), skipped=("attn.bias", "attn.masked_bias"))
# The tokenizer files a GPT-2 repository holds beside tokenizer_config.json, which a run keeps byte for byte.
TOKENIZER_FILES = ("vocab.json", "merges.txt", "tokenizer.json", "special_tokens_map.json", "added_tokens.json")
# The recipe `train --init-from` continues an imported GPT-2's training with: transformers' 5e-5 peak after a
# short warmup, annealed over the last third; no label smoothing (a language model's probabilities are its product).
FINE_TUNING = dict(
    warmup_steps=100, peak_rate=5e-5, cooldown_fraction=0.34, label_smoothing=0.0, epochs=3, token_budget=1024
)


def model_config(hf_config, tensors, where="config.json", weights="the weights file"):
    """The `ModelConfig` of a GPT-2 `config.json` (a dict) whose weights file holds `tensors`."""
    fields = Fields(hf_config, where, FAMILY)
    prefix = PREFIX
    embedding = f"{prefix}wte.weight"
    if embedding not in tensors or len(tensors[embedding].shape) != 2:
        raise ValueError(f"{weights} has no token embedding matrix (`transformer.wte.weight`), which GPT-2 holds")
    rows, width = tensors[embedding].shape
    d_model = fields.int("n_embd", low=1, high=2**20)
    shapes.check_field(where, "n_embd", d_model, width, f"columns in `{embedding}`", weights)
    vocab = fields.int("vocab_size", low=1)
    shapes.check_field(where, "vocab_size", vocab, rows, f"rows in `{embedding}`", weights)
    layers = fields.int("n_layer", low=1)
    shapes.check_field(where, "n_layer", layers, shapes.layer_count(tensors, f"{prefix}h"), "layers", weights)
    positions = fields.int("n_positions", low=2, high=MAX_LENGTH)
    wpe = f"{prefix}wpe.weight"
    if wpe in tensors:
        shapes.check_field(where, "n_positions", positions, tensors[wpe].shape[0], f"rows in `{wpe}`", weights)
    d_ff = fields.int("n_inner", 4 * d_model, low=1)
    for name, expected in (
        ("scale_attn_weights", True),
        ("scale_attn_by_inverse_layer_idx", False),
        ("add_cross_attention", False),
    ):
        if fields.bool(name, expected) != expected:
            raise ValueError(f"{where}: `{name}` must be {str(expected).lower()}; keras-transformer builds that GPT-2")
    end = fields.single_id("eos_token_id", vocab - 1, vocab_size=vocab)
    return ModelConfig(
        source_vocab_size=vocab,
        target_vocab_size=vocab,
        architecture="decoder_only",
        num_layers=layers,
        d_model=d_model,
        num_heads=fields.int("n_head", low=1, high=d_model),
        d_ff=d_ff,
        dropout=_rate(fields, "resid_pdrop"),
        attention_dropout=_rate(fields, "attn_pdrop"),
        max_length=positions,
        tie_output_embedding=fields.bool("tie_word_embeddings", True),
        norm_first=True,
        activation=ACTIVATIONS[fields.choice("activation_function", sorted(ACTIVATIONS), "gelu_new")],
        layer_norm_epsilon=fields.number("layer_norm_epsilon", 1e-5, low=1e-30),
        position_layout="learned",
        scale_embeddings=False,
        pad_id=fields.single_id("pad_token_id", end, vocab_size=vocab),
        start_id=fields.single_id("bos_token_id", end, vocab_size=vocab),
        end_id=end,
    ).check()


def _rate(fields, name):
    rate = fields.number(name, 0.1, low=0)
    if rate >= 1:
        raise ValueError(f"{fields.where}: `{name}` must be a number in [0, 1). Received: {name}={rate!r}")
    return rate


def check_tensors(config, tensors, weights):
    """Every tensor a GPT-2 of `config` needs is in `tensors`, of its shape, and nothing else is."""
    required, optional = tensor_shapes(config)
    shapes.check_shapes(required, optional, tensors, weights, FAMILY)


def tensor_shapes(config):
    """`(required, optional)`: `{name: shape}` of the tensors of a GPT-2 of `config`, as a `GPT2LMHeadModel`'s."""
    d, ffn, vocab, prefix = config.d_model, config.d_ff, config.target_vocab_size, PREFIX
    required = {f"{prefix}wte.weight": (vocab, d), f"{prefix}wpe.weight": (config.max_length, d)}
    required.update({f"{prefix}ln_f.weight": (d,), f"{prefix}ln_f.bias": (d,)})
    optional = {"lm_head.weight": (vocab, d)}
    if not config.tie_output_embedding:
        required["lm_head.weight"] = (vocab, d)
    for index in range(config.num_layers):
        layer = f"{prefix}h.{index}"
        for norm in ("ln_1", "ln_2"):
            required[f"{layer}.{norm}.weight"] = required[f"{layer}.{norm}.bias"] = (d,)
        required.update({f"{layer}.attn.c_attn.weight": (d, 3 * d), f"{layer}.attn.c_attn.bias": (3 * d,)})
        required.update({f"{layer}.attn.c_proj.weight": (d, d), f"{layer}.attn.c_proj.bias": (d,)})
        required.update({f"{layer}.mlp.c_fc.weight": (d, ffn), f"{layer}.mlp.c_fc.bias": (ffn,)})
        required.update({f"{layer}.mlp.c_proj.weight": (ffn, d), f"{layer}.mlp.c_proj.bias": (d,)})
    return required, optional


def tokenizers(checkpoint, config):
    """The checkpoint's byte-level BPE (`tokenizer.json`, else `vocab.json` and `merges.txt`), one for both sides.

    From the vocabulary files, `tokenizer_config.json`'s `add_prefix_space`
    and `add_bos_token` are read as transformers' `GPT2Tokenizer` reads them.
    """
    from keras_transformer.tokenizers.huggingface import BYTES_PER_ENTRY, HuggingFaceTokenizer

    ids = dict(pad_id=config.pad_id, start_id=config.start_id, end_id=config.end_id)
    size = config.target_vocab_size
    # Read (and so kept by the run, `pretrained.json_files`) whichever file gives the tokens: an export writes it back.
    settings = Fields(checkpoint.json("tokenizer_config.json", required=False), "tokenizer_config.json", FAMILY)
    if checkpoint.has("tokenizer.json"):
        tokenizer = HuggingFaceTokenizer.from_tokenizer_file(checkpoint.path("tokenizer.json"), size, **ids)
    else:
        tokenizer = HuggingFaceTokenizer.from_bpe_files(
            checkpoint.path("vocab.json"),
            checkpoint.path("merges.txt"),
            size,
            add_prefix_space=settings.bool("add_prefix_space", False),
            add_bos_token=settings.bool("add_bos_token", False),
            **ids,
        )
    tokenizer.files = _kept_files(checkpoint, 2**16 + size * BYTES_PER_ENTRY)
    return Tokenizers(tokenizer, tokenizer)


def _kept_files(checkpoint, max_bytes):
    """`{name: bytes}` of the `TOKENIZER_FILES` the checkpoint holds, each at most `max_bytes` (untrusted input)."""
    kept = {}
    for name in TOKENIZER_FILES:
        if checkpoint.has(name):
            path = checkpoint.path(name)
            if path.stat().st_size > max_bytes:
                raise ValueError(f"{path} is {path.stat().st_size:,} bytes, more than a tokenizer of its size needs")
            kept[name] = path.read_bytes()
    return kept


def check_buffers(config, checkpoint):
    """A stored `lm_head.weight` of a tied output equals `wte` (transformers ties the two)."""
    if config.tie_output_embedding:
        buffers.check_copies(checkpoint, {"lm_head.weight": f"{PREFIX}wte.weight"})


def decoding_config(generation, config, where="generation_config.json"):
    """The checkpoint's generation settings as a `DecodingConfig` (`generation.language_model_decoding`)."""
    return language_model_decoding(generation, config, where, FAMILY)


def fine_tuning_preset(preset):
    """The preset an imported GPT-2 is fine-tuned with (`FINE_TUNING`): `preset` with a causal LM's recipe."""
    settings = dict(FINE_TUNING)
    peak, warmup = settings.pop("peak_rate"), settings["warmup_steps"]
    scale = peak * math.sqrt(preset.model.d_model * warmup)  # the schedule's rate at the end of the warmup
    return preset.replace(learning_rate_scale=scale, **settings)


def build_model(config):
    """The model a GPT-2 of `config` is imported into."""
    from keras_transformer.models import build_decoder_only

    return build_decoder_only(config=config)


def assign_weights(model, checkpoint):
    """Sets `model`'s weights from a GPT-2 checkpoint, one tensor at a time (checked by `check_tensors`)."""
    assign(model, checkpoint, weight_sources(model))


class Columns:
    """One of `c_attn`'s three column blocks `[q | k | v]` (`part` 0, 1, 2 of `width` each), of a weight or a bias.

    `Columns(1, 4)(np.arange(12))` is `[4, 5, 6, 7]`: the key's. Stored `(in,
    out)` as a `Conv1D`'s, a block needs no transpose.
    """

    def __init__(self, part, width):
        self.part, self.columns = part, slice(part * width, (part + 1) * width)

    def __call__(self, value):
        return value[..., self.columns]


def weight_sources(model):
    """`(model weight, tensor name or None, transform)` of every weight of a GPT-2 `model`: both directions' table.

    The transforms are `as_is`, `transposed` and `Columns` (the query, key
    and value in `c_attn`); None names a weight no tensor holds (an untied
    output's bias, zero).
    """
    config, prefix = model.config, PREFIX
    embedding = model.decoder_embedding
    sources = [
        (embedding.embeddings, f"{prefix}wte.weight", as_is),
        (embedding.position_encoding.embeddings, f"{prefix}wpe.weight", as_is),
    ]
    sources += norm_sources(model.decoder_norm, f"{prefix}ln_f")
    if not config.tie_output_embedding:
        sources += [
            (model.output_layer.kernel, "lm_head.weight", transposed),
            (model.output_layer.bias, None, as_is),
        ]
    for index, layer in enumerate(model.decoder_layers):
        name = f"{prefix}h.{index}"
        attention = layer.self_attention
        for part, dense in enumerate((attention.query_dense, attention.key_dense, attention.value_dense)):
            sources.append((dense.kernel, f"{name}.attn.c_attn.weight", Columns(part, config.d_model)))
            sources.append((dense.bias, f"{name}.attn.c_attn.bias", Columns(part, config.d_model)))
        sources += dense_sources(attention.output_dense, f"{name}.attn.c_proj", as_is)
        sources += dense_sources(layer.ffn.inner_dense, f"{name}.mlp.c_fc", as_is)
        sources += dense_sources(layer.ffn.output_dense, f"{name}.mlp.c_proj", as_is)
        sources += norm_sources(layer.self_attention_norm, f"{name}.ln_1")
        sources += norm_sources(layer.ffn_norm, f"{name}.ln_2")
    return sources
