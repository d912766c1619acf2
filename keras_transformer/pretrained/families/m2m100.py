"""M2M100 and NLLB-200 checkpoints (`model_type: "m2m_100"`) in this package's terms.

The module of one family of checkpoints, in the four parts every family has
(`keras_transformer.pretrained.families`). Both M2M100 and NLLB-200 are this
architecture: the Transformer with pre-norm layers and a final LayerNorm on
each stack, ReLU, embeddings scaled by √d_model and tied to the output
without a bias, and fairseq's sinusoidal positions (`position_layout=
"fairseq"`, numbered from the padding id + 1), computed, not stored. They
decode from `</s>` (`decoder_start_token_id` 2), with the target language
forced as the first token, and a source starts with its language
(`[src_lang] X </s>`; NLLB's `legacy_behaviour` puts it last). The
tokenizers tell the two apart (`tokenizers.fairseq`).

Example:

>>> from keras_transformer.pretrained import import_pretrained
>>> import_pretrained("hf://facebook/nllb-200-distilled-600M", "saved_models/nllb")  # doctest: +SKIP
"""

from keras_transformer.config import ModelConfig
from keras_transformer.kinds import MAX_LENGTH
from keras_transformer.layers.positional_encoding import positional_encoding
from keras_transformer.pretrained import buffers, shapes
from keras_transformer.pretrained.families import bart
from keras_transformer.pretrained.families.generation import checkpoint_generation
from keras_transformer.pretrained.families.weights import as_is, assign, norm_sources
from keras_transformer.pretrained.fields import Fields
from keras_transformer.pretrained.tensor_names import Layout
from keras_transformer.runs import Tokenizers
from keras_transformer.tokenizers.fairseq import from_m2m100_files, from_nllb_files

MODEL_TYPE = "m2m_100"
FAMILY = "M2M100"
ADD_SOURCE_END = True  # a source ends with </s>
ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "swish": "silu", "silu": "silu", "tanh": "tanh"}
LAYER_NORM_EPSILON = 1e-5  # torch.nn.LayerNorm's default
# The license a family's checkpoints are published under, where the repository's README does not say.
LICENSES = {"nllb": "cc-by-nc-4.0", "m2m100": "mit"}
_RATES = ("dropout", "attention_dropout", "activation_dropout")
_EMBEDDINGS = ("model.shared.weight", "model.encoder.embed_tokens.weight")
_COPIES = ("model.decoder.embed_tokens.weight", "lm_head.weight")  # the tied embedding under other names
# `M2M100ForConditionalGeneration`'s names; an `M2M100Model` stores its tensors without `model.` and has no head.
LAYOUT = Layout(prefix="model.", heads=("lm_head.",))
# The position tables older transformers saved (a buffer then), fairseq's sinusoids with the padding row zero.
_TABLES = ("model.encoder.embed_positions.weights", "model.decoder.embed_positions.weights")


def model_config(hf_config, tensors, where="config.json", weights="the weights file"):
    """The `ModelConfig` of an M2M100 or NLLB `config.json` (a dict) whose weights file holds `tensors`.

    A field of the wrong kind, or one the tensors contradict, is a
    `ValueError` naming `where` and the field.
    """
    fields = Fields(hf_config, where, FAMILY)
    embedding = next((name for name in _EMBEDDINGS if name in tensors), None)
    if embedding is None:
        raise ValueError(f"{weights} has no token embedding (`model.shared.weight`), which an M2M100 model holds")
    rows, width = bart.matrix(tensors[embedding], embedding, weights)
    d_model = fields.int("d_model", low=1, high=2**20)
    shapes.check_field(where, "d_model", d_model, width, f"columns in `{embedding}`", weights)
    vocab = fields.int("vocab_size", low=1)
    shapes.check_field(where, "vocab_size", vocab, rows, f"rows in `{embedding}`", weights)
    if not fields.bool("tie_word_embeddings", True):
        raise ValueError(f"{where}: `tie_word_embeddings` false is not an M2M100 model keras-transformer imports")
    start, end = (fields.single_id(key, vocab_size=vocab) for key in ("decoder_start_token_id", "eos_token_id"))
    return ModelConfig(
        source_vocab_size=vocab,
        target_vocab_size=vocab,
        **bart.stack_sizes(fields, tensors, weights, d_model),
        d_model=d_model,
        **{name: bart.rate(fields, name, default) for name, default in zip(_RATES, (0.1, 0.1, 0.0))},
        max_length=fields.int("max_position_embeddings", low=2, high=MAX_LENGTH),
        share_embeddings=True,
        tie_output_embedding=True,
        norm_first=True,
        activation=ACTIVATIONS[fields.choice("activation_function", sorted(ACTIVATIONS), "relu")],
        layer_norm_epsilon=LAYER_NORM_EPSILON,
        position_layout="fairseq",
        scale_embeddings=fields.bool("scale_embedding", True),
        output_bias=False,
        pad_id=fields.single_id("pad_token_id", vocab_size=vocab),
        start_id=start,
        end_id=end,
    ).check()


def check_tensors(config, tensors, weights):
    """Every tensor an M2M100 model of `config` needs is in `tensors`, of its shape, and nothing else is."""
    d, vocab = config.d_model, config.source_vocab_size
    required = {embedding_name(tensors): (vocab, d), **bart.stack_shapes(config)}
    for side in ("encoder", "decoder"):
        required[f"model.{side}.layer_norm.weight"] = required[f"model.{side}.layer_norm.bias"] = (d,)
    optional = {name: (vocab, d) for name in (*_EMBEDDINGS, *_COPIES)}
    for name in _TABLES:  # as many rows as the model had positions when it was saved
        if name in tensors and len(tensors[name].shape) == 2 and tensors[name].shape[0] >= config.pad_id + 1:
            optional[name] = (tensors[name].shape[0], d)
    shapes.check_shapes(required, optional, tensors, weights, FAMILY)


def outer_names(tensors):
    """The names among `tensors` beyond the layers' (embeddings, final norms) that an export writes again.

    The position tables of older uploads are left out: transformers computes them and no longer saves them.
    """
    return [name for name in bart.outer_names(tensors) if name not in _TABLES]


def check_buffers(config, checkpoint):
    """The stored copies of the tied embedding equal it; stored position tables equal fairseq's sinusoids."""
    original = embedding_name(checkpoint.tensors())
    buffers.check_copies(checkpoint, {name: original for name in (*_EMBEDDINGS, *_COPIES)})

    def table(rows):
        values = positional_encoding(rows, config.d_model, layout="fairseq")
        values[config.pad_id] = 0  # fairseq's padding position
        return values

    buffers.check_tables(checkpoint, dict.fromkeys(_TABLES, table))


def decoding_config(generation, config, where="generation_config.json"):
    """The checkpoint's generation settings as a `DecodingConfig` (`bart.generation_settings`).

    Its `forced_bos_token_id`, where it names one, is a default target
    language (`tokenizers`' `target_lang`), not a setting of the search.
    """
    return bart.generation_settings(generation, config, where, FAMILY)


def tokenizers(checkpoint, config):
    """The checkpoint's `FairseqTokenizer`, as `runs.Tokenizers` (one for both sides: one vocabulary).

    NLLB's (`tokenizer.json`) or M2M100's (`vocab.json` and
    `sentencepiece.bpe.model`), as its `tokenizer_config.json` says (else as
    its files do). Its ids must lie within the embedding's rows; the
    generation settings' `forced_bos_token_id` is its default target language.
    """
    kind = family_of(checkpoint)
    files = ("tokenizer.json",) if kind == "nllb" else ("vocab.json", "sentencepiece.bpe.model")
    for name in files + ("tokenizer_config.json", "special_tokens_map.json"):
        if checkpoint.has(name) or name in files:
            checkpoint.path(name)  # recorded with its sha256; a missing one is named
    reader = from_nllb_files if kind == "nllb" else from_m2m100_files
    tokenizer = reader(checkpoint.folder, max_vocab_size=config.target_vocab_size)
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


def family_of(checkpoint):
    """`"nllb"` or `"m2m100"`: the tokenizer class its `tokenizer_config.json` names, else its files."""
    settings = checkpoint.json("tokenizer_config.json", required=False)
    named = str(settings.get("tokenizer_class") or "")
    if named.startswith("Nllb"):
        return "nllb"
    if named.startswith("M2M100"):
        return "m2m100"
    return "m2m100" if checkpoint.has("vocab.json") else "nllb"


def license_of(checkpoint):
    """The license of the checkpoint's family, where its own README does not name one."""
    return LICENSES[family_of(checkpoint)]


def assign_weights(model, checkpoint):
    """Sets `model`'s weights from an M2M100 checkpoint, one tensor at a time (checked by `check_tensors`)."""
    assign(model, checkpoint, weight_sources(model, checkpoint.tensors()))


def weight_sources(model, names):
    """`(model weight, tensor name, transform)` of every weight of an M2M100 `model`: import and export read it.

    `names` are the tensors a checkpoint holds, which name the one token
    embedding (`model.shared.weight`, else the encoder's `embed_tokens`);
    the other names it may go by (the decoder's, `lm_head.weight`) are
    copies of it, and the positions are computed, never stored.
    """
    sources = [(model.encoder_embedding.embeddings, embedding_name(names), as_is)]
    for side, norm in (("encoder", model.encoder_norm), ("decoder", model.decoder_norm)):
        sources += norm_sources(norm, f"model.{side}.layer_norm")
    return sources + bart.stack_sources(model)


def tensor_shapes(config, names=()):
    """`{name: shape}` of the tensors an M2M100 model of `config` is written as (the embedding's copies in `names`)."""
    d, vocab = config.d_model, config.source_vocab_size
    shapes = {embedding_name(names): (vocab, d), **bart.stack_shapes(config)}
    for side in ("encoder", "decoder"):
        shapes[f"model.{side}.layer_norm.weight"] = shapes[f"model.{side}.layer_norm.bias"] = (d,)
    shapes.update({name: (vocab, d) for name in (*_EMBEDDINGS, *_COPIES) if name in names})
    return shapes


def embedding_name(names):
    """The token embedding's tensor among `names`: `model.shared.weight`, else the encoder's `embed_tokens`."""
    return next((name for name in _EMBEDDINGS if name in names), _EMBEDDINGS[0])
