"""A run as a GPT-2 checkpoint: the other direction of `families.gpt2`, in the same four parts.

What transformers' `GPT2LMHeadModel` and its GPT-2 tokenizer load:

- the model: `hf_config(config, base)` is config.json, `check_model(config)`
  refuses, naming it, an option a GPT-2 has no equivalent for;
- the weights: `checkpoint_tensors(model)`, `model.safetensors`'s tensors
  under a `GPT2LMHeadModel`'s names, as `save_pretrained` writes them (the
  tied `lm_head` left out), from the table the import reads
  (`gpt2.weight_sources`): `c_attn` is the query, key and value side by side;
- the tokenizer: `tokenizer_files(tokenizers, config)`, the checkpoint's own
  files as the import read them, byte for byte (`vocab.json`, `merges.txt`,
  `tokenizer.json`, ...; a run imported before they were kept: the
  `tokenizer.json` the `tokenizers` library writes), and `tokenizer_config`;
- the generation settings: `generation_config(decoding, config, base)`.

Only imported runs are written so (this package's own GPT runs have a
SentencePiece tokenizer, not GPT-2's). `reads_as_model` and
`reads_as_decoding` say whether the source's config.json or
generation_config.json means what the run holds: an import, or a run
fine-tuned from one (which changes the weights alone), gets them back byte
for byte, and so its model.safetensors where the source was written by
today's `save_pretrained`.

Example:

>>> from keras_transformer.config import ModelConfig
>>> check_model(ModelConfig(source_vocab_size=9, target_vocab_size=9, d_model=8, num_heads=2))
Traceback (most recent call last):
...
ValueError: `architecture`='encoder_decoder' has no GPT-2 equivalent: a GPT-2 is the decoder alone
"""

import numpy as np

from keras_transformer.errors import ArgumentError
from keras_transformer.pretrained.checkpoints import TensorInfo
from keras_transformer.pretrained.families import gpt2
from keras_transformer.pretrained.families.weights import as_is, transposed

MODEL_TYPE = gpt2.MODEL_TYPE
TOKENIZER_CONFIG = "tokenizer_config.json"
# This package's activation names as GPT-2's `activation_function` (the inverse of `gpt2.ACTIVATIONS`).
ACTIVATION_NAMES = {"gelu_tanh": "gelu_new", "gelu": "gelu", "relu": "relu"}
CONFIG_BASE = {
    "model_type": MODEL_TYPE,
    "architectures": ["GPT2LMHeadModel"],
    "initializer_range": 0.02,
    "use_cache": True,
    "scale_attn_weights": True,
    "scale_attn_by_inverse_layer_idx": False,
    "reorder_and_upcast_attn": False,
    "add_cross_attention": False,
}
_REQUIRED = {  # option: (the value a GPT-2 has, what it means)
    "architecture": ("decoder_only", "the decoder alone"),
    "norm_first": (True, "pre-norm blocks"),
    "position_layout": ("learned", "learned positions"),
    "scale_embeddings": (False, "unscaled embeddings"),
    "embedding_norm": (False, "no LayerNorm after its embeddings"),
    "output_bias": (False, "no bias on its logits"),
}


def check_model(config):
    """A `ValueError` naming the first option of `config` (a `ModelConfig`) that a GPT-2 cannot hold."""
    for option, (value, meaning) in _REQUIRED.items():
        if getattr(config, option) != value:
            raise ValueError(f"`{option}`={getattr(config, option)!r} has no GPT-2 equivalent: a GPT-2 is {meaning}")
    if config.activation not in ACTIVATION_NAMES:
        raise ValueError(
            f"`activation`={config.activation!r} has no GPT-2 equivalent: it has {sorted(ACTIVATION_NAMES)}"
        )


def hf_config(config, base=None):
    """config.json of a GPT-2 of `config` (a `ModelConfig`): `base`'s other fields, ours set."""
    check_model(config)
    data = dict(CONFIG_BASE if base is None else base)
    data.update(
        vocab_size=config.target_vocab_size,
        n_positions=config.max_length,
        n_embd=config.d_model,
        n_layer=config.num_layers,
        n_head=config.num_heads,
        n_inner=None if config.d_ff == 4 * config.d_model else config.d_ff,
        activation_function=ACTIVATION_NAMES[config.activation],
        resid_pdrop=config.dropout,
        embd_pdrop=data.get("embd_pdrop", config.dropout),
        attn_pdrop=config.attention_dropout,
        layer_norm_epsilon=config.layer_norm_epsilon,
        bos_token_id=config.start_id,
        eos_token_id=config.end_id,
        pad_token_id=None if config.pad_id == config.end_id else config.pad_id,
        tie_word_embeddings=config.tie_output_embedding,
    )
    return data


def reads_as_model(original, config):
    """Whether config.json `original` (a dict) imports as `config`: then it is written back as it was."""
    required, _ = gpt2.tensor_shapes(config)
    tensors = {name: TensorInfo(shape, "F32") for name, shape in required.items()}
    try:
        read = gpt2.model_config(original, tensors)
    except ValueError:
        return False
    return read.replace(target_pad_id=config.target_pad_id) == config


def generation_config(decoding, config, base=None, state=None):
    """generation_config.json of `decoding` (a `DecodingConfig`) for a GPT-2 of `config`: `base`'s other fields.

    The inverse of `generation.language_model_decoding`: `max_new_tokens`
    (transformers' `max_length` also counts the prompt, and is left as
    `base` has it), `num_beams`, `length_penalty`, `early_stopping`, the
    banned ids as `bad_words_ids`, END forced where the run forces it. A
    setting `generate` has no equivalent for is a `ValueError` naming it.
    """
    if decoding.normalization != "length" and decoding.beam_size > 1 and decoding.alpha != 0:
        raise ArgumentError(
            f"`normalization`={decoding.normalization!r} (beam search over ((5 + length) / 6) ** {decoding.alpha:g}) "
            "has no transformers equivalent (it divides by length ** length_penalty): export with {beam_size=1} or "
            "{alpha=0}"
        )
    if decoding.softmax_over != "vocabulary":
        raise ArgumentError(
            f"`softmax_over`={decoding.softmax_over!r} has no GPT-2 equivalent: `generate` takes the "
            "log-softmax over the whole vocabulary"
        )
    data = dict(base or {})
    for key in ("max_new_tokens", "num_beams", "length_penalty", "early_stopping", "bad_words_ids"):
        data.pop(key, None)
    data.pop("forced_eos_token_id", None)
    data.update(bos_token_id=config.start_id, eos_token_id=config.end_id)
    if decoding.max_new_tokens:
        data["max_new_tokens"] = decoding.max_new_tokens
    if decoding.beam_size != 1:
        data["num_beams"] = decoding.beam_size
    if decoding.alpha != 1.0:
        data["length_penalty"] = float(decoding.alpha)
    if decoding.stopping == "beams_ended":
        data["early_stopping"] = True
    if decoding.banned_ids:
        data["bad_words_ids"] = [[int(i)] for i in decoding.banned_ids]
    if decoding.force_end:
        data["forced_eos_token_id"] = config.end_id
    return dict(sorted(data.items()))


def reads_as_decoding(original, decoding, config, state=None):
    """Whether generation_config.json `original` (a dict) imports as `decoding`: then it is written back."""
    try:
        return gpt2.decoding_config(original, config) == decoding
    except ValueError:
        return False


def checkpoint_tensors(model, names=None):
    """`{name: float32 array}`: `model`'s weights as a `GPT2LMHeadModel`'s tensors (the tied `lm_head` left out).

    `names` (a source's names beyond the layers') changes nothing: GPT-2's
    are written as today's `save_pretrained` writes them. A weight no tensor
    holds (an untied output's bias) must be zero, as the import set it.
    """
    import keras

    config = model.config
    check_model(config)
    required, _ = gpt2.tensor_shapes(config)
    tensors = {name: np.zeros(shape, np.float32) for name, shape in required.items()}
    for weight, name, transform in gpt2.weight_sources(model):
        value = np.asarray(keras.ops.convert_to_numpy(weight), np.float32)
        if name is None:
            if np.any(value):
                raise ValueError(f"the model's `{weight.path}` is not zero: a GPT-2 checkpoint has no such weight")
            continue
        shape = required[name]
        if transform is transposed:
            tensors[name] = value.reshape(shape[::-1]).T
        elif transform is as_is:
            tensors[name] = value.reshape(shape)
        else:  # `gpt2.Columns`: the query, key or value in `c_attn`
            block = tensors[name][..., transform.columns]
            tensors[name][..., transform.columns] = value.reshape(block.shape)
    return {name: np.ascontiguousarray(value, np.float32) for name, value in tensors.items()}


def tokenizer_files(tokenizers, config, languages=None):
    """`({name: bytes}, state)`: the checkpoint's tokenizer files as the import read them (tokenizer_config.json's
    aside), or the `tokenizers` library's `tokenizer.json` of a run imported before they were kept."""
    tokenizer = tokenizers.target
    if not hasattr(tokenizer, "tokenizer_json") or getattr(tokenizer, "mask_id", None) is not None:
        raise ValueError(
            f"a {type(tokenizer).__name__} is not a GPT-2 tokenizer: only imported GPT-2 runs are written as GPT-2 "
            "checkpoints"
        )
    files = {name: data for name, data in tokenizer.files.items() if name != TOKENIZER_CONFIG}
    if not files:
        files = {"tokenizer.json": tokenizer.tokenizer_json.encode("utf-8")}
    return files, {"special": _special_token(tokenizer, config)}


def _special_token(tokenizer, config):
    return tokenizer.token(config.end_id) or "<|endoftext|>"


def tokenizer_config(config, state, base=None):
    """tokenizer_config.json for `GPT2Tokenizer`: `base`'s other fields, or GPT-2's, its special token named."""
    special = state["special"]
    data = dict(base or {"tokenizer_class": "GPT2Tokenizer", "add_prefix_space": False})
    data.update({"bos_token": special, "eos_token": special, "unk_token": special})
    data.setdefault("model_max_length", config.max_length)
    return dict(sorted(data.items()))


def reads_as_tokenizer_config(original, state):
    """Whether tokenizer_config.json `original` (a dict) is a GPT-2 tokenizer's: then it is written back."""
    return original.get("tokenizer_class") in (None, "GPT2Tokenizer", "GPT2TokenizerFast")


def card(state):
    """What the model card says of a GPT-2 checkpoint: its class, tags and how to continue a prompt with it."""
    return {
        "kind": "A GPT-2 model",
        "tags": ("gpt2",),
        "pipeline_tag": "text-generation",
        "usage": (
            "from transformers import AutoTokenizer, GPT2LMHeadModel",
            "",
            'tokenizer = AutoTokenizer.from_pretrained("PATH_OR_REPO")',
            'model = GPT2LMHeadModel.from_pretrained("PATH_OR_REPO")',
            'ids = model.generate(**tokenizer(["Your prompt"], return_tensors="pt"), max_new_tokens=20)',
            "print(tokenizer.batch_decode(ids, skip_special_tokens=True))",
        ),
    }
