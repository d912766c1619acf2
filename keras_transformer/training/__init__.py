"""Training a Transformer into a run directory: the engine of `keras-transformer train`.

`train` reads a preset (or a run to fine-tune), the corpus and the
destination, then trains with the paper's recipe (`compile_model`) into a run
directory (`run_dir`) that records its files, with callbacks for the time
budget, checkpoints and resuming (`callbacks`) and bfloat16 routes
(`precision`).
"""

from keras_transformer.training.trainer import (
    MIXED_PRECISION,
    STRATEGIES,
    compile_model,
    hold_out_dev,
    load_splits,
    make_datasets,
    train,
    train_tokenizer,
    training_data_sha256,
)

__all__ = [
    "MIXED_PRECISION",
    "STRATEGIES",
    "compile_model",
    "hold_out_dev",
    "load_splits",
    "make_datasets",
    "train",
    "train_tokenizer",
    "training_data_sha256",
]
