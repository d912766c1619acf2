"""The options that several export formats take, each once: its keyword, its flag, its kind and its `--help`.

A format lists the `Option`s it takes (`ExportFormat.options`): these, or
one of its own. `keras-transformer export` builds its flags from the
formats' options (`export_formats.all_options`), these first, in this order.

Example:

>>> BEAM_SIZE.flag, BEAM_SIZE.setting[1], JIT_COMPILE.flag, JIT_COMPILE.switch
('--beam', 'beam_size', '--no-xla', False)
"""

from keras_transformer.config import DecodingConfig
from keras_transformer.ctranslate2.conversion import QUANTIZATIONS
from keras_transformer.export_formats.format import Option

QUANTIZATION = Option(
    "quantization",
    "--format ctranslate2 or litert (int8 only): the weight type (default: float32, as trained)",
    flag="--quantization",
    choices=QUANTIZATIONS,
)
BEAM_SIZE = Option(
    "beam_size",
    "beam size of the default signature, 1 = greedy; transformers: generation_config.json's num_beams "
    "(default: the run's, else 4)",
    flag="--beam",
    setting=(DecodingConfig, "beam_size"),
)
ALPHA = Option(
    "alpha",
    "length-penalty exponent of the default signature's beam search (default: the run's, else 0.6)",
    flag="--alpha",
    setting=(DecodingConfig, "alpha"),
)
MAX_LENGTH = Option(
    "max_length",
    "tokens generated at most, END included (default: the run's, else the model's max_length)",
    flag="--max-length",
    setting=(DecodingConfig, "max_new_tokens"),
)
JIT_COMPILE = Option("jit_compile", "do not compile the decoder with XLA", flag="--no-xla", switch=False)
SOURCE_LANG = Option("source_lang", "a multilingual model's default source language")
TARGET_LANG = Option("target_lang", "a multilingual model's default target language")
SHARED = (QUANTIZATION, BEAM_SIZE, ALPHA, MAX_LENGTH, JIT_COMPILE, SOURCE_LANG, TARGET_LANG)
