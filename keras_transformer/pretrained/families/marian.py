"""OPUS-MT (Marian) checkpoints in this package's terms: config, weights, tokenizers, generation settings.

The module of one family of checkpoints, `model_type: "marian"`, in the four
parts every family has (`keras_transformer.pretrained.families`): the model
config, the weights, the tokenizers, the generation settings.

A Marian model is the paper's Transformer: post-norm layers, sinusoidal
positions (as `[sin | cos]` halves), embeddings scaled by √d_model and tied
to the output, whose logits get a bias of their own (`final_logits_bias`).
It pads with its last id and starts decoding from that padding id; its
outputs end with `</s>`, id 0, and its sources too.

Every field is read with its kind and range, and the sizes are held against
the weights file's tensors before anything is built (`shapes`).
"""

from keras_transformer.config import ModelConfig
from keras_transformer.kinds import MAX_LENGTH
from keras_transformer.layers.positional_encoding import positional_encoding
from keras_transformer.pretrained import buffers, shapes
from keras_transformer.pretrained.families import bart, marian_tensors
from keras_transformer.pretrained.families.marian_tensors import tensor_shapes, weight_sources
from keras_transformer.pretrained.families.weights import assign
from keras_transformer.pretrained.fields import Fields
from keras_transformer.pretrained.tensor_names import Layout
from keras_transformer.runs import Tokenizers
from keras_transformer.tokenizers.marian import MarianTokenizer

MODEL_TYPE = "marian"
FAMILY = "Marian"
ADD_SOURCE_END = True  # Marian's sources end with </s>
TOKENIZER_FORMAT = MarianTokenizer.FORMAT  # the kind of tokenizer its imports keep (`tokenizers.kinds`)
ACTIVATIONS = {"swish": "silu", "silu": "silu", "relu": "relu", "gelu": "gelu", "tanh": "tanh"}
LAYER_NORM_EPSILON = 1e-5  # torch.nn.LayerNorm's default, which Marian's layers use
_RATES = ("dropout", "attention_dropout", "activation_dropout")
# Keys of the BART-era configs (transformers 3 and early 4) that OPUS-MT uploads still hold, at the values every
# Marian model has; transformers 5 ignores them. Another value was a model of another shape (pre-norm layers, a
# norm on the embeddings, learned positions), which neither transformers 5 nor keras-transformer builds.
LEGACY_KEYS = {
    "static_position_embeddings": True,
    "normalize_before": False,
    "normalize_embedding": False,
    "add_final_layer_norm": False,
}
# What the tokenizer files may name as the special pieces: MarianTokenizer's, which the vocabulary holds.
SPECIAL_TOKENS = {"eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}
# The names of a checkpoint's tensors beyond the layers' (embeddings, position tables, the bias): its layout.
outer_names = marian_tensors.outer_names
# `MarianMTModel`'s names; a `MarianModel` stores its tensors without `model.` and has no head.
LAYOUT = Layout(prefix="model.", heads=("lm_head.", "final_logits_bias"))


def model_config(hf_config, tensors, where="config.json", weights="the weights file"):
    """The `ModelConfig` of a Marian `config.json` (a dict) whose weights file holds `tensors` (`TensorInfo`s).

    A field of the wrong kind, or one the tensors contradict, is a
    `ValueError` naming `where` and the field; what this package cannot
    build (encoder and decoder of other sizes) too.
    """
    fields = Fields(hf_config, where, FAMILY)
    for key, value in LEGACY_KEYS.items():
        if fields.bool(key, value) != value:
            raise ValueError(
                f"{where}: `{key}` is {str(not value).lower()}: a model of another shape than Marian's, which "
                "neither transformers 5 nor keras-transformer builds"
            )
    embedding = _embedding_name(tensors, fields)
    if embedding is None:
        raise ValueError(f"{weights} has no token embedding (`model.shared.weight`), which a Marian model holds")
    rows, width = bart.matrix(tensors[embedding], embedding, weights)
    d_model = fields.int("d_model", low=1, high=2**20)
    shapes.check_field(where, "d_model", d_model, width, f"columns in `{embedding}`", weights)
    source_vocab = fields.int("vocab_size", low=1)
    shapes.check_field(where, "vocab_size", source_vocab, rows, f"rows in `{embedding}`", weights)
    target_vocab = fields.int("decoder_vocab_size", source_vocab, low=1)
    share = fields.bool("share_encoder_decoder_embeddings", True)
    if share and source_vocab != target_vocab:
        raise ValueError(
            f"{where}: shared embeddings with vocab_size={source_vocab}, decoder_vocab_size={target_vocab}"
        )
    sizes = bart.stack_sizes(fields, tensors, weights, d_model)
    tie = fields.bool("tie_word_embeddings", True)
    return ModelConfig(
        source_vocab_size=source_vocab,
        target_vocab_size=target_vocab,
        **sizes,
        d_model=d_model,
        **{name: bart.rate(fields, name, default) for name, default in zip(_RATES, (0.1, 0.0, 0.0))},
        max_length=fields.int("max_position_embeddings", low=2, high=MAX_LENGTH),
        share_embeddings=share,
        tie_output_embedding=tie,
        activation=ACTIVATIONS[fields.choice("activation_function", sorted(ACTIVATIONS), "swish")],
        layer_norm_epsilon=LAYER_NORM_EPSILON,
        position_layout="concatenated",
        scale_embeddings=fields.bool("scale_embedding", False),
        output_bias=tie,
        pad_id=fields.single_id("pad_token_id", vocab_size=source_vocab),
        start_id=fields.single_id("decoder_start_token_id", vocab_size=target_vocab),
        end_id=fields.single_id("eos_token_id", vocab_size=target_vocab),
    ).check()


def check_tensors(config, tensors, weights):
    """Every tensor a Marian model of `config` needs is in `tensors`, of its shape, and nothing else is."""
    required, optional = tensor_shapes(config, tensors)
    shapes.check_shapes(required, optional, tensors, weights, FAMILY)


def check_buffers(config, checkpoint):
    """The stored copies of a tied embedding equal it; stored position tables equal the sinusoids computed."""
    buffers.check_copies(checkpoint, marian_tensors.tied_copies(config, checkpoint.tensors()))
    table = lambda rows: positional_encoding(rows, config.d_model, layout="concatenated")  # noqa: E731
    buffers.check_tables(checkpoint, {f"model.{side}.embed_positions.weight": table for side in ("encoder", "decoder")})


def decoding_config(generation, config, where="generation_config.json"):
    """The checkpoint's generation settings (`generation_config.json`, a dict) as a `DecodingConfig`.

    transformers' settings, read as every BART-derived family's are
    (`bart.generation_settings`). A `forced_bos_token_id` (a first token
    forced, which OPUS-MT's models never have: their target language is a
    token of the source) is refused rather than ignored.
    """
    forced = Fields(generation, where, FAMILY).raw("forced_bos_token_id", None)
    if forced is not None:
        raise ValueError(
            f"{where}: forced_bos_token_id={forced!r}"[:200] + " is not a Marian setting keras-transformer applies"
        )
    return bart.generation_settings(generation, config, where, FAMILY)


def tokenizers(checkpoint, config):
    """The checkpoint's source and target `MarianTokenizer`s (`runs.Tokenizers`), each keeping its files' names.

    Old uploads hold `source.spm`, `target.spm` and `vocab.json`, with a
    `tokenizer_config.json` of a few keys (`source_lang`, `target_lang`,
    `model_max_length`; no `separate_vocabs`: one vocabulary) or none, and
    a `special_tokens_map.json`: the special pieces either names must be
    Marian's (`SPECIAL_TOKENS`).

    A vocabulary that does not give every embedding row one piece (its ids
    exactly 0 to size - 1) is a `ValueError` naming it; so is one too large
    for the embedding to hold, before it is parsed.
    """
    tokenizer_config = checkpoint.json("tokenizer_config.json", required=False)
    for name in ("special_tokens_map.json", "tokenizer_config.json"):
        _check_special_tokens(checkpoint.json(name, required=False), checkpoint.folder / name)
    separate = tokenizer_config.get("separate_vocabs") is True or checkpoint.has("target_vocab.json")
    target_vocab = "target_vocab.json" if separate else "vocab.json"
    sides = (
        ("source.spm", "vocab.json", config.source_vocab_size, None),
        ("target.spm", target_vocab, config.target_vocab_size, config.start_id),
    )
    made = []
    for spm_name, vocab_name, size, start_id in sides:
        tokenizer = MarianTokenizer.from_files(
            checkpoint.path(spm_name), checkpoint.path(vocab_name), max_vocab_size=size, start_id=start_id
        )
        ids = sorted(tokenizer.vocab.values())
        if ids != list(range(size)):
            raise ValueError(
                f"{checkpoint.folder / vocab_name} does not cover the model's {size} embedding rows: its "
                f"{len(ids)} ids run from {ids[0]} to {ids[-1]}"
                + (" with gaps or repeats" if len(set(ids)) != len(ids) or ids[-1] - ids[0] + 1 != len(ids) else "")
            )
        made.append(tokenizer)
    return Tokenizers(*made)


def _check_special_tokens(settings, where):
    """The special pieces a tokenizer file names (a string, or an added token's `content`) are Marian's."""
    for key, piece in SPECIAL_TOKENS.items():
        value = settings.get(key)
        named = value.get("content") if isinstance(value, dict) else value
        if named is not None and named != piece:
            raise ValueError(f"{where}: `{key}` is {named!r}"[:200] + f"; keras-transformer reads Marian's {piece!r}")


def assign_weights(model, checkpoint):
    """Sets `model`'s weights from a Marian checkpoint, one tensor at a time (checked by `check_tensors`)."""
    assign(model, checkpoint, weight_sources(model, model.config, checkpoint.tensors()))


def _embedding_name(tensors, fields):
    share = fields.bool("share_encoder_decoder_embeddings", True)
    names = (
        ("model.shared.weight", "model.encoder.embed_tokens.weight")
        if share
        else ("model.encoder.embed_tokens.weight",)
    )
    return next((name for name in names if name in tensors), None)
