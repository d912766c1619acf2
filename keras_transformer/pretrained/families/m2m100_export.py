"""A run as an M2M100 or NLLB-200 checkpoint: the other direction of `families.m2m100`, in the same four parts.

What transformers' `M2M100ForConditionalGeneration` and its tokenizers
(`NllbTokenizer`, `M2M100Tokenizer`) load:

- the model: `hf_config(config, base)` is config.json, `check_model(config)`
  refuses, naming it, an option an M2M100 model has no equivalent for;
- the weights: `checkpoint_tensors(model, names)`, `model.safetensors`'s
  tensors, named by the table both directions read (`m2m100.weight_sources`);
- the tokenizers: `tokenizer_files(tokenizers, config, languages)`, the
  checkpoint's own files as the import read them (`tokenizer.json`; or
  `vocab.json` and `sentencepiece.bpe.model`), and `tokenizer_config`;
- the generation settings: `generation_config(decoding, config, base, state)`.

Only imported runs are written so (this package's own runs are Marian's,
`families.writer_of`). A run fine-tuned on one language pair
(`train --source-lang --target-lang`, config.json's `languages`) is written
with that pair as the checkpoint's defaults, as the run translates: its
`src_lang` and `tgt_lang` in tokenizer_config.json, and its target
language as generation_config.json's `forced_bos_token_id`; everything
else it did not change is written back byte for byte.

Example:

>>> from keras_transformer.config import ModelConfig
>>> check_model(ModelConfig(source_vocab_size=9, target_vocab_size=9, d_model=8, num_heads=2))
Traceback (most recent call last):
...
ValueError: `norm_first`=False has no M2M100 equivalent: an M2M100 model has pre-norm layers
"""

import numpy as np

from keras_transformer.pretrained.checkpoints import TensorInfo
from keras_transformer.pretrained.families import bart, m2m100

MODEL_TYPE = m2m100.MODEL_TYPE
# This package's activation names as M2M100's `activation_function` (the inverse of `m2m100.ACTIVATIONS`).
ACTIVATION_NAMES = {"relu": "relu", "gelu": "gelu", "silu": "silu", "tanh": "tanh"}
CONFIG_BASE = {
    "model_type": MODEL_TYPE,
    "architectures": ["M2M100ForConditionalGeneration"],
    "is_encoder_decoder": True,
    "use_cache": True,
    "encoder_layerdrop": 0.05,
    "decoder_layerdrop": 0.05,
    "init_std": 0.02,
    "bos_token_id": 0,  # fairseq's <s>
}
TOKENIZER_CONFIG = "tokenizer_config.json"
TOKENIZER_CLASSES = {"nllb": "NllbTokenizer", "m2m100": "M2M100Tokenizer"}
_REQUIRED = {  # option: (the value an M2M100 model has, what it means)
    "norm_first": (True, "pre-norm layers"),
    "position_layout": ("fairseq", "fairseq's sinusoidal positions"),
    "share_embeddings": (True, "one embedding for both sides"),
    "tie_output_embedding": (True, "its output tied to the embedding"),
    "output_bias": (False, "no bias on its logits"),
}


def check_model(config):
    """A `ValueError` naming the first option of `config` (a `ModelConfig`) that an M2M100 model cannot hold."""
    bart.check_expressible(config, "M2M100", _REQUIRED, m2m100.LAYER_NORM_EPSILON, ACTIVATION_NAMES)


def hf_config(config, base=None):
    """config.json of an M2M100 model of `config` (a `ModelConfig`): `base`'s other fields, ours set."""
    check_model(config)
    data = dict(CONFIG_BASE if base is None else base)
    data.update(bart.config_fields(config, ACTIVATION_NAMES), tie_word_embeddings=True)
    return data


def reads_as_model(original, config):
    """Whether config.json `original` (a dict) imports as `config`: then it is written back as it was."""
    tensors = {name: TensorInfo(shape, "F32") for name, shape in m2m100.tensor_shapes(config).items()}
    try:
        read = m2m100.model_config(original, tensors)
    except ValueError:
        return False
    return read.replace(target_pad_id=config.target_pad_id) == config


def default_names(config):
    """The tensors besides the layers' that transformers' `save_pretrained` writes: the shared embedding, the norms."""
    return {name for name in m2m100.tensor_shapes(config) if not name.startswith(bart.LAYER_PREFIXES)}


def checkpoint_tensors(model, names=None):
    """`{name: float32 array}`: `model`'s weights as an M2M100 checkpoint's tensors.

    `names` are the tensors besides the layers' to write (a source
    checkpoint's `outer_names`; None: `default_names`): the embedding's
    other names among them are copies of it. A model whose options M2M100
    cannot hold is refused (`check_model`).
    """
    import keras

    config = model.config
    check_model(config)
    names = set(default_names(config) if names is None else names)
    shapes = m2m100.tensor_shapes(config, names)
    tensors = {}
    for weight, name, transform in m2m100.weight_sources(model, names):
        value = np.asarray(keras.ops.convert_to_numpy(weight), np.float32)
        shape = shapes[name]
        tensors[name] = value.reshape(shape[::-1]).T if transform is bart.transposed else value.reshape(shape)
    embedding = tensors[m2m100.embedding_name(names)]
    for name in sorted(names - tensors.keys()):
        if shapes.get(name) != embedding.shape:
            raise ValueError(f"an M2M100 checkpoint of this model has no tensor `{name}`")
        tensors[name] = embedding  # a layout that holds the tied embedding under several names: each a copy
    return {name: np.ascontiguousarray(value, np.float32) for name, value in tensors.items()}


def tokenizer_files(tokenizers, config, languages=None):
    """`({name: bytes}, state)`: the checkpoint's tokenizer files as imported, and the state the JSON files follow.

    The files are those the import read (`FairseqTokenizer.files`), byte
    for byte, but tokenizer_config.json (`tokenizer_config`). `state` holds
    the tokenizer's family, its language ids and source position, and
    `languages`: the pair a fine-tuned run chose (config.json's), or None.
    """
    tokenizer = tokenizers.target
    files = getattr(tokenizer, "files", None)
    if not isinstance(files, dict) or getattr(tokenizer, "family", None) not in TOKENIZER_CLASSES:
        raise ValueError(
            f"a {type(tokenizer).__name__} is not an M2M100 or NLLB tokenizer: only imported M2M100 and NLLB-200 "
            "runs are written as M2M100 checkpoints"
        )
    state = {
        "family": tokenizer.family,
        "language_ids": dict(tokenizer.languages),
        "source_position": tokenizer.source_position,
        "defaults": (tokenizers.source.source_lang, tokenizer.target_lang),
        "languages": dict(languages) if languages else None,
    }
    return {name: data for name, data in files.items() if name != TOKENIZER_CONFIG}, state


def tokenizer_config(config, state, base=None):
    """tokenizer_config.json for the tokenizer's transformers class: `base`'s other fields, the run's languages set."""
    data = dict(base or {"tokenizer_class": TOKENIZER_CLASSES[state["family"]]})
    if base is None and state["source_position"] == "last":
        data["legacy_behaviour"] = True
    languages = state["languages"]
    if languages:
        data.update(src_lang=languages["source_lang"], tgt_lang=languages["target_lang"])
    return dict(sorted(data.items()))


def reads_as_tokenizer_config(original, state):
    """Whether tokenizer_config.json `original` (a dict) is the run's: its class, and the languages it chose."""
    if original.get("tokenizer_class") not in (None, TOKENIZER_CLASSES[state["family"]]):
        return False
    languages = state["languages"]
    return not languages or (
        original.get("src_lang") == languages["source_lang"] and original.get("tgt_lang") == languages["target_lang"]
    )


def generation_config(decoding, config, base=None, state=None):
    """generation_config.json of `decoding` for a model of `config`, `base`'s other fields kept.

    As every BART-derived family writes it (`bart.generation_json`); a run
    fine-tuned on one pair (`state["languages"]`) forces its target
    language first (`forced_bos_token_id`), as it translates by default.
    """
    data = bart.generation_json(decoding, config, base)
    forced = _forced_target(state)
    if forced is not None:
        data["forced_bos_token_id"] = forced
    return dict(sorted(data.items()))


def reads_as_decoding(original, decoding, config, state=None):
    """Whether generation_config.json `original` (a dict) imports as `decoding` (and forces the run's target)."""
    try:
        same = m2m100.decoding_config(original, config) == decoding
    except ValueError:
        return False
    forced = _forced_target(state)
    return same and (forced is None or original.get("forced_bos_token_id") == forced)


def _forced_target(state):
    """The id of the target language a fine-tuned run chose, or None."""
    languages = (state or {}).get("languages")
    return state["language_ids"][languages["target_lang"]] if languages else None


def card(state):
    """What the model card says of an M2M100 or NLLB-200 checkpoint: its class, tags, and how to translate with it.

    The example translates from and into the run's languages (a fine-tuned
    run's pair, else its tokenizer's defaults, else the first codes).
    """
    nllb = state["family"] == "nllb"
    codes = sorted(state["language_ids"], key=state["language_ids"].get)
    chosen = state["languages"] or {}
    source = chosen.get("source_lang") or state["defaults"][0] or codes[0]
    target = chosen.get("target_lang") or state["defaults"][1] or next(c for c in codes[::-1] if c != source)
    tokenizer = TOKENIZER_CLASSES[state["family"]]
    forced = f'tokenizer.convert_tokens_to_ids("{target}")' if nllb else f'tokenizer.get_lang_id("{target}")'
    return {
        "kind": "An NLLB-200 model (M2M100's architecture)" if nllb else "An M2M100 model",
        "tags": ("m2m_100", "nllb") if nllb else ("m2m_100",),
        "usage": (
            f"from transformers import M2M100ForConditionalGeneration, {tokenizer}",
            "",
            f'tokenizer = {tokenizer}.from_pretrained("PATH_OR_REPO", src_lang="{source}")',
            'model = M2M100ForConditionalGeneration.from_pretrained("PATH_OR_REPO")',
            'batch = tokenizer(["Your sentence."], return_tensors="pt", padding=True)',
            f"ids = model.generate(**batch, forced_bos_token_id={forced})",
            "print(tokenizer.batch_decode(ids, skip_special_tokens=True))",
        ),
    }
