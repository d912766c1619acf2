"""A run as an mT5 checkpoint (`model_type: mt5`): `t5_export`, with mT5's names.

Example:

>>> hf_config(ModelConfig(source_vocab_size=9, target_vocab_size=9, d_model=8, num_heads=2))  # doctest: +SKIP
"""

from keras_transformer.pretrained.families import mt5, t5_export

MODEL_TYPE = mt5.MODEL_TYPE
FAMILY = mt5.FAMILY
TOKENIZER_CONFIG = t5_export.TOKENIZER_CONFIG
checkpoint_tensors = t5_export.checkpoint_tensors
tokenizer_files = t5_export.tokenizer_files
tokenizer_config = t5_export.tokenizer_config
reads_as_tokenizer_config = t5_export.reads_as_tokenizer_config
generation_config = t5_export.generation_config
_BASE = {**t5_export.CONFIG_BASE, "model_type": MODEL_TYPE, "architectures": ["MT5ForConditionalGeneration"]}


def check_model(config):
    """A `ValueError` naming the first option of `config` that an mT5 model cannot hold (`t5_export.check_model`)."""
    t5_export.check_model(config, FAMILY)


def hf_config(config, base=None):
    """config.json of an mT5 model of `config`: `base`'s other fields, ours set."""
    return t5_export.hf_config(config, _BASE if base is None else base, FAMILY)


def reads_as_model(original, config):
    return t5_export.reads_as_model(original, config, mt5)


def reads_as_decoding(original, decoding, config, state=None):
    return t5_export.reads_as_decoding(original, decoding, config, state, mt5)


def card(state):
    return t5_export.card(state, "An mT5 model", ("mt5",), "MT5ForConditionalGeneration")
