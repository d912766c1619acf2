"""The train command: run directory, refusal to clobber, time budget, averaging, cooldown, kill-and-resume."""

import csv
import os
import pathlib
import signal
import subprocess
import sys

import keras
import numpy as np
import pytest

from keras_transformer import runs
from keras_transformer.commands.cli import main
from keras_transformer.training import train

REPO = pathlib.Path(__file__).resolve().parents[2]
SMALL = dict(max_examples=300)  # the tiny preset on 300 chatbot pairs


def _history(output):
    with open(pathlib.Path(output) / runs.HISTORY, newline="") as handle:
        return list(csv.DictReader(handle))


def _train_in_subprocess(output, env=None, prelude="", **kwargs):
    arguments = dict(preset="tiny", output=str(output), verbose=2, **SMALL, **kwargs)
    script = prelude + f"\nfrom keras_transformer.training import train; train(**{arguments!r})"
    return subprocess.Popen(
        [sys.executable, "-c", script],
        cwd=REPO,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    output = tmp_path_factory.mktemp("runs") / "tiny"
    code = main(["train", "--preset", "tiny", "--epochs", "2", "--output", str(output)])
    assert code == 0
    return output


def test_train_writes_a_complete_run_directory(tiny_run):
    config = runs.read_config(tiny_run)
    assert config["finished"] and config["completed_epochs"] == 2
    assert runs.is_run_dir(tiny_run)
    assert (tiny_run / runs.SOURCE_TOKENIZER / "tokenizer.model").is_file()
    assert any((tiny_run / runs.LOGS).rglob("events.out.tfevents.*"))
    assert not (tiny_run / runs.BACKUP).exists()
    history = _history(tiny_run)
    losses = [float(row["val_loss"]) for row in history]
    assert len(history) == 2 and all(np.isfinite(losses)) and losses[1] < losses[0]
    model = keras.models.load_model(tiny_run / runs.MODEL)
    assert model.count_params() > 0


def test_refuses_to_overwrite_a_trained_model(tiny_run, capsys):
    assert main(["train", "--preset", "tiny", "--epochs", "1", "--output", str(tiny_run)]) == 2
    assert "already holds a trained model" in capsys.readouterr().err
    summary = train("tiny", output=tiny_run, resume=True)  # finished: nothing to do
    assert summary["completed_epochs"] == 2


def test_a_preset_time_budget_stops_the_run_and_is_recorded(tmp_path):
    output = tmp_path / "run"
    # The tiny preset has 2 epochs; a budget spent before the first batch ends stops it there.
    summary = train("tiny", output=output, verbose=0, max_minutes=1e-4, **SMALL)
    config = runs.read_config(output)
    assert summary["completed_epochs"] == 1 and config["finished"]
    assert config["preset"]["max_minutes"] == 1e-4 and config["train_minutes"] > 0
    assert len(_history(output)) == 1


@pytest.mark.slow  # averaging itself: tests/training/test_checkpoint_averaging.py
def test_the_last_epochs_are_averaged_without_a_spurious_warning(tmp_path, recwarn):
    output = tmp_path / "run"
    train("tiny", output=output, verbose=0, average_last=2, **SMALL)
    config = runs.read_config(output)
    assert config["averaged"]["epochs"] == 2 and np.isfinite(config["averaged"]["val_loss"])
    assert config["best_val_loss"] == min(
        config["averaged"]["val_loss"], *(float(row["val_loss"]) for row in _history(output))
    )
    assert not (output / "snapshots").exists()  # averaged, then removed
    # Keras warns that a dataset of unknown length "ran out of data"; training is not interrupted.
    assert not [w for w in recwarn if "ran out of data" in str(w.message)]


@pytest.mark.slow  # the schedule itself: test_losses_schedules.py
def test_cooldown_anneals_the_rate_to_zero_at_the_last_epoch(tmp_path):
    output = tmp_path / "run"
    train("tiny", output=output, epochs=4, verbose=0, cooldown_fraction=0.5, **SMALL)
    config = runs.read_config(output)
    start, end = config["cooldown"]  # set at the end of epoch 2, renewed at the end of epoch 3
    assert config["completed_epochs"] == 4 and 0 < start < end
    steps_per_epoch = start / 2
    assert end - start == pytest.approx(2 * steps_per_epoch, rel=0.2)


_KILL_INSIDE_THE_SECOND_EPOCH = """
import os, signal
from keras_transformer.training import callbacks
def note_epoch(self, epoch, logs=None):
    self.epoch_under_way = epoch
def kill_inside_the_second_epoch(self, batch, logs=None):
    if self.epoch_under_way == 1:
        os.kill(os.getpid(), signal.SIGKILL)
callbacks.EpochSnapshots.on_epoch_begin = note_epoch
callbacks.EpochSnapshots.on_train_batch_end = kill_inside_the_second_epoch
"""


@pytest.mark.slow  # kills a training process: a minute; resuming: test_saved_outputs.py
def test_killed_training_resumes_without_losing_an_epoch(tmp_path):
    output = tmp_path / "run"
    killed = _train_in_subprocess(output, epochs=3, prelude=_KILL_INSIDE_THE_SECOND_EPOCH)
    log = killed.communicate(timeout=600)[0]
    assert killed.returncode == -signal.SIGKILL, log[-3000:]  # after the second epoch's first batch
    assert (output / runs.BACKUP).exists() and runs.read_config(output)["completed_epochs"] == 1

    resumed = _train_in_subprocess(output, epochs=3, resume=True)
    log = resumed.communicate(timeout=600)[0]
    assert resumed.returncode == 0, log[-3000:]
    config = runs.read_config(output)
    assert config["finished"] and config["completed_epochs"] == 3
    epochs = [int(row["epoch"]) for row in _history(output)]
    assert sorted(set(epochs)) == [0, 1, 2], epochs
    keras.models.load_model(output / runs.MODEL)
