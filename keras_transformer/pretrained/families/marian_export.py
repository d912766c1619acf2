"""A run as an OPUS-MT (Marian) checkpoint: the other direction of `families.marian`, in the same four parts.

What transformers' `MarianMTModel` and `MarianTokenizer` load:

- the model: `hf_config(config, base)` is config.json, `check_model(config)`
  refuses, naming it, an option a Marian model has no equivalent for;
- the weights: `checkpoint_tensors(model, names)`, `model.safetensors`'s tensors;
- the tokenizers: `tokenizer_files(tokenizers, config)`, the SentencePiece
  models and `vocab.json` (an import's files as they were read; this
  package's own vocabulary as Marian's `{piece: id}`, the ids unchanged);
- the generation settings: `generation_config(decoding, config, base)`.

`reads_as_model` and `reads_as_decoding` say whether a source checkpoint's
config.json or generation_config.json means what the run holds, so that an
export writes that file back byte for byte.

This package's own runs map to Marian exactly where their options allow.
Their positions interleave sines and cosines where Marian's table puts all
sines first: the two tables hold the same columns in another order, so the
export reorders the model's width the same way in every tensor
(`hidden_order`), an exact equivalent up to the order of float sums.

Example:

>>> from keras_transformer.config import ModelConfig
>>> hidden_order(ModelConfig(source_vocab_size=9, target_vocab_size=9, d_model=6, num_heads=2)).tolist()
[0, 2, 4, 1, 3, 5]
>>> check_model(ModelConfig(source_vocab_size=9, target_vocab_size=9, d_model=6, num_heads=2, norm_first=True))
Traceback (most recent call last):
...
ValueError: `norm_first`=True (pre-norm layers) has no Marian equivalent: a Marian model's layers are post-norm
"""

import json

import numpy as np

from keras_transformer.layers.positional_encoding import positional_encoding
from keras_transformer.pretrained.checkpoints import TensorInfo
from keras_transformer.pretrained.families import bart, marian
from keras_transformer.pretrained.families.marian_tensors import tensor_shapes, transposed, weight_sources
from keras_transformer.pretrained.model_card import MARIAN as MARIAN_CARD

MODEL_TYPE = marian.MODEL_TYPE
# The model settings a Marian checkpoint fixes, which its config.json cannot change: the runs written as one have them.
FIXED_SETTINGS = {"layer_norm_epsilon": marian.LAYER_NORM_EPSILON}
# This package's activation names as Marian's `activation_function` (the inverse of `marian.ACTIVATIONS`).
ACTIVATION_NAMES = {"silu": "swish", "swish": "swish", "relu": "relu", "gelu": "gelu", "tanh": "tanh"}
CONFIG_BASE = {
    "model_type": MODEL_TYPE,
    "architectures": ["MarianMTModel"],
    "is_encoder_decoder": True,
    "use_cache": True,
    "encoder_layerdrop": 0.0,
    "decoder_layerdrop": 0.0,
    "init_std": 0.02,
}
TOKENIZER_CONFIG = "tokenizer_config.json"
_EMBEDDINGS = ("model.shared.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight")
_INPUT_WIDTH = ("q_proj.weight", "k_proj.weight", "v_proj.weight", "fc1.weight")
_OUTPUT_WIDTH = ("out_proj.weight", "out_proj.bias", "fc2.weight", "fc2.bias", "layer_norm.weight", "layer_norm.bias")


def check_model(config):
    """A `ValueError` naming the first option of `config` (a `ModelConfig`) that a Marian model cannot hold."""
    if config.norm_first:
        raise ValueError(
            "`norm_first`=True (pre-norm layers) has no Marian equivalent: a Marian model's layers are post-norm"
        )
    if config.layer_norm_epsilon != marian.LAYER_NORM_EPSILON:
        raise ValueError(
            f"`layer_norm_epsilon`={config.layer_norm_epsilon!r} has no Marian equivalent: its LayerNorms use "
            f"{marian.LAYER_NORM_EPSILON!r}, which its config.json cannot change"
        )
    if config.activation not in ACTIVATION_NAMES:
        raise ValueError(
            f"`activation`={config.activation!r} has no Marian equivalent: it has {sorted(ACTIVATION_NAMES)}"
        )


def hidden_order(config):
    """The model's width in Marian's order: `order[j]` is our column that Marian's column `j` holds.

    The identity for a `"concatenated"` table (Marian's own); for an
    `"interleaved"` one, the even columns (sines) then the odd (cosines).
    """
    columns = np.arange(config.d_model)
    if config.position_layout == "concatenated":
        return columns
    return np.concatenate([columns[0::2], columns[1::2]])


def hf_config(config, base=None):
    """config.json of a Marian model of `config` (a `ModelConfig`): `base`'s other fields, ours set."""
    check_model(config)
    data = dict(CONFIG_BASE if base is None else base)
    data.update(
        bart.config_fields(config, ACTIVATION_NAMES),
        decoder_vocab_size=config.target_vocab_size,
        share_encoder_decoder_embeddings=config.share_embeddings,
        tie_word_embeddings=config.tie_output_embedding,
    )
    if "forced_eos_token_id" in data:
        data["forced_eos_token_id"] = config.end_id
    return data


def reads_as_model(original, config):
    """Whether config.json `original` (a dict) imports as `config`: then it is written back as it was."""
    names = default_names(config)
    required, optional = tensor_shapes(config, names)
    tensors = {name: TensorInfo(shape, "F32") for name, shape in {**optional, **required}.items() if name in names}
    tensors.update({name: TensorInfo(shape, "F32") for name, shape in required.items()})
    try:
        read = marian.model_config(original, tensors)
    except ValueError:
        return False
    return read.replace(target_pad_id=config.target_pad_id) == config


def generation_config(decoding, config, base=None, state=None):
    """generation_config.json of `decoding` (a `DecodingConfig`) for a model of `config`: `base`'s other fields.

    As every BART-derived family writes it (`bart.generation_json`); a
    setting transformers' `generate` has no equivalent for is a `ValueError`
    naming it. `state` (the tokenizers', `tokenizer_files`) changes nothing here.
    """
    return bart.generation_json(decoding, config, base)


def reads_as_decoding(original, decoding, config, state=None):
    """Whether generation_config.json `original` (a dict) imports as `decoding`: then it is written back."""
    try:
        return marian.decoding_config(original, config) == decoding
    except ValueError:
        return False


def default_names(config):
    """The tensors besides the layers' that transformers' `save_pretrained` writes for a model of `config`."""
    names = {"final_logits_bias"}
    if config.share_embeddings:
        names.add("model.shared.weight")
    else:
        names.update({"model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"})
    if not config.tie_output_embedding:
        names.add("lm_head.weight")
    return names


def checkpoint_tensors(model, names=None):
    """`{name: float32 array}`: `model`'s weights as a Marian checkpoint's tensors.

    `names` are the tensors besides the layers' to write (a source
    checkpoint's `outer_names`; None: `default_names`); the position tables
    and the copies of a shared embedding among them are made from the model.
    A model whose options Marian cannot hold is refused (`check_model`).
    """
    import keras

    config = model.config
    check_model(config)
    names = set(default_names(config) if names is None else names) | {"final_logits_bias"}
    required, optional = tensor_shapes(config, names)
    shapes = {**optional, **required}
    order = hidden_order(config)
    tensors = {}
    for weight, name, transform in weight_sources(model, config, names):
        value = np.asarray(keras.ops.convert_to_numpy(weight), np.float32)
        shape = shapes[name]
        value = value.reshape(shape[::-1]).T if transform is transposed else value.reshape(shape)
        tensors[name] = _reordered(name, value, order)
    for name in sorted(names - tensors.keys()):
        tensors[name] = _derived(name, config, tensors)
    return {name: np.ascontiguousarray(value, np.float32) for name, value in tensors.items()}


def _reordered(name, value, order):
    """`value` with its axis over the model's width in Marian's order (`hidden_order`)."""
    if name in _EMBEDDINGS or name == "lm_head.weight" or name.endswith(_INPUT_WIDTH):
        return value[:, order]
    if name.endswith(_OUTPUT_WIDTH):
        return value[order]
    return value  # the q/k/v and fc1 biases (heads' and the feed-forward's width), final_logits_bias


def _derived(name, config, tensors):
    """A tensor of the layout that no weight of the model is: a position table, a copy of an embedding, a bias."""
    if name.endswith("embed_positions.weight"):
        return positional_encoding(config.max_length, config.d_model, layout="concatenated")
    if name == "final_logits_bias":
        return np.zeros((1, config.target_vocab_size), np.float32)
    shared = tensors.get("model.shared.weight", tensors.get("model.encoder.embed_tokens.weight"))
    copies = {  # a layout that holds one embedding under several names: each a copy
        "model.shared.weight": shared,
        "model.encoder.embed_tokens.weight": shared,
        "model.decoder.embed_tokens.weight": shared if config.share_embeddings else None,
        "lm_head.weight": tensors.get("model.decoder.embed_tokens.weight", shared),
    }
    if copies.get(name) is None:
        raise ValueError(f"a Marian checkpoint of this model has no tensor `{name}`")
    return copies[name]


def tokenizer_files(tokenizers, config, languages=None):
    """`{name: bytes}`: source.spm, target.spm, vocab.json (and target_vocab.json) of a run's `tokenizers`.

    An import's `MarianTokenizer`s give their files as they were read; this
    package's own tokenizers (`SubwordTokenizer`) their SentencePiece model
    and `{piece: id}` of its pieces, so the ids stay the run's. Returns the
    files and the state the other files are written in: whether the
    vocabularies are separate (`separate_vocabs`). A Marian run has no
    `languages` (a run's config.json `languages`, which training refuses
    for a model of one pair).
    """
    source, target = tokenizers
    if all(getattr(tokenizer, "FORMAT", None) == marian.TOKENIZER_FORMAT for tokenizer in tokenizers):
        (source_spm, source_vocab), (target_spm, target_vocab) = (
            list(tokenizer.files().values()) for tokenizer in (source, target)
        )
        separate = target.file_names[1] != source.file_names[1] or target_vocab != source_vocab
    else:
        source_spm, target_spm = _model_proto(source), _model_proto(target)
        source_vocab, target_vocab = _vocab_json(source_spm, "source"), _vocab_json(target_spm, "target")
        separate = target_vocab != source_vocab
    files = {"source.spm": source_spm, "target.spm": target_spm, "vocab.json": source_vocab}
    if separate:
        files["target_vocab.json"] = target_vocab
    return files, separate


def tokenizer_config(config, separate, base=None):
    """tokenizer_config.json for `MarianTokenizer`: `base`'s other fields, the vocabularies and the length set."""
    data = dict(base or {})
    data.update(
        tokenizer_class="MarianTokenizer",
        separate_vocabs=separate,
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
        model_max_length=config.max_length,
    )
    return dict(sorted(data.items()))


def reads_as_tokenizer_config(original, separate):
    """Whether tokenizer_config.json `original` (a dict) reads the vocabularies as `separate` says."""
    return (original.get("separate_vocabs") is True) == separate and original.get("tokenizer_class") in (
        None,
        "MarianTokenizer",
    )


def _model_proto(tokenizer):
    proto = getattr(tokenizer, "model_proto", None)
    if not isinstance(proto, bytes):
        raise ValueError(
            f"a {type(tokenizer).__name__} has no SentencePiece model to write as Marian's: "
            "only SubwordTokenizer and MarianTokenizer runs are written"
        )
    return proto


def _vocab_json(model_proto, side):
    """`vocab.json` of a SentencePiece model of this package: each piece with its id, as `MarianTokenizer` reads."""
    import sentencepiece

    processor = sentencepiece.SentencePieceProcessor(model_proto=model_proto)
    pieces = [processor.id_to_piece(index) for index in range(processor.get_piece_size())]
    reserved = {
        processor.pad_id(): "<pad>",
        processor.unk_id(): "<unk>",
        processor.eos_id(): "</s>",
    }
    wrong = {index: pieces[index] for index, piece in reserved.items() if index < 0 or pieces[index] != piece}
    if wrong or len(set(pieces)) != len(pieces):
        raise ValueError(
            f"the {side} tokenizer's pieces cannot be Marian's vocab.json: it needs <pad>, <unk> and </s> at its "
            f"padding, unknown and end ids, each piece once. Received: {wrong or 'a piece twice'}"
        )
    vocab = {piece: index for index, piece in enumerate(pieces)}
    return (json.dumps(vocab, ensure_ascii=False, indent=2) + "\n").encode("utf-8")


def card(state):
    """What the model card says of a Marian checkpoint (`model_card.MARIAN`): its class, tags and example."""
    return MARIAN_CARD
