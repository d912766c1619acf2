"""A run as an mBART-50 checkpoint: the other direction of `families.mbart`, in the same four parts.

What transformers' `MBartForConditionalGeneration` and `MBart50Tokenizer`
load: config.json (`hf_config`), the weights (`checkpoint_tensors`, named by
`mbart.weight_sources`), the tokenizer's own files as the import read them
and tokenizer_config.json, and generation_config.json. A run fine-tuned on
one pair is written with it as the checkpoint's defaults, as
`m2m100_export` writes M2M100's: `src_lang`/`tgt_lang`, and the target as
`forced_bos_token_id`. Where nothing changed, each file is written back
byte for byte.

Example:

>>> from keras_transformer.config import ModelConfig
>>> check_model(ModelConfig(source_vocab_size=9, target_vocab_size=9, d_model=8, num_heads=2))
Traceback (most recent call last):
...
ValueError: `norm_first`=False has no mBART equivalent: an mBART model has pre-norm layers
"""

import numpy as np

from keras_transformer.pretrained.checkpoints import TensorInfo
from keras_transformer.pretrained.families import bart, m2m100_export, mbart

MODEL_TYPE = mbart.MODEL_TYPE
ACTIVATION_NAMES = {"gelu": "gelu", "gelu_tanh": "gelu_new", "relu": "relu", "silu": "silu"}
CONFIG_BASE = {
    "model_type": MODEL_TYPE,
    "architectures": ["MBartForConditionalGeneration"],
    "is_encoder_decoder": True,
    "use_cache": True,
    "init_std": 0.02,
    "bos_token_id": 0,
    "forced_eos_token_id": 2,
    "tokenizer_class": "MBart50Tokenizer",
}
TOKENIZER_CONFIG = "tokenizer_config.json"
TOKENIZER_CLASS = "MBart50Tokenizer"
_REQUIRED = {  # option: (the value an mBART model has, what it means)
    "norm_first": (True, "pre-norm layers"),
    "norm": ("layer", "LayerNorms"),
    "position_layout": ("learned", "learned positions"),
    "position_offset": (mbart.POSITION_OFFSET, "two rows before position 0's"),
    "embedding_norm": (True, "a LayerNorm on its embeddings"),
    "share_embeddings": (True, "one embedding for both sides"),
    "tie_output_embedding": (True, "its output tied to the embedding"),
    "output_bias": (True, "a bias on its logits"),
    "feed_forward": ("plain", "a plain feed-forward"),
    "use_bias": (True, "biases"),
    "scale_attention": (True, "attention scores scaled"),
    "key_dim": (None, "heads of d_model / heads"),
}


def check_model(config):
    """A `ValueError` naming the first option of `config` (a `ModelConfig`) that an mBART model cannot hold."""
    bart.check_expressible(config, "mBART", _REQUIRED, mbart.LAYER_NORM_EPSILON, ACTIVATION_NAMES)


def hf_config(config, base=None):
    """config.json of an mBART model of `config` (a `ModelConfig`): `base`'s other fields, ours set."""
    check_model(config)
    data = dict(CONFIG_BASE if base is None else base)
    data.update(bart.config_fields(config, ACTIVATION_NAMES), tie_word_embeddings=True)
    return data


def reads_as_model(original, config):
    """Whether config.json `original` (a dict) imports as `config`: then it is written back as it was."""
    tensors = {name: TensorInfo(shape, "F32") for name, shape in mbart.tensor_shapes(config).items()}
    try:
        read = mbart.model_config(original, tensors)
    except ValueError:
        return False
    return read.replace(target_pad_id=config.target_pad_id) == config


def default_names(config):
    """The tensors besides the layers' that transformers' `save_pretrained` writes."""
    return {name for name in mbart.tensor_shapes(config) if not name.startswith(bart.LAYER_PREFIXES)}


def checkpoint_tensors(model, names=None):
    """`{name: float32 array}`: `model`'s weights as an mBART checkpoint's tensors (copies of the embedding where
    `names`, the source's `outer_names`, hold them)."""
    import keras

    config = model.config
    check_model(config)
    names = set(default_names(config) if names is None else names) | {"final_logits_bias"}
    shapes = mbart.tensor_shapes(config, names)
    tensors = {}
    for weight, name, transform in mbart.weight_sources(model, names):
        value = np.asarray(keras.ops.convert_to_numpy(weight), np.float32)
        shape = shapes[name]
        tensors[name] = value.reshape(shape[::-1]).T if transform is bart.transposed else value.reshape(shape)
    for name in sorted(names - tensors.keys()):
        if shapes.get(name) != tensors[mbart.EMBEDDING].shape:
            raise ValueError(f"an mBART checkpoint of this model has no tensor `{name}`")
        tensors[name] = tensors[mbart.EMBEDDING]  # the tied embedding under another name: a copy
    return {name: np.ascontiguousarray(value, np.float32) for name, value in tensors.items()}


def tokenizer_files(tokenizers, config, languages=None):
    """`({name: bytes}, state)`: the checkpoint's tokenizer files as imported (tokenizer_config.json apart)."""
    tokenizer = tokenizers.target
    if getattr(tokenizer, "family", None) != "mbart50":
        raise ValueError(
            f"a {type(tokenizer).__name__} is not an mBART-50 tokenizer: only imported mBART-50 runs are written as "
            "mBART checkpoints"
        )
    state = {
        "family": "mbart50",
        "language_ids": dict(tokenizer.languages),
        "source_position": "first",
        "defaults": (tokenizers.source.source_lang, tokenizer.target_lang),
        "languages": dict(languages) if languages else None,
    }
    return {name: data for name, data in tokenizer.files.items() if name != TOKENIZER_CONFIG}, state


def tokenizer_config(config, state, base=None):
    """tokenizer_config.json: `base`'s fields (else MBart50Tokenizer's), the run's languages set."""
    data = dict(base or {"tokenizer_class": TOKENIZER_CLASS})
    if state["languages"]:
        data.update(src_lang=state["languages"]["source_lang"], tgt_lang=state["languages"]["target_lang"])
    return dict(sorted(data.items()))


def reads_as_tokenizer_config(original, state):
    """Whether tokenizer_config.json `original` (a dict) is the run's: its class, and the languages it chose."""
    if original.get("tokenizer_class") not in (None, TOKENIZER_CLASS, TOKENIZER_CLASS + "Fast"):
        return False
    languages = state["languages"]
    return not languages or (
        original.get("src_lang") == languages["source_lang"] and original.get("tgt_lang") == languages["target_lang"]
    )


generation_config = m2m100_export.generation_config  # BART's settings, a fine-tuned pair's target forced


def reads_as_decoding(original, decoding, config, state=None):
    """Whether generation_config.json `original` (a dict) imports as `decoding` (and forces the run's target)."""
    try:
        same = mbart.decoding_config(original, config) == decoding
    except ValueError:
        return False
    languages = (state or {}).get("languages")
    forced = state["language_ids"][languages["target_lang"]] if languages else None
    return same and (forced is None or original.get("forced_bos_token_id") == forced)


def card(state):
    """What the model card says of an mBART-50 checkpoint: its class, tags, and how to translate with it."""
    codes = sorted(state["language_ids"], key=state["language_ids"].get)
    chosen = state["languages"] or {}
    source = chosen.get("source_lang") or state["defaults"][0] or codes[0]
    target = chosen.get("target_lang") or state["defaults"][1] or next(c for c in codes[::-1] if c != source)
    return {
        "kind": "An mBART-50 model",
        "tags": ("mbart", "mbart-50"),
        "usage": (
            f"from transformers import MBartForConditionalGeneration, {TOKENIZER_CLASS}",
            "",
            f'tokenizer = {TOKENIZER_CLASS}.from_pretrained("PATH_OR_REPO", src_lang="{source}")',
            'model = MBartForConditionalGeneration.from_pretrained("PATH_OR_REPO")',
            'batch = tokenizer(["Your sentence."], return_tensors="pt", padding=True)',
            f'ids = model.generate(**batch, forced_bos_token_id=tokenizer.convert_tokens_to_ids("{target}"))',
            "print(tokenizer.batch_decode(ids, skip_special_tokens=True))",
        ),
    }
