"""mBART-50 checkpoints (`model_type: "mbart"`, many-to-many) in this package's terms.

The module of one family of checkpoints, in the four parts every family has
(`keras_transformer.pretrained.families`). mBART is BART's Transformer with
pre-norm layers and a final LayerNorm per stack, GELU, embeddings scaled by
√d_model, shared and tied to the output with a bias (`final_logits_bias`),
and learned positions whose table keeps two rows before position 0's
(`position_offset=2`), one table per stack, each stack's embeddings then
normalized (`layernorm_embedding`: `embedding_norm`). mBART-50's sources are
`[src_lang] X </s>`; it decodes from `</s>` with the target language forced
first (`forced_bos_token_id`), as M2M100 does, and its tokenizer
(`MBart50Tokenizer`) is read by `tokenizers.fairseq`.

The first mBART (mbart-large-cc25, `MBartTokenizer`) frames its texts the
other way round (`X </s> [lang]`): it is refused in one line.

Example:

>>> from keras_transformer.pretrained import import_pretrained
>>> import_pretrained("hf://facebook/mbart-large-50-many-to-many-mmt", "saved_models/mbart50")  # doctest: +SKIP
"""

from keras_transformer.config import ModelConfig
from keras_transformer.kinds import MAX_LENGTH
from keras_transformer.pretrained import buffers, shapes
from keras_transformer.pretrained.families import bart
from keras_transformer.pretrained.families.generation import checkpoint_generation
from keras_transformer.pretrained.families.weights import as_is, assign, norm_sources
from keras_transformer.pretrained.fields import Fields
from keras_transformer.pretrained.tensor_names import Layout
from keras_transformer.runs import Tokenizers
from keras_transformer.tokenizers.fairseq import from_mbart50_files

MODEL_TYPE = "mbart"
FAMILY = "mBART"
ADD_SOURCE_END = True  # a source ends with </s>
LICENSE = "mit"  # mBART-50's
ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "relu": "relu", "swish": "silu", "silu": "silu"}
LAYER_NORM_EPSILON = 1e-5  # torch.nn.LayerNorm's default
POSITION_OFFSET = 2  # mBART's learned positions keep two rows before position 0's
EMBEDDING = "model.shared.weight"
COPIES = ("model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight", "lm_head.weight")
_RATES = ("dropout", "attention_dropout", "activation_dropout")
outer_names = bart.outer_names
# `MBartForConditionalGeneration`'s names; an `MBartModel` stores its tensors without `model.` and has no head.
LAYOUT = Layout(prefix="model.", heads=("lm_head.", "final_logits_bias"))


def model_config(hf_config, tensors, where="config.json", weights="the weights file"):
    """The `ModelConfig` of an mBART-50 `config.json` (a dict) whose weights file holds `tensors`.

    A field of the wrong kind, or one the tensors contradict, is a
    `ValueError` naming `where` and the field.
    """
    fields = Fields(hf_config, where, FAMILY)
    if tensors.get(EMBEDDING) is None:
        raise ValueError(f"{weights} has no token embedding (`{EMBEDDING}`), which an mBART model holds")
    rows, width = bart.matrix(tensors[EMBEDDING], EMBEDDING, weights)
    d_model = fields.int("d_model", low=1, high=2**20)
    shapes.check_field(where, "d_model", d_model, width, f"columns in `{EMBEDDING}`", weights)
    vocab = fields.int("vocab_size", low=1)
    shapes.check_field(where, "vocab_size", vocab, rows, f"rows in `{EMBEDDING}`", weights)
    if not fields.bool("tie_word_embeddings", True):
        raise ValueError(f"{where}: `tie_word_embeddings` false is not an mBART model keras-transformer imports")
    _check_tokenizer_class(fields)
    return ModelConfig(
        source_vocab_size=vocab,
        target_vocab_size=vocab,
        **bart.stack_sizes(fields, tensors, weights, d_model),
        d_model=d_model,
        **{name: bart.rate(fields, name, default) for name, default in zip(_RATES, (0.1, 0.0, 0.0))},
        max_length=fields.int("max_position_embeddings", low=2, high=MAX_LENGTH),
        share_embeddings=True,
        tie_output_embedding=True,
        norm_first=True,
        activation=ACTIVATIONS[fields.choice("activation_function", sorted(ACTIVATIONS), "gelu")],
        layer_norm_epsilon=LAYER_NORM_EPSILON,
        position_layout="learned",
        position_offset=POSITION_OFFSET,
        embedding_norm=True,
        scale_embeddings=fields.bool("scale_embedding", False),
        output_bias=True,
        pad_id=fields.single_id("pad_token_id", vocab_size=vocab),
        start_id=fields.single_id("decoder_start_token_id", vocab_size=vocab),
        end_id=fields.single_id("eos_token_id", vocab_size=vocab),
    ).check()


def _check_tokenizer_class(fields):
    """mBART-50's `MBart50Tokenizer`, or none named; the first mBART's `MBartTokenizer` is refused."""
    named = fields.raw("tokenizer_class", "")
    if isinstance(named, str) and named.startswith("MBartTokenizer"):
        raise ValueError(
            f"{fields.where}: tokenizer_class {named!r} is the first mBART's (X </s> [lang]); keras-transformer "
            "imports mBART-50 (MBart50Tokenizer)"
        )


def tensor_shapes(config, names=()):
    """`{name: shape}` of the tensors an mBART model of `config` is written as (`names`: the copies it also holds)."""
    d, vocab, rows = config.d_model, config.source_vocab_size, config.max_length + POSITION_OFFSET
    required = {EMBEDDING: (vocab, d), "final_logits_bias": (1, vocab), **bart.stack_shapes(config)}
    for side in ("encoder", "decoder"):
        required[f"model.{side}.embed_positions.weight"] = (rows, d)
        for norm in ("layernorm_embedding", "layer_norm"):
            required[f"model.{side}.{norm}.weight"] = required[f"model.{side}.{norm}.bias"] = (d,)
    required.update({name: (vocab, d) for name in COPIES if name in names})
    return required


def check_tensors(config, tensors, weights):
    """Every tensor an mBART model of `config` needs is in `tensors`, of its shape, and nothing else is.

    `final_logits_bias` may be missing (transformers then starts it at zeros).
    """
    required = tensor_shapes(config)
    optional = {"final_logits_bias": required.pop("final_logits_bias")}
    optional.update({name: (config.source_vocab_size, config.d_model) for name in COPIES})
    shapes.check_shapes(required, optional, tensors, weights, FAMILY)


def check_buffers(config, checkpoint):
    """The stored copies of the tied embedding (`embed_tokens`, `lm_head`) equal it."""
    buffers.check_copies(checkpoint, dict.fromkeys(COPIES, EMBEDDING))


def decoding_config(generation, config, where="generation_config.json"):
    """The checkpoint's generation settings as a `DecodingConfig` (`bart.generation_settings`).

    Its `forced_bos_token_id`, where it names one, is a default target
    language (`tokenizers`' `target_lang`), not a setting of the search.
    """
    return bart.generation_settings(generation, config, where, FAMILY)


def tokenizers(checkpoint, config):
    """The checkpoint's `FairseqTokenizer` (mBART-50's), as `runs.Tokenizers`: one for both sides.

    From `tokenizer.json` (transformers 5's), else `sentencepiece.bpe.model`;
    its ids must lie within the embedding's rows. The generation settings'
    `forced_bos_token_id` is its default target language.
    """
    files = ("tokenizer.json",) if checkpoint.has("tokenizer.json") else ("sentencepiece.bpe.model",)
    for name in (*files, "sentencepiece.bpe.model", "special_tokens_map.json"):
        if checkpoint.has(name) or name in files:
            checkpoint.path(name)  # recorded with its sha256; a missing one is named
    checkpoint.json("tokenizer_config.json", required=False)  # kept, for an export to write back
    tokenizer = from_mbart50_files(checkpoint.folder, max_vocab_size=config.target_vocab_size)
    if tokenizer.vocab_size > config.target_vocab_size:
        raise ValueError(
            f"{checkpoint.folder / files[0]} gives ids up to {tokenizer.vocab_size - 1}, beyond the model's "
            f"{config.target_vocab_size} embedding rows"
        )
    forced = Fields(*checkpoint_generation(checkpoint), FAMILY)
    forced = forced.single_id("forced_bos_token_id", None, vocab_size=config.target_vocab_size)
    by_id = {index: code for code, index in tokenizer.languages.items()}
    if forced is not None and forced in by_id:
        tokenizer.target_lang = by_id[forced]
    return Tokenizers(tokenizer, tokenizer)


def license_of(checkpoint):
    """The license mBART-50's checkpoints are published under, where the README names none."""
    return LICENSE


def assign_weights(model, checkpoint):
    """Sets `model`'s weights from an mBART checkpoint, one tensor at a time (checked by `check_tensors`)."""
    assign(model, checkpoint, weight_sources(model, checkpoint.tensors()))


def weight_sources(model, names):
    """`(model weight, tensor name or None for zeros, transform)` of every weight of an mBART `model`.

    Import and export read it; `names` are the tensors a checkpoint holds
    (`final_logits_bias` may be missing: zeros).
    """
    embedding = model.encoder_embedding
    bias = "final_logits_bias" if "final_logits_bias" in names else None
    sources = [(embedding.embeddings, EMBEDDING, as_is), (embedding.logits_bias, bias, as_is)]
    for index, side in enumerate(("encoder", "decoder")):
        sources.append((embedding.position_encodings[index].embeddings, f"model.{side}.embed_positions.weight", as_is))
        sources += norm_sources(embedding.norms[index], f"model.{side}.layernorm_embedding")
    for side, norm in (("encoder", model.encoder_norm), ("decoder", model.decoder_norm)):
        sources += norm_sources(norm, f"model.{side}.layer_norm")
    return sources + bart.stack_sources(model)
