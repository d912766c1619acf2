"""Training callbacks: time limit, cooldown, atomic best checkpoint, guarded backup, checkpoint averaging.

`run_callbacks` puts them together for a run (`model_run.ModelRun`): the
best checkpoint, the snapshots to average, the epoch count, the logs, the
time budget with its cooldown, and the resume backup.
"""

import pathlib
import time

import keras
import numpy as np

from keras_transformer import runs
from keras_transformer.files import atomic
from keras_transformer.training.keras_workarounds import BackupAndRestore  # the guarded backup


class TimeLimit(keras.callbacks.Callback):
    """Stops training once `minutes` have passed; the current epoch ends early.

    Keras still runs validation and the epoch-end callbacks after the stop, so
    the last, shortened epoch is checkpointed like any other.

    Example:

    >>> model.fit(batches, epochs=1000, callbacks=[TimeLimit(3)])
    """

    def __init__(self, minutes):
        super().__init__()
        self.minutes = minutes
        self.deadline = None

    def on_train_begin(self, logs=None):
        self.deadline = time.monotonic() + 60.0 * self.minutes

    def on_train_batch_end(self, batch, logs=None):
        if time.monotonic() >= self.deadline:
            self.model.stop_training = True


class CooldownToEnd(keras.callbacks.Callback):
    """Anneals a `WarmupSchedule` linearly to zero at the end of training.

    The end is the earlier of `minutes` from the start of `fit` and the end of
    epoch `epochs`. At each epoch end from the moment the remaining share of
    the run is at most `fraction` (of `total_minutes`, or of `epochs`), the
    callback projects the optimizer step at which the run will end, from the
    last epoch's pace (its validation included), and sets the schedule's
    cooldown to end there; the projection is renewed at every later epoch end.

    Args:
        schedule: the optimizer's `WarmupSchedule`.
        fraction: the last share of the run spent cooling down, e.g. 0.3.
        minutes: the time left to this `fit`, or None.
        total_minutes: the whole run's budget (a resumed run's earlier part
            included); default `minutes`.
        epochs: the last epoch of the run, or None.
        on_update: optional function `(start, end)` called when the cooldown
            is set (e.g. to record it for `--resume`).

    Example:

    >>> schedule = WarmupSchedule(256, warmup_steps=1200)
    >>> model.compile(keras.optimizers.Adam(schedule), loss=...)
    >>> model.fit(batches, epochs=1000, callbacks=[TimeLimit(80), CooldownToEnd(schedule, 0.3, minutes=80)])
    """

    def __init__(self, schedule, fraction, minutes=None, total_minutes=None, epochs=None, on_update=None):
        super().__init__()
        if not 0.0 < fraction <= 1.0:
            raise ValueError(f"`fraction` must be in (0, 1]. Received: fraction={fraction}")
        if minutes is None and epochs is None:
            raise ValueError("`CooldownToEnd` needs `minutes` or `epochs` to know where training ends.")
        self.schedule = schedule
        self.fraction = fraction
        self.minutes = minutes
        self.total_minutes = total_minutes or minutes
        self.epochs = epochs
        self.on_update = on_update

    def on_train_begin(self, logs=None):
        self.deadline = None if self.minutes is None else time.monotonic() + 60.0 * self.minutes

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch_started = (time.monotonic(), int(self.model.optimizer.iterations.numpy()))

    def on_epoch_end(self, epoch, logs=None):
        now, step = time.monotonic(), int(self.model.optimizer.iterations.numpy())
        started, first_step = self.epoch_started
        steps_per_epoch = max(step - first_step, 1)
        remaining, cooling = [], False
        if self.deadline is not None:
            seconds_left = max(self.deadline - now, 0.0)
            remaining.append(seconds_left / max((now - started) / steps_per_epoch, 1e-9))
            cooling |= seconds_left <= 60.0 * self.fraction * self.total_minutes
        if self.epochs is not None:
            epochs_left = max(self.epochs - (epoch + 1), 0)
            remaining.append(epochs_left * steps_per_epoch)
            cooling |= epochs_left <= self.fraction * self.epochs
        if not cooling or min(remaining) < 1:
            return
        start = self.schedule.cooldown[0] if self.schedule.cooldown else step
        self.schedule.set_cooldown(start, step + max(int(min(remaining)), 1))
        if keras.backend.backend() == "jax":
            self.model.make_train_function(force=True)  # JAX traced the old cooldown in as a constant
        if self.on_update is not None:
            self.on_update(*self.schedule.cooldown)


class AtomicBestCheckpoint(keras.callbacks.Callback):
    """Saves the whole model as `.keras` when `monitor` improves, never half-written.

    The model goes to a temporary file beside `filepath` and is renamed over it,
    so a crash or an interrupt during the save leaves the previous best intact.

    Args:
        filepath: where the best model lives (ends in `.keras`).
        monitor: the logged value to minimise, `"val_loss"` by default.
        best: the best value so far (to continue a resumed run).
        on_improvement: optional function `(epoch, value)` called after a save.
        enabled: False on the workers of a multi-worker run that must not write.
    """

    def __init__(self, filepath, monitor="val_loss", best=np.inf, on_improvement=None, enabled=True):
        super().__init__()
        self.filepath = pathlib.Path(filepath)
        self.monitor = monitor
        self.best = best
        self.on_improvement = on_improvement
        self.enabled = enabled

    def on_epoch_end(self, epoch, logs=None):
        value = (logs or {}).get(self.monitor)
        if value is None or not np.isfinite(value) or value >= self.best:
            return
        self.best = float(value)
        if self.enabled:
            save_model_atomic(self.model, self.filepath)
        if self.on_improvement is not None:
            self.on_improvement(epoch, self.best)


def save_model_atomic(model, filepath):
    """`model.save(filepath)` through a temporary file and a rename."""
    with atomic.atomic_path(filepath, ".keras") as tmp:
        model.save(tmp)


class EpochSnapshots(keras.callbacks.Callback):
    """Keeps the weights of the last `keep` epochs as `epoch-NNN.weights.h5` files.

    `average_snapshots` then averages them: checkpoint averaging, which gives a
    smoother, usually better model than the last epoch alone (Vaswani et al.
    average the last 5 checkpoints of the base model).
    """

    def __init__(self, directory, keep=5, enabled=True):
        super().__init__()
        self.directory = pathlib.Path(directory)
        self.keep = keep
        self.enabled = enabled

    def on_epoch_end(self, epoch, logs=None):
        if not self.enabled:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"epoch-{epoch + 1:03d}.weights.h5"
        with atomic.atomic_path(path, ".weights.h5") as tmp:
            self.model.save_weights(tmp)
        for old in snapshot_paths(self.directory)[: -self.keep]:
            old.unlink(missing_ok=True)


def snapshot_paths(directory):
    """The snapshot files in `directory`, oldest first."""
    return sorted(pathlib.Path(directory).glob("epoch-*.weights.h5"))


def average_snapshots(model, paths):
    """Sets `model`'s weights to the mean of the weight files `paths`.

    Example:

    >>> average_snapshots(model, snapshot_paths("saved_models/run/snapshots")[-5:])
    """
    paths = list(paths)
    if not paths:
        raise ValueError("`paths` must name at least one weights file. Received: []")
    total = None
    for path in paths:
        model.load_weights(path)
        values = [np.asarray(v.numpy(), dtype=np.float64) for v in model.trainable_weights]
        total = values if total is None else [t + v for t, v in zip(total, values)]
    for variable, summed in zip(model.trainable_weights, total):
        variable.assign((summed / len(paths)).astype(variable.dtype))
    return model


class TimedEpochProgress(keras.callbacks.ProgbarLogger):
    """Keras's progress bar for a run that only time ends: "Epoch 3 (until 30 minutes)", not "Epoch 3/10000".

    Example:

    >>> model.fit(batches, epochs=10_000, callbacks=[TimeLimit(30), TimedEpochProgress(30)])  # doctest: +SKIP
    """

    def __init__(self, minutes):
        super().__init__()
        self.minutes = minutes

    def on_epoch_begin(self, epoch, logs=None):
        epochs, self.epochs = self.epochs, 1  # Keras prints its "Epoch i/N" line only where N > 1
        super().on_epoch_begin(epoch, logs)
        self.epochs = epochs
        if self.verbose:
            print(f"Epoch {epoch + 1} (training stops after {self.minutes:g} minutes)", flush=True)


def run_callbacks(run, schedule, budget):
    """`(callbacks, epoch limit)` of `run` (a `model_run.ModelRun`): checkpoints, logs, the time, the backup.

    The callbacks write the run's best model, its snapshots (kept for
    averaging), its epoch count and best loss in config.json, its history and
    TensorBoard logs (the chief's only), then end it in time (`budget`, a
    `options.Budget`, or the preset's) with the learning rate's cooldown, and
    last back it up for resuming and record the files it wrote.
    """

    class EpochCounter(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            run.record(completed_epochs=epoch + 1, train_minutes=round(run.prior_minutes + run.minutes(), 2))

    callbacks = [
        AtomicBestCheckpoint(
            run.output / runs.MODEL,
            best=float("inf") if run.config.best_val_loss is None else run.config.best_val_loss,
            on_improvement=lambda epoch, value: run.record(best_val_loss=value, best_epoch=epoch + 1),
            enabled=run.is_chief,
        ),
        EpochSnapshots(run.output / runs.SNAPSHOTS, keep=run.preset.training.average_last, enabled=run.is_chief),
        EpochCounter(),
    ]
    if run.is_chief:
        callbacks += [
            keras.callbacks.CSVLogger(str(run.output / runs.HISTORY), append=True),
            keras.callbacks.TensorBoard(str(run.output / runs.LOGS), write_graph=False),
        ]
    schedule_callbacks, epoch_limit = _schedule_callbacks(run, schedule, budget)
    # Last: an epoch counts as done for resuming only once its checkpoint, status
    # and log row are written; if the run dies before, resuming trains it again.
    # Then the record of the files written (see `run_files.files_record`).
    # Keras's own deletion at the end would remove the whole folder: `ModelRun.finish` removes the backup's files.
    backup = BackupAndRestore(str(run.backup), double_checkpoint=True, delete_checkpoint=False)
    record = keras.callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: run.record_files())
    return callbacks + schedule_callbacks + [backup, record], epoch_limit


def _schedule_callbacks(run, schedule, budget):
    """`(callbacks, epoch limit)` that end the run in time: the time budget and the learning rate's cooldown."""
    recipe, callbacks, minutes = run.preset.training, [], budget.minutes
    epoch_limit = budget.epochs or (None if minutes else recipe.epochs)
    total = minutes or recipe.max_minutes  # this call's, or the preset's for the whole run
    if not minutes and recipe.max_minutes:
        minutes = recipe.max_minutes - run.prior_minutes  # the whole run's, earlier (resumed) parts included
    if minutes:
        minutes = max(minutes - run.minutes(), 0.0)  # counted from the start of `train`: the data included
        callbacks.append(TimeLimit(minutes))
        if epoch_limit is None:  # `fit` is given a number of epochs it never reaches: not shown
            callbacks.append(TimedEpochProgress(total))
    if recipe.cooldown_fraction:
        callbacks.append(
            CooldownToEnd(
                schedule,
                recipe.cooldown_fraction,
                minutes=minutes or None,
                total_minutes=total or None,
                epochs=epoch_limit,
                on_update=lambda start, end: run.record(cooldown=(start, end)),
            )
        )
    return callbacks, epoch_limit
