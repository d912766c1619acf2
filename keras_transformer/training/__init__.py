"""Training a Transformer into a run directory: the engine of `keras-transformer train`.

`train` groups its arguments (`options`) into a `TrainingRun` (`run`), which
checks them and the destination (`destination`), loads the splits
(`keras_transformer.datasets.splits`) and trains one model in named steps
(`model_run`: the tokenizer and batches of `data`, the paper's recipe of
`recipe`, the `callbacks`, the strategy of `distribution`) or an ensemble's
members (`ensembles`), from scratch or from another run (`fine_tuning`), into
a run directory (`keras_transformer.runs`); every Keras workaround is in `keras_workarounds`,
and the bfloat16 routes in `precision`.
"""

from keras_transformer.training.data import make_datasets, train_tokenizer, training_data_sha256
from keras_transformer.training.options import MIXED_PRECISION, STRATEGIES, Budget, Devices, Options, Sources
from keras_transformer.training.recipe import compile_model
from keras_transformer.training.run import TrainingRun, train

__all__ = [
    "MIXED_PRECISION",
    "STRATEGIES",
    "Budget",
    "Devices",
    "Options",
    "Sources",
    "TrainingRun",
    "compile_model",
    "hold_out_dev",
    "load_splits",
    "make_datasets",
    "train",
    "train_tokenizer",
    "training_data_sha256",
]
_SPLITS = ("hold_out_dev", "load_splits")  # in `keras_transformer.datasets.splits`


def __getattr__(name):
    # Imported on first use: `keras_transformer.datasets` loads tensorflow-text, which
    # `from keras_transformer import runs` (the commands, serving) does not need.
    if name in _SPLITS:
        from keras_transformer.datasets import splits

        return getattr(splits, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
