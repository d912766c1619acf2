"""Where training works around Keras (3.x on TensorFlow): every private-API use of `training/`, each saying why.

Each workaround names the behaviour it works around, so that it can go once a
Keras release fixes it, with nothing else in `training/` changing: the metrics
of a distributed model built from a real batch, the logs of a multi-worker run
given an axis to average over (tensorflow#72388), a resume backup whose
corrupt files are a clear error, and two warnings that bucketed datasets always
raise.
"""

import contextlib
import warnings

import keras

from keras_transformer.errors import ArgumentError, first_line, literal


def build_metrics_from_a_real_batch(model, batches):
    """Builds `model`'s metrics from the first batch of `batches` (call it in the strategy's scope, after compiling).

    Under a `tf.distribute` strategy, Keras builds the metrics from a
    MEAN-reduced copy of the first distributed batch: float, which the model
    rejects as token ids, and a nested reduce that multi-worker runs cannot
    do. Keras has no public way to build them from a given batch.
    """
    if not hasattr(model, "_maybe_symbolic_build"):
        return  # a Keras without this step: nothing to work around
    # Private: `_symbolic_build` is the step Keras runs on its reduced batch; run it on a real one,
    # then make Keras's own call (`_maybe_symbolic_build`, at the start of `fit`) do nothing.
    model._symbolic_build(data_batch=next(iter(batches)))
    model._maybe_symbolic_build = lambda *args, **kwargs: None


def reduce_logs_across_workers(model):
    """Gives each logged value a batch axis so Keras can average it over workers.

    Keras 3 averages a multi-worker run's logs with `reduce("MEAN", axis=0)`,
    which fails on the scalars that metrics return (tensorflow#72388).
    """
    compute_metrics = model.compute_metrics

    def compute_metrics_with_axis(*args, **kwargs):
        logs = compute_metrics(*args, **kwargs)
        return {name: tf.reshape(value, (1,)) for name, value in logs.items()}

    import tensorflow as tf

    model.compute_metrics = compute_metrics_with_axis


class BackupAndRestore(keras.callbacks.BackupAndRestore):
    """Keras's `BackupAndRestore` (with `double_checkpoint`) whose corrupt backup is a clear error.

    Keras falls back to the previous epoch's copy (`*.bkp`) only when the
    weights file fails to open; here a half-written `training_metadata.json`
    falls back to it too. When no copy can be read, `on_train_begin` raises a
    one-line `ValueError` naming the backup directory instead of h5py's or
    json's error.
    """

    def __init__(self, backup_dir, **kwargs):
        kwargs.setdefault("double_checkpoint", True)
        super().__init__(backup_dir, **kwargs)

    # Private: Keras's `_load_model` tries the `*.bkp` copy only on an OSError; its own method
    # is the one place that sees a corrupt metadata file, so the override turns that into one.
    def _load_model(self):
        if not self.model.built:
            return super()._load_model()  # Keras's own error
        try:
            return super()._load_model()
        except (ValueError, KeyError, TypeError) as error:
            raise OSError(f"{type(error).__name__}: {error}") from error  # Keras then tries the copy

    def on_train_begin(self, logs=None):
        try:
            super().on_train_begin(logs)
        except Exception as error:  # noqa: BLE001  (h5py, json, Keras: all mean "unusable")
            raise ArgumentError(
                f"{self.backup_dir}: cannot resume from this backup (corrupt, or of another model?): "
                f"{literal(first_line(error))}. Delete it to train again from the first epoch, "
                "or pass {overwrite=True}."
            ) from None


@contextlib.contextmanager
def unknown_length_warnings_ignored():
    """Silences two Keras warnings that a bucketed tf.data dataset always raises.

    Its number of batches is unknown until a pass over it ends, so Keras warns
    that the input "ran out of data" when it does; and `fit` warns that it
    ignores `shuffle=True` for a dataset (the batches are shuffled already).
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Your input ran out of data")
        warnings.filterwarnings("ignore", message="`shuffle=True` was passed")
        yield
