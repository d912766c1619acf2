"""mT5 checkpoints (`model_type: "mt5"`): T5's architecture (`families.t5`), read with mT5's settings.

mT5 is T5 v1.1 on 101 languages: "gated-gelu" by default, an output
projection of its own (`lm_head.weight`) that transformers never scales,
the embedding's where the weights hold none, no `<extra_id_N>` added to its
SentencePiece model (`extra_ids` 0). Everything else is read as `t5` reads
it.

Example:

>>> from keras_transformer.pretrained import import_pretrained
>>> import_pretrained("hf://google/mt5-small", "saved_models/mt5-small")  # doctest: +SKIP
"""

from keras_transformer.pretrained.families import t5

MODEL_TYPE = "mt5"
FAMILY = "mT5"
ADD_SOURCE_END = t5.ADD_SOURCE_END
outer_names = t5.outer_names
tokenizers = t5.tokenizers
license_of = t5.license_of
assign_weights = t5.assign_weights
check_buffers = t5.check_buffers


def model_config(hf_config, tensors, where="config.json", weights="the weights file"):
    """The `ModelConfig` of an mT5 `config.json`: `t5.model_config`, the decoder's output never scaled."""
    return t5.model_config(hf_config, tensors, where, weights, family=FAMILY, scaled=False)


def check_tensors(config, tensors, weights):
    """Every tensor an mT5 model of `config` needs is in `tensors`, of its shape, and nothing else is."""
    t5.check_tensors(config, tensors, weights, family=FAMILY)


def decoding_config(generation, config, where="generation_config.json"):
    """The checkpoint's generation settings, as `t5.decoding_config` reads them."""
    return t5.decoding_config(generation, config, where, family=FAMILY)
