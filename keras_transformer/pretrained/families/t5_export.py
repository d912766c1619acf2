"""A run as a T5-family checkpoint: the other direction of `families.t5`, in the same four parts.

What transformers' `T5ForConditionalGeneration` and `T5Tokenizer` load:

- the model: `hf_config(config, base)` is config.json, `check_model(config)`
  refuses, naming it, an option a T5 model has no equivalent for;
- the weights: `checkpoint_tensors(model, names)`, named by the table both
  directions read (`t5_tensors.weight_sources`);
- the tokenizer: `tokenizer_files`, the checkpoint's own files as the import
  read them (`tokenizer.json`, or `spiece.model`), and `tokenizer_config`;
- the generation settings: `generation_config(decoding, config, base, state)`.

Only imported runs are written so; where nothing changed, each file is
written back byte for byte. `mt5_export` writes mT5's (`model_type: mt5`).

Example:

>>> from keras_transformer.config import ModelConfig
>>> check_model(ModelConfig(source_vocab_size=9, target_vocab_size=9, d_model=8, num_heads=2))
Traceback (most recent call last):
...
ValueError: `norm_first`=False has no T5 equivalent: a T5 model has pre-norm layers
"""

import numpy as np

from keras_transformer.pretrained.checkpoints import TensorInfo
from keras_transformer.pretrained.families import bart, t5, t5_tensors

MODEL_TYPE = t5.MODEL_TYPE
FAMILY = t5.FAMILY
CONFIG_BASE = {
    "model_type": MODEL_TYPE,
    "architectures": ["T5ForConditionalGeneration"],
    "is_encoder_decoder": True,
    "use_cache": True,
    "initializer_factor": 1.0,
}
TOKENIZER_CONFIG = "tokenizer_config.json"
# This package's activations as transformers names them in `feed_forward_proj` (gated GELU: "gated-gelu").
ACTIVATION_NAMES = {"relu": "relu", "gelu": "gelu", "gelu_tanh": "gelu_new", "silu": "silu"}
_REQUIRED = {  # option: (the value a T5 model has, what it means)
    "norm_first": (True, "pre-norm layers"),
    "norm": ("rms", "RMS norms"),
    "position_layout": ("relative", "a relative position bias"),
    "share_embeddings": (True, "one embedding for both sides"),
    "scale_embeddings": (False, "embeddings not scaled"),
    "use_bias": (False, "no biases"),
    "scale_attention": (False, "attention scores not scaled"),
    "output_bias": (False, "no bias on its logits"),
    "embedding_norm": (False, "no norm on its embeddings"),
}


def check_model(config, family=FAMILY):
    """A `ValueError` naming the first option of `config` (a `ModelConfig`) that a T5 model cannot hold."""
    for option, (value, meaning) in _REQUIRED.items():
        if getattr(config, option) != value:
            article = "an" if family[0] in "aeiouAEIOUM" else "a"
            raise ValueError(
                f"`{option}`={getattr(config, option)!r} has no {family} equivalent: {article} {family} model has "
                f"{meaning}"
            )
    feed_forward_proj(config)


def feed_forward_proj(config):
    """config.json's `feed_forward_proj` of `config`: `relu`, `gated-gelu` (gated `gelu_tanh`), ..."""
    if config.activation not in ACTIVATION_NAMES:
        raise ValueError(f"`activation`={config.activation!r} has no T5 equivalent: it has {sorted(ACTIVATION_NAMES)}")
    if config.feed_forward == "gated":
        return "gated-gelu" if config.activation == "gelu_tanh" else f"gated-{ACTIVATION_NAMES[config.activation]}"
    return ACTIVATION_NAMES[config.activation]


def hf_config(config, base=None, family=FAMILY):
    """config.json of a T5 model of `config` (a `ModelConfig`): `base`'s other fields, ours set."""
    check_model(config, family)
    data = dict(CONFIG_BASE if base is None else base)
    key_dim = config.d_model // config.num_heads if config.key_dim is None else config.key_dim
    data.update(
        vocab_size=config.source_vocab_size,
        d_model=config.d_model,
        d_kv=key_dim,
        d_ff=config.d_ff,
        num_layers=config.num_layers,
        num_decoder_layers=config.decoder_layers,
        num_heads=config.num_heads,
        relative_attention_num_buckets=config.relative_attention_num_buckets,
        relative_attention_max_distance=config.relative_attention_max_distance,
        dropout_rate=config.dropout,
        layer_norm_epsilon=config.layer_norm_epsilon,
        feed_forward_proj=feed_forward_proj(config),
        n_positions=config.max_length,
        pad_token_id=config.pad_id,
        eos_token_id=config.end_id,
        decoder_start_token_id=config.start_id,
        tie_word_embeddings=config.tie_output_embedding,
    )
    if family == FAMILY:  # transformers 5 reads T5's scaling from here (mT5 never scales)
        data["scale_decoder_outputs"] = config.scale_output
    return data


def reads_as_model(original, config, family_module=t5):
    """Whether config.json `original` (a dict) imports as `config`: then it is written back as it was."""
    tensors = {name: TensorInfo(shape, "F32") for name, shape in t5_tensors.tensor_shapes(config).items()}
    try:
        read = family_module.model_config(original, tensors)
    except ValueError:
        return False
    return read.replace(target_pad_id=config.target_pad_id) == config


def default_names(config):
    """The tensors besides the blocks' that transformers' `save_pretrained` writes: the embedding, the final norms."""
    return {name for name in t5_tensors.tensor_shapes(config) if not name.startswith(t5_tensors.LAYER_PREFIXES)}


def checkpoint_tensors(model, names=None):
    """`{name: float32 array}`: `model`'s weights as a T5 checkpoint's tensors.

    `names` are the tensors besides the blocks' to write (a source
    checkpoint's `outer_names`; None: `default_names`): the embedding's other
    names among them are copies of it. The unused table of old checkpoints
    (`t5_tensors.UNUSED`, which transformers ignores) is not written.
    """
    import keras

    config = model.config
    names = (set(default_names(config)) if names is None else set(names)) - {t5_tensors.UNUSED}
    shapes = {**t5_tensors.optional_shapes(config), **t5_tensors.tensor_shapes(config)}
    tensors = {}
    for weight, name, transform in t5_tensors.weight_sources(model):
        value = np.asarray(keras.ops.convert_to_numpy(weight), np.float32)
        shape = shapes[name]
        tensors[name] = value.reshape(shape[::-1]).T if transform is bart.transposed else value.reshape(shape)
    embedding = tensors[t5_tensors.EMBEDDING]
    for name in sorted(names - tensors.keys()):
        if shapes.get(name) != embedding.shape:
            raise ValueError(f"a T5 checkpoint of this model has no tensor `{name}`")
        tensors[name] = embedding  # the shared embedding under another name (a copy)
    return {name: np.ascontiguousarray(value, np.float32) for name, value in tensors.items()}


def tokenizer_files(tokenizers, config, languages=None):
    """`({name: bytes}, state)`: the checkpoint's tokenizer files as imported (tokenizer_config.json apart)."""
    tokenizer = tokenizers.target
    files = getattr(tokenizer, "files", None)
    if not isinstance(files, dict) or getattr(tokenizer, "target_in_source", None) is None:
        raise ValueError(
            f"a {type(tokenizer).__name__} is not a T5 tokenizer: only imported T5-family runs are written as T5 "
            "checkpoints"
        )
    state = {"languages": dict(tokenizer.languages), "chosen": dict(languages) if languages else None}
    return {name: data for name, data in files.items() if name != TOKENIZER_CONFIG}, state


def tokenizer_config(config, state, base=None):
    """tokenizer_config.json: `base` as it was, or T5Tokenizer's."""
    return dict(sorted((base or {"tokenizer_class": "T5Tokenizer"}).items()))


def reads_as_tokenizer_config(original, state):
    """Whether tokenizer_config.json `original` (a dict) is the run's: a T5 tokenizer's."""
    return original.get("tokenizer_class") in (None, "T5Tokenizer", "T5TokenizerFast")


def generation_config(decoding, config, base=None, state=None):
    """generation_config.json of `decoding` for a model of `config`, `base`'s other fields kept."""
    return dict(sorted(bart.generation_json(decoding, config, base).items()))


def reads_as_decoding(original, decoding, config, state=None, family_module=t5):
    """Whether generation_config.json `original` (a dict) imports as `decoding`."""
    try:
        return family_module.decoding_config(original, config) == decoding
    except ValueError:
        return False


def card(state, kind="A T5 model", tags=("t5",), model_class="T5ForConditionalGeneration"):
    """What the model card says of a T5-family checkpoint: its class, tags, and how to translate with it."""
    codes = sorted(state["languages"], key=state["languages"].get)
    chosen = (state.get("chosen") or {}).get("target_lang")
    text = f"<2{chosen or codes[0]}> Your sentence." if codes else "translate English to German: Your sentence."
    return {
        "kind": "A MADLAD-400 model (T5's architecture)" if codes else kind,
        "tags": tags,
        "usage": (
            f"from transformers import {model_class}, T5Tokenizer",
            "",
            'tokenizer = T5Tokenizer.from_pretrained("PATH_OR_REPO")',
            f'model = {model_class}.from_pretrained("PATH_OR_REPO")',
            f'batch = tokenizer(["{text}"], return_tensors="pt", padding=True)',
            "print(tokenizer.batch_decode(model.generate(**batch), skip_special_tokens=True))",
        ),
    }
