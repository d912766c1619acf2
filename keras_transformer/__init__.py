"""keras-transformer: the Transformer of "Attention Is All You Need" as Keras 3 layers."""

__version__ = "0.1.0"

import os as _os

# TensorFlow's default CPU allocator returns large buffers to the OS and maps
# them again, zero-filled, at every training step: on a 2-core machine that was
# a quarter of the step in page faults. Its BFC allocator keeps them. TensorFlow
# reads this variable at its first allocation, so importing this package before
# any tensor exists turns it on; set it to "false" beforehand to keep the default.
_os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")

from keras_transformer.decoding import beam_decode, greedy_decode, sample_decode
from keras_transformer.layers import *  # noqa: F401,F403
from keras_transformer.layers import __all__ as _layers_all
from keras_transformer.losses import MaskedSparseCategoricalCrossentropy
from keras_transformer.metrics import MaskedAccuracy
from keras_transformer.models import build_decoder_only, build_encoder_only, build_transformer
from keras_transformer.optimizers import Adam
from keras_transformer.schedules import WarmupSchedule

__all__ = list(_layers_all) + [
    "Adam",
    "MaskedAccuracy",
    "MaskedSparseCategoricalCrossentropy",
    "WarmupSchedule",
    "beam_decode",
    "build_decoder_only",
    "build_encoder_only",
    "build_transformer",
    "greedy_decode",
    "sample_decode",
]
# TensorFlow-only parts (tokenizers, datasets, serving, training) are imported
# from their modules, e.g. `from keras_transformer import export` or
# `from keras_transformer.training import train`, so that the layers and
# decoding also import on Keras's JAX backend.

# Imported on first use (they need TensorFlow): a module that moved into a folder, under the name the README
# and the notebooks import it by, and the one opener of model folders.
_LAZY = {
    "attention_maps": ("keras_transformer.plotting.attention_maps", None),
    "open_translator": ("keras_transformer.opener", "open_translator"),
}


def __getattr__(name):
    """`from keras_transformer import attention_maps` (or `open_translator`): imported on first use."""
    if name in _LAZY:
        import importlib

        module, attribute = _LAZY[name]
        module = importlib.import_module(module)
        return module if attribute is None else getattr(module, attribute)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
