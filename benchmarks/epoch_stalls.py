"""Epoch stalls: `model.fit` on the Multi30k preset, timing each epoch's training and the gap before its evaluation.

With tf.data's autotuning on, Keras's deletion of the previous epoch's
iterator, just before an evaluation, could wait up to a minute at 0% CPU on
the autotuner's thread. `make_batches` turns autotuning off; `--autotune`
turns it back on, to compare. Prints one line per epoch: the seconds of
training, the gap between the last training step and the evaluation's start,
and the evaluation.

Example:

    python benchmarks/epoch_stalls.py --data-dir DATA/multi30k_task1 --epochs 4
    python benchmarks/epoch_stalls.py --data-dir DATA/multi30k_task1 --epochs 4 --autotune
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402
from machine import machine_line  # noqa: E402

from keras_transformer.datasets.splits import load_splits  # noqa: E402
from keras_transformer.models import build_transformer  # noqa: E402
from keras_transformer.presets import get_preset  # noqa: E402
from keras_transformer.training import compile_model, make_datasets, train_tokenizer  # noqa: E402


class EpochTimes(keras.callbacks.Callback):
    """Prints, per epoch, the training seconds, the gap before the evaluation and the evaluation seconds."""

    def on_epoch_begin(self, epoch, logs=None):
        self.start = self.last_step = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        self.last_step = time.perf_counter()

    def on_test_begin(self, logs=None):
        self.evaluation = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        now = time.perf_counter()
        print(
            f"epoch {epoch + 1}: training {self.last_step - self.start:.1f} s, "
            f"gap before evaluation {self.evaluation - self.last_step:.1f} s, "
            f"evaluation {now - self.evaluation:.1f} s",
            flush=True,
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="multi30k-en-de")
    parser.add_argument("--data-dir", help="the corpus folder (default: $KERAS_TRANSFORMER_DATA_DIR, else download)")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--autotune", action="store_true", help="turn tf.data's autotuning back on")
    args = parser.parse_args()

    preset = get_preset(args.preset)
    print("machine:", machine_line())
    print(f"config: preset {preset.name}, {args.epochs} epochs, tf.data autotuning {'on' if args.autotune else 'off'}")
    splits = load_splits(preset, args.data_dir)
    tokenizer = train_tokenizer(preset, splits["train"])

    train, validation = make_datasets(preset, splits, tokenizer, seed=0, distributed=False)
    if args.autotune:
        options = tf.data.Options()
        options.autotune.enabled = True
        train, validation = train.with_options(options), validation.with_options(options)
    model = build_transformer(config=preset.model_config(tokenizer.vocab_size))
    compile_model(model, preset)
    model.fit(train, validation_data=validation, epochs=args.epochs, callbacks=[EpochTimes()], verbose=0)


if __name__ == "__main__":
    main()
