"""Faults: killed training, corrupt or truncated model files, a full disk.

- Training killed (SIGKILL) 3 times at seeded random moments and resumed
  ends with the epochs of an uninterrupted run and a model that loads.
- A corrupt or truncated run directory, SavedModel or `--resume` backup is
  a one-line `ValueError` naming the path (exit status 2 and one line on the
  command line), never a trace.
- A full disk (ENOSPC) while exporting or while writing the best checkpoint
  leaves the previous export / checkpoint intact, and no temporary files.

The broken models are copies of the run that `test_load.trained_export`
trains and exports once per session. The tests marked `slow` start training
processes (2-8 minutes each on 2 busy cores): run them with `-m slow`.
"""

import csv
import errno
import hashlib
import json
import os
import pathlib
import random
import shutil
import signal
import subprocess
import sys
import time

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import runs
from keras_transformer.commands import cli
from keras_transformer.export import load
from keras_transformer.files import atomic

from trained_runs import trained_export

REPO = pathlib.Path(__file__).resolve().parents[2]
TRAIN = dict(preset="tiny", max_examples=300)
SENTENCES = ["안녕하세요", "", "오늘 날씨 어때? " * 20]  # short, empty, over-long


@pytest.fixture(scope="module")
def trained():
    """`(run directory, SavedModel directory)`; copy them before breaking anything."""
    return trained_export()


def _copy(source, tmp_path, name="model"):
    return pathlib.Path(shutil.copytree(source, tmp_path / name))


def _truncate(path, fraction=0.5):
    data = pathlib.Path(path).read_bytes()
    pathlib.Path(path).write_bytes(data[: int(len(data) * fraction)])


def _digest(directory):
    """{relative path: sha256} of every file under `directory`."""
    directory = pathlib.Path(directory)
    return {
        str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def _hidden(directory):
    """Leftover temporary files or folders (their names start with a dot)."""
    return sorted(p.name for p in pathlib.Path(directory).iterdir() if p.name.startswith("."))


def _greedy(path):
    """Greedy translations of SENTENCES by a freshly loaded model."""
    translator = load(path)  # kept in a name: a loaded SavedModel's functions need it alive
    return [s.decode("utf-8") for s in translator.greedy(tf.constant(SENTENCES)).numpy()]


def _cli(capsys, argv):
    """Runs the command in-process: `(exit code, stdout, stderr)`."""
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _assert_clear(message, path):
    """One line, naming `path`, no trace."""
    assert "Traceback" not in message, message
    assert len(message.strip().splitlines()) == 1, message
    assert str(path) in message, message


def _enospc(path=None):
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), *([str(path)] if path else []))


# -- Corrupt or truncated models: `load` and `keras-transformer translate` -------------------------

RUN_DIR_FAULTS = {
    "truncated model.keras": lambda d: _truncate(d / runs.MODEL),
    "empty model.keras": lambda d: (d / runs.MODEL).write_bytes(b""),
    "missing model.keras": lambda d: (d / runs.MODEL).unlink(),
    "truncated config.json": lambda d: _truncate(d / runs.CONFIG),
    "config.json not an object": lambda d: (d / runs.CONFIG).write_text("[]"),
    "config.json not UTF-8": lambda d: (d / runs.CONFIG).write_bytes(b"\xff\xfe{\x00}"),
    "missing tokenizer.model": lambda d: (d / runs.SOURCE_TOKENIZER / "tokenizer.model").unlink(),
    "truncated tokenizer.model": lambda d: _truncate(d / runs.SOURCE_TOKENIZER / "tokenizer.model"),
    "truncated tokenizer.json": lambda d: _truncate(d / runs.SOURCE_TOKENIZER / "tokenizer.json"),
    "missing tokenizers": lambda d: shutil.rmtree(d / "tokenizers"),
}

SAVED_MODEL_FAULTS = {
    "truncated saved_model.pb": lambda d: _truncate(d / "saved_model.pb"),
    "empty saved_model.pb": lambda d: (d / "saved_model.pb").write_bytes(b""),
    "missing variables": lambda d: shutil.rmtree(d / "variables"),
    "truncated variables data": lambda d: _truncate(next((d / "variables").glob("variables.data-*"))),
    "missing variables index": lambda d: (d / "variables" / "variables.index").unlink(),
    "truncated variables index": lambda d: _truncate(d / "variables" / "variables.index"),
}


@pytest.mark.parametrize(
    "kind, fault", [("run", f) for f in RUN_DIR_FAULTS] + [("export", f) for f in SAVED_MODEL_FAULTS]
)
def test_broken_model_is_a_clear_error(trained, tmp_path, capsys, kind, fault):
    source = trained[0] if kind == "run" else trained[1]
    broken = _copy(source, tmp_path)
    (RUN_DIR_FAULTS if kind == "run" else SAVED_MODEL_FAULTS)[fault](broken)

    with pytest.raises(ValueError) as error:
        load(broken)
    _assert_clear(str(error.value), broken)

    code, out, err = _cli(capsys, ["translate", "--model", broken, "안녕"])
    assert code == 2 and out == ""
    assert err.startswith("keras-transformer translate: error: ")
    _assert_clear(err, broken)
    if kind == "export":  # the manifest names the damaged file; without one, TensorFlow's loader fails
        assert "does not match the sha256" in err or "is listed in" in err, err
        (broken / "MANIFEST.sha256").unlink()
        with pytest.raises(ValueError) as error:
            load(broken)
        _assert_clear(str(error.value), broken)


def test_broken_model_on_the_real_command_line(trained, tmp_path):
    """The installed entry point in its own process: exit 2, the message last, no trace."""
    broken = _copy(trained[1], tmp_path)
    _truncate(broken / "saved_model.pb")
    result = subprocess.run(
        [sys.executable, "-m", "keras_transformer.commands.cli", "translate", "--model", str(broken), "hello"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
    )
    assert result.returncode == 2 and result.stdout == ""
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"keras-transformer translate: error: {broken}/saved_model.pb does not match")


# -- Corrupt `--resume` state: `train(resume=True)` and `keras-transformer train --resume` ---------


def _garbage_backup(run, weights=b"\x89HDF\r\n\x1a\n not really", metadata='{"epoch": 1, "batch": 0}', copies=False):
    """A `backup/` as Keras's BackupAndRestore writes it (with `double_checkpoint`), but broken."""
    backup = run / runs.BACKUP
    backup.mkdir()
    names = ["latest.weights.h5", "training_metadata.json"]
    for suffix in [""] + ([".bkp"] if copies else []):
        if weights is not None:
            (backup / (names[0] + suffix)).write_bytes(weights)
        (backup / (names[1] + suffix)).write_text(metadata)
    return backup


def _interrupted_copy(run, tmp_path, name="model", full_corpus=False):
    """A copy of the finished `run` that says it was interrupted (so `--resume` continues it).

    With `full_corpus`, it says it was started on the tiny preset's whole corpus (what the command line
    trains on, without `max_examples`), so that resuming gets past the check of the training data.
    """
    from keras_transformer import training
    from keras_transformer.presets import get_preset

    copy = _copy(run, tmp_path, name)
    config = {**runs.read_config(copy), "finished": False}
    if full_corpus:
        pairs = training.load_splits(get_preset("tiny"), None)["train"]
        config["train_data_sha256"] = training.training_data_sha256(pairs)
    atomic.write_json(copy / runs.CONFIG, config)
    return copy


RESUME_FAULTS = {  # fault -> (break the run, the path the error must name)
    "truncated config.json": lambda d: (_truncate(d / runs.CONFIG), d / runs.CONFIG)[1],
    "truncated tokenizer.model": lambda d: (
        _truncate(d / runs.SOURCE_TOKENIZER / "tokenizer.model"),
        d / runs.SOURCE_TOKENIZER,
    )[1],
    "garbage backup weights": lambda d: _garbage_backup(d),
    "truncated backup metadata": lambda d: _garbage_backup(d, weights=None, metadata='{"epoch": '),
    "backup and its copy both garbage": lambda d: _garbage_backup(d, copies=True),
}


@pytest.mark.parametrize("fault", list(RESUME_FAULTS))
def test_resume_from_a_broken_run_is_a_clear_error(trained, tmp_path, capsys, fault):
    from keras_transformer.training import train

    broken = _interrupted_copy(trained[0], tmp_path)
    named = RESUME_FAULTS[fault](broken)
    with pytest.raises(ValueError) as error:
        train(output=broken, resume=True, epochs=2, verbose=0, **TRAIN)
    _assert_clear(str(error.value), named)

    broken = _interrupted_copy(trained[0], tmp_path, "again", full_corpus=True)
    named = RESUME_FAULTS[fault](broken)
    argv = ["train", "--preset", "tiny", "--epochs", "2", "--output", broken, "--resume"]
    code, _, err = _cli(capsys, argv)
    assert code == 2 and err.startswith("keras-transformer train: error: ")
    _assert_clear(err, named)


# -- A full disk while exporting ------------------------------------------------------------------


# The command-line export of a full disk (a minute); the translator's own save is checked by default, below.
@pytest.mark.slow
def test_disk_full_while_exporting_keeps_the_previous_export(trained, tmp_path, capsys, monkeypatch):
    """The real SavedModel writer runs and the disk fills up half-way through `saved_model.pb`."""
    from tensorflow.python.lib.io import file_io

    previous = _copy(trained[1], tmp_path, "export")
    before, translations = _digest(previous), _greedy(previous)
    write = file_io.atomic_write_string_to_file
    failed = []

    def full_disk_write(filename, contents, *args, **kwargs):
        if os.path.basename(filename) != "saved_model.pb":
            return write(filename, contents, *args, **kwargs)
        with open(filename, "wb") as handle:
            handle.write(contents[: len(contents) // 2])
        failed.append(filename)
        raise _enospc(filename)

    monkeypatch.setattr(file_io, "atomic_write_string_to_file", full_disk_write)
    code, _, err = _cli(capsys, ["export", "--model", trained[0], "--output", previous, "--overwrite"])
    assert failed and code == 2
    assert err.startswith("keras-transformer export: error: ") and "No space left on device" in err
    _assert_clear(err, "saved_model.pb")
    monkeypatch.undo()

    assert _digest(previous) == before
    assert _hidden(tmp_path) == []
    assert _greedy(previous) == translations


@pytest.mark.parametrize("where", ["writer", "swap"])
def test_disk_full_in_translator_save_keeps_the_previous_export(trained, tmp_path, monkeypatch, where):
    """`Translator.save`: ENOSPC from a writer that wrote part of its files, or from the final rename."""
    import tensorflow as tf

    previous = _copy(trained[1], tmp_path, "export")
    before = _digest(previous)
    translator = load(trained[0])

    def partial_writer(module, path, *args, **kwargs):
        (pathlib.Path(path) / "variables").mkdir()
        (pathlib.Path(path) / "variables" / "variables.data-00000-of-00001").write_bytes(b"\0" * 4096)
        (pathlib.Path(path) / "saved_model.pb").write_bytes(b"\x08\x01 half")
        raise _enospc(pathlib.Path(path) / "saved_model.pb")

    def complete_writer(module, path, *args, **kwargs):
        shutil.copytree(trained[1], path, dirs_exist_ok=True)

    replace, renames = os.replace, []

    def failing_replace(source, destination):
        renames.append((pathlib.Path(source).name, pathlib.Path(destination).name))
        if len(renames) == 2:  # 1: the previous export moves aside; 2: the new one takes its name
            raise _enospc(destination)
        return replace(source, destination)

    writer = partial_writer if where == "writer" else complete_writer
    monkeypatch.setattr(tf.saved_model, "save", writer)
    if where == "swap":
        monkeypatch.setattr(atomic.os, "replace", failing_replace)
    with pytest.raises(OSError) as error:
        translator.save(previous)
    assert error.value.errno == errno.ENOSPC
    monkeypatch.undo()
    if where == "swap":
        assert renames[0][0] == "export" and renames[0][1].startswith(".export.old.")
        assert renames[1] == (renames[1][0], "export")

    assert _digest(previous) == before
    assert _hidden(tmp_path) == []


# -- A full disk while writing the best checkpoint ------------------------------------------------


def test_disk_full_while_saving_the_best_checkpoint_keeps_the_previous_one(trained, tmp_path, monkeypatch):
    from keras_transformer.training.callbacks import AtomicBestCheckpoint

    run = _copy(trained[0], tmp_path)
    path = run / runs.MODEL
    before = path.read_bytes()
    inputs = {"encoder_inputs": np.array([[5, 6, 7, 0]]), "decoder_inputs": np.array([[2, 9, 0]])}
    model = keras.saving.load_model(path, compile=False)
    expected = model.predict(inputs, verbose=0)
    for variable in model.trainable_variables:  # a better model, as training would give
        variable.assign(variable * 0.9)
    improved = model.predict(inputs, verbose=0)
    assert not np.allclose(expected, improved)

    save = keras.Model.save
    improvements = []

    def full_disk_save(self, filepath, *args, **kwargs):
        save(self, filepath, *args, **kwargs)
        _truncate(filepath, 0.3)  # part of the archive reached the disk
        raise _enospc(filepath)

    checkpoint = AtomicBestCheckpoint(path, best=7.0, on_improvement=lambda *a: improvements.append(a))
    checkpoint.set_model(model)
    monkeypatch.setattr(keras.Model, "save", full_disk_save)
    with pytest.raises(OSError) as error:
        checkpoint.on_epoch_end(1, {"val_loss": 6.0})
    assert error.value.errno == errno.ENOSPC
    monkeypatch.undo()

    assert path.read_bytes() == before and improvements == []
    assert _hidden(run) == []
    np.testing.assert_array_equal(keras.saving.load_model(path, compile=False).predict(inputs, verbose=0), expected)
    checkpoint.on_epoch_end(2, {"val_loss": 5.0})  # space again: the next improvement is saved
    assert improvements == [(2, 5.0)]
    np.testing.assert_allclose(
        keras.saving.load_model(path, compile=False).predict(inputs, verbose=0), improved, atol=1e-6
    )


# -- Training processes: killed, resumed, out of disk (slow) --------------------------------------


def _train_process(output, epochs, prelude="", cli_args=None):
    """A training process: `train(...)` (or the CLI with `cli_args`) after the Python `prelude`."""
    if cli_args is None:
        arguments = dict(output=str(output), epochs=epochs, resume=True, verbose=2, **TRAIN)
        call = f"from keras_transformer.training import train; train(**{arguments!r})"
    else:
        call = f"import sys; from keras_transformer.commands.cli import main; sys.exit(main({cli_args!r}))"
    return subprocess.Popen(
        [sys.executable, "-c", prelude + "\n" + call],
        cwd=REPO,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _finish(process, timeout=900):
    log = process.communicate(timeout=timeout)[0]
    return process.returncode, log


def _history_epochs(output):
    with open(pathlib.Path(output) / runs.HISTORY, newline="") as handle:
        return [int(row["epoch"]) for row in csv.DictReader(handle)]


def _completed_epochs(output):
    try:
        return json.loads((pathlib.Path(output) / runs.CONFIG).read_text()).get("completed_epochs", 0)
    except (OSError, ValueError):
        return 0


def _assert_valid_final_model(output):
    translator = load(output, beam_size=1)
    outputs = translator.greedy(tf.constant(SENTENCES)).numpy()
    assert outputs.shape == (len(SENTENCES),)
    model = keras.saving.load_model(pathlib.Path(output) / runs.MODEL, compile=False)
    logits = model.predict(
        {"encoder_inputs": np.array([[5, 6, 7, 0]]), "decoder_inputs": np.array([[2, 9, 0]])}, verbose=0
    )
    assert np.isfinite(logits).all()


EPOCHS = 3


@pytest.mark.slow
def test_three_random_kills_then_resume_match_an_uninterrupted_run(tmp_path):
    """SIGKILL at 3 seeded random moments; each restart is `train(resume=True)`.

    Each process is killed after a random 15-75% of the time it would need to
    finish the remaining epochs (estimated from the uninterrupted run: its
    start-up, XLA compiles and first epoch, then its later epochs), so the
    kills land anywhere from start-up to epoch-end checkpoints and later
    epochs, and always before the process could finish.
    """
    reference = tmp_path / "uninterrupted"
    started = time.monotonic()
    process = _train_process(reference, EPOCHS)
    epoch_ends = {}
    while process.poll() is None:
        epoch_ends.setdefault(_completed_epochs(reference), time.monotonic() - started)
        time.sleep(0.1)
    code, log = _finish(process)
    assert code == 0, log[-3000:]
    epoch_ends.setdefault(EPOCHS, time.monotonic() - started)
    first_epoch = epoch_ends[1]
    later_epoch = (epoch_ends[EPOCHS] - first_epoch) / (EPOCHS - 1)

    rng = random.Random(1234)
    output = tmp_path / "killed"
    kills = []
    for _ in range(3):
        done = min(_completed_epochs(output), EPOCHS - 1)
        delay = rng.uniform(0.15, 0.75) * (first_epoch + (EPOCHS - 1 - done) * later_epoch)
        process = _train_process(output, EPOCHS)
        try:
            process.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGKILL)
        code, log = _finish(process)
        assert code == -signal.SIGKILL, f"finished before its kill at {delay:.1f} s:\n{log[-3000:]}"
        kills.append((round(delay, 1), _completed_epochs(output)))
    code, log = _finish(_train_process(output, EPOCHS))
    assert code == 0, f"kills (s, epochs done) {kills}:\n{log[-3000:]}"
    print(
        f"\nkilled at (seconds, epochs completed): {kills}; "
        f"uninterrupted: first epoch {first_epoch:.0f} s, then {later_epoch:.0f} s an epoch"
    )

    for run in (reference, output):
        config = runs.read_config(run)
        assert config["finished"] and not (run / runs.BACKUP).exists()
    completed = [runs.read_config(run)["completed_epochs"] for run in (output, reference)]
    assert completed == [EPOCHS, EPOCHS]
    for run in (output, reference):
        assert sorted(set(_history_epochs(run))) == list(range(EPOCHS))
    _assert_valid_final_model(output)


_KILL_AFTER_THE_SECOND_BACKUP = """
import os, signal, keras
on_epoch_end = keras.callbacks.BackupAndRestore.on_epoch_end
def kill_after_the_second_backup(self, epoch, logs=None):
    on_epoch_end(self, epoch, logs)
    if epoch == 1:
        os.kill(os.getpid(), signal.SIGKILL)
keras.callbacks.BackupAndRestore.on_epoch_end = kill_after_the_second_backup
"""


@pytest.fixture(scope="module")
def interrupted_run(tmp_path_factory):
    """A real run killed just after its second epoch's backup: the backup and its copy on disk."""
    output = tmp_path_factory.mktemp("interrupted") / "run"
    code, log = _finish(_train_process(output, 3, prelude=_KILL_AFTER_THE_SECOND_BACKUP))
    assert code == -signal.SIGKILL, log[-3000:]
    backup = output / runs.BACKUP
    assert (backup / "latest.weights.h5").is_file() and (backup / "latest.weights.h5.bkp").is_file()
    return output


@pytest.mark.slow
@pytest.mark.parametrize("broken", ["latest.weights.h5", "training_metadata.json"])
def test_resume_falls_back_to_the_previous_backup_copy(interrupted_run, tmp_path, broken):
    """Half-written backup files (a kill during the epoch-end backup): resume from the copy."""
    output = _copy(interrupted_run, tmp_path, "run")
    _truncate(output / runs.BACKUP / broken)
    code, log = _finish(_train_process(output, 3))
    assert code == 0, log[-3000:]
    assert runs.read_config(output)["completed_epochs"] == 3
    assert sorted(set(_history_epochs(output))) == [0, 1, 2]
    _assert_valid_final_model(output)


_DISK_FULL_AT_SECOND_CHECKPOINT = """
import errno, os, keras
save = keras.Model.save
calls = []
def full_disk_save(self, filepath, *args, **kwargs):
    calls.append(filepath)
    if len(calls) == 2:
        with open(filepath, "wb") as handle:
            handle.write(b"PK\\x03\\x04 part of an archive")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(filepath))
    return save(self, filepath, *args, **kwargs)
keras.Model.save = full_disk_save
"""


@pytest.mark.slow
def test_disk_full_during_training_keeps_the_best_model_and_resumes(tmp_path):
    """ENOSPC while epoch 2's best model is saved: a one-line error, epoch 1's model intact, resumable."""
    output = tmp_path / "run"
    argv = ["train", "--preset", "tiny", "--epochs", "3", "--output", str(output)]
    code, log = _finish(_train_process(output, 3, prelude=_DISK_FULL_AT_SECOND_CHECKPOINT, cli_args=argv))
    assert code == 2, log[-3000:]
    assert "Traceback" not in log and "No space left on device" in log.strip().splitlines()[-1]
    config = runs.read_config(output)
    assert config["best_epoch"] == 1 and not config["finished"]
    assert _hidden(output) == []
    keras.saving.load_model(output / runs.MODEL, compile=False)  # epoch 1's model, intact

    code, log = _finish(_train_process(output, 3))
    assert code == 0, log[-3000:]
    config = runs.read_config(output)
    assert config["finished"] and config["completed_epochs"] == 3
    history = {}
    with open(output / runs.HISTORY, newline="") as handle:
        for row in csv.DictReader(handle):
            history.setdefault(int(row["epoch"]), float(row["val_loss"]))
    assert sorted(history) == [0, 1, 2]
    # No epoch was skipped by the failure: the saved model is the best of all three.
    assert config["best_epoch"] == 1 + min(history, key=history.get)
    _assert_valid_final_model(output)
