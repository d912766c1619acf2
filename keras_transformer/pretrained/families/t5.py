"""T5-family checkpoints (`model_type: "t5"`: T5 v1.0, flan-T5, MADLAD-400) in this package's terms.

The module of one family of checkpoints, in the four parts every family has
(`keras_transformer.pretrained.families`). A T5 is the Transformer with
pre-norm layers and a final norm per stack, all RMS norms (no mean, no
offset), no bias anywhere, embeddings neither scaled nor given positions:
each stack's first block holds a relative position bias (`position_layout=
"relative"`), and the attention scores are not divided by √d_k. Its
feed-forward is ReLU (T5 v1.0) or gated GELU ("gated-gelu": flan-T5, mT5,
MADLAD). The output projection is the shared embedding, the decoder's output
scaled by `d_model ** -0.5` first (T5 v1.0), or a `lm_head` of its own
(flan-T5, MADLAD). It decodes from its padding id 0; sources end with `</s>`.

transformers 5 writes `scale_decoder_outputs` into config.json and
`tie_word_embeddings` true whatever the model; older files say
`tie_word_embeddings` false for an untied model. So: the decoder's output is
scaled where `scale_decoder_outputs` says so, else where
`tie_word_embeddings` is not false; the output is its own `lm_head.weight`
where the weights hold one and the model is not scaled, and the shared
embedding where they hold none (or, for a scaled model, a copy of it, which
must be equal).

flan-T5 takes its task as plain text in front of the source ("translate
English to German: ..."); MADLAD-400 the target language as its `<2xx>`
piece, which `--target-lang` puts there (`tokenizers.t5`).

Example:

>>> from keras_transformer.pretrained import import_pretrained
>>> import_pretrained("hf://google/flan-t5-small", "saved_models/flan-t5-small")  # doctest: +SKIP
"""

from keras_transformer.config import ModelConfig
from keras_transformer.kinds import MAX_LENGTH
from keras_transformer.pretrained import buffers, shapes
from keras_transformer.pretrained.families import bart, t5_tensors
from keras_transformer.pretrained.families.weights import assign
from keras_transformer.pretrained.fields import Fields
from keras_transformer.runs import Tokenizers
from keras_transformer.tokenizers.t5 import from_t5_files

MODEL_TYPE = "t5"
FAMILY = "T5"
ADD_SOURCE_END = True  # a source ends with </s>
LICENSE = "apache-2.0"  # T5's, flan-T5's, mT5's and MADLAD-400's
# transformers' activations of a `feed_forward_proj` (`{act}` or `gated-{act}`), as this package names them.
ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_new": "gelu_tanh", "silu": "silu", "swish": "silu"}
POSITIONS = 512  # the positions a T5 reads without `n_positions` (relative positions have no table)
outer_names = t5_tensors.outer_names


def feed_forward_of(fields):
    """`(feed_forward, activation)` of config.json's `feed_forward_proj`: transformers' rules, or a `ValueError`."""
    default = "gated-gelu" if fields.family == "mT5" else "relu"
    projection = fields.raw("feed_forward_proj", default)
    parts = projection.split("-") if isinstance(projection, str) else []
    gated = len(parts) == 2 and parts[0] == "gated"
    name = "gelu_new" if projection == "gated-gelu" else parts[-1] if parts else None
    if not (len(parts) == 1 or gated) or name not in ACTIVATIONS:
        raise ValueError(
            f"{fields.where}: feed_forward_proj {projection!r} is not one keras-transformer builds; it builds "
            f"{sorted(ACTIVATIONS)} and their gated forms (gated-gelu, gated-relu, ...)"[:300]
        )
    return ("gated" if gated else "plain"), ACTIVATIONS[name]


def model_config(hf_config, tensors, where="config.json", weights="the weights file", family=FAMILY, scaled=None):
    """The `ModelConfig` of a T5 `config.json` (a dict) whose weights file holds `tensors`.

    A field of the wrong kind, or one the tensors contradict, is a
    `ValueError` naming `where` and the field. `scaled` (None: T5's rule,
    see the module docstring) says whether the decoder's output is scaled
    before the output projection (mT5: never).
    """
    fields = Fields(hf_config, where, family)
    if t5_tensors.EMBEDDING not in tensors:
        raise ValueError(f"{weights} has no token embedding (`shared.weight`), which {_a(family)} model holds")
    rows, width = bart.matrix(tensors[t5_tensors.EMBEDDING], t5_tensors.EMBEDDING, weights)
    d_model = fields.int("d_model", low=1, high=2**20)
    shapes.check_field(where, "d_model", d_model, width, "columns in `shared.weight`", weights)
    vocab = fields.int("vocab_size", low=1)
    shapes.check_field(where, "vocab_size", vocab, rows, "rows in `shared.weight`", weights)
    layers = fields.int("num_layers", low=1)
    shapes.check_field(where, "num_layers", layers, shapes.layer_count(tensors, "encoder.block"), "blocks", weights)
    decoder_layers = fields.int("num_decoder_layers", layers, low=1)
    found = shapes.layer_count(tensors, "decoder.block")
    shapes.check_field(where, "num_decoder_layers", decoder_layers, found, "decoder blocks", weights)
    heads = fields.int("num_heads", low=1, high=d_model * 64)
    key_dim = fields.int("d_kv", low=1, high=2**16)
    feed_forward, activation = feed_forward_of(fields)
    if scaled is None:
        scaled = fields.bool("scale_decoder_outputs", fields.bool("tie_word_embeddings", True))
    tied = "lm_head.weight" not in tensors or scaled
    rate = bart.rate(fields, "dropout_rate", 0.1)
    return ModelConfig(
        source_vocab_size=vocab,
        target_vocab_size=vocab,
        num_layers=layers,
        num_decoder_layers=None if decoder_layers == layers else decoder_layers,
        d_model=d_model,
        num_heads=heads,
        d_ff=fields.int("d_ff", low=1),
        dropout=rate,
        attention_dropout=rate,
        activation_dropout=rate,
        max_length=fields.int("n_positions", POSITIONS, low=2, high=MAX_LENGTH),
        share_embeddings=True,
        tie_output_embedding=tied,
        norm_first=True,
        activation=activation,
        layer_norm_epsilon=fields.number("layer_norm_epsilon", 1e-6, low=0) or 1e-6,
        position_layout="relative",
        scale_embeddings=False,
        pad_id=fields.single_id("pad_token_id", 0, vocab_size=vocab),
        start_id=fields.single_id("decoder_start_token_id", fields.single_id("pad_token_id", 0), vocab_size=vocab),
        end_id=fields.single_id("eos_token_id", 1, vocab_size=vocab),
        relative_attention_num_buckets=fields.int("relative_attention_num_buckets", 32, low=4, high=2**16),
        relative_attention_max_distance=fields.int("relative_attention_max_distance", 128, low=2, high=2**20),
        key_dim=None if key_dim * heads == d_model else key_dim,
        norm="rms",
        feed_forward=feed_forward,
        use_bias=False,
        scale_attention=False,
        scale_output=scaled and tied,
    ).check()


def check_tensors(config, tensors, weights, family=FAMILY):
    """Every tensor a T5 model of `config` needs is in `tensors`, of its shape, and nothing else is."""
    shapes.check_shapes(t5_tensors.tensor_shapes(config), t5_tensors.optional_shapes(config), tensors, weights, family)


def check_buffers(config, checkpoint):
    """The stored copies of the shared embedding (`embed_tokens`, a tied `lm_head`) equal it."""
    copies = t5_tensors.COPIES + (("lm_head.weight",) if config.tie_output_embedding else ())
    buffers.check_copies(checkpoint, dict.fromkeys(copies, t5_tensors.EMBEDDING))


def decoding_config(generation, config, where="generation_config.json", family=FAMILY):
    """The checkpoint's generation settings as a `DecodingConfig`, read as the BART-derived families' are."""
    return bart.generation_settings(generation, config, where, family)


def tokenizers(checkpoint, config):
    """The checkpoint's `T5Tokenizer` (one for both sides): from `tokenizer.json`, else `spiece.model`.

    Its ids must lie within the embedding's rows (which T5's checkpoints
    round up beyond the tokenizer's: 32128 for 32100).
    """
    names = ("tokenizer.json",) if checkpoint.has("tokenizer.json") else ("spiece.model",)
    for name in (*names, "spiece.model", "special_tokens_map.json"):
        if checkpoint.has(name) or name in names:
            checkpoint.path(name)  # recorded with its sha256; a missing one is named
    checkpoint.json("tokenizer_config.json", required=False)  # kept, for an export to write back
    tokenizer = from_t5_files(checkpoint.folder, max_vocab_size=config.target_vocab_size, start_id=config.start_id)
    if tokenizer.vocab_size > config.target_vocab_size:
        raise ValueError(
            f"{checkpoint.folder / names[0]} gives ids up to {tokenizer.vocab_size - 1}, beyond the model's "
            f"{config.target_vocab_size} embedding rows"
        )
    return Tokenizers(tokenizer, tokenizer)


def license_of(checkpoint):
    """The license the family's checkpoints are published under, where their README names none."""
    return LICENSE


def assign_weights(model, checkpoint):
    """Sets `model`'s weights from a T5 checkpoint, one tensor at a time (checked by `check_tensors`)."""
    assign(model, checkpoint, t5_tensors.weight_sources(model))


def _a(family):
    return f"an {family}" if family[0] in "AEIOUM" else f"a {family}"
