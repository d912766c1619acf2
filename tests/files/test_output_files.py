"""`translate`, `evaluate`, `score` and `plot` never write their results over what they read.

The refusals come before the model loads, so these commands run in-process
against a `--model` folder that holds no model at all: a refusal that came
later would fail on it instead. Every file must be unchanged afterwards,
byte for byte.
"""

import os
import threading

import pytest

from keras_transformer.commands import cli
from keras_transformer.errors import ArgumentError
from keras_transformer.files import output_files


@pytest.fixture
def files(tmp_path):
    """A source, a reference, links to them, a `model` folder, and a training run and an export of this package."""
    (tmp_path / "test.en").write_bytes(b"A dog runs.\nTwo men talk.\n")
    (tmp_path / "test.de").write_bytes(b"Ein Hund rennt.\nZwei Manner reden.\n")
    (tmp_path / "link.en").symlink_to("test.en")
    os.link(tmp_path / "test.de", tmp_path / "hard.de")
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_bytes(b"{}\n")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.json").write_bytes(b'{"created_by": "keras-transformer"}\n')
    (tmp_path / "run" / "history.csv").write_bytes(b"epoch,loss\n0,5.0\n")
    (tmp_path / "export").mkdir()
    (tmp_path / "export" / "saved_model.pb").write_bytes(b"graph")
    (tmp_path / "export" / "MANIFEST.sha256").write_bytes(b"")
    return tmp_path


def _snapshot(folder):
    return {path: path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["translate", "--input", "test.en", "--output", "test.en"],
            "--output {tmp}/test.en is the file that --input {tmp}/test.en reads",
        ),
        (
            ["translate", "--input", "test.en", "--output", "link.en"],
            "--output {tmp}/link.en is the file that --input {tmp}/test.en reads",
        ),
        (
            ["translate", "--input", "test.en", "--output", "model/config.json"],
            "--output {tmp}/model/config.json lies inside --model {tmp}/model",
        ),
        (["translate", "--input", "test.en", "--output", "model"], "--output {tmp}/model is a folder"),
        (
            ["translate", "--input", "test.en", "--output", "test.de/out.txt"],
            "{tmp}/test.de is a file, not a folder",
        ),
        (
            ["evaluate", "--source", "test.en", "--reference", "test.de", "--hypotheses", "hard.de"],
            "--hypotheses {tmp}/hard.de is the file that --reference {tmp}/test.de reads",
        ),
        (
            ["evaluate", "--source", "test.en", "--reference", "test.de", "--output", "test.en"],
            "--output {tmp}/test.en is the file that --source {tmp}/test.en reads",
        ),
        (
            ["evaluate", "--source", "test.en", "--reference", "test.de", "--output", "h", "--hypotheses", "h"],
            "--output {tmp}/h and --hypotheses {tmp}/h name the same file",
        ),
        (
            ["score", "--source", "test.en", "--target", "test.de", "--output", "test.de"],
            "--output {tmp}/test.de is the file that --target {tmp}/test.de reads",
        ),
        # A file of another kind in a run or an export would stop `train --resume` or `export --overwrite`.
        (
            ["translate", "--input", "test.en", "--output", "run/test.de"],
            "--output {tmp}/run/test.de lies inside {tmp}/run, a training run of keras-transformer",
        ),
        (
            ["evaluate", "--source", "test.en", "--reference", "test.de", "--hypotheses", "export/assets/h.de"],
            "--hypotheses {tmp}/export/assets/h.de lies inside {tmp}/export, a SavedModel export of",
        ),
        (
            ["plot", "history", "--csv", "run/history.csv", "--output", "run/curves.png"],
            "--output {tmp}/run/curves.png lies inside {tmp}/run, a training run",
        ),
        (
            ["plot", "attention", "--sentence", "A dog.", "--output", "model/heads.png"],
            "--output {tmp}/model/heads.png lies inside --model {tmp}/model",
        ),
        (["plot", "attention", "--sentence", "A dog.", "--output", "heads.jpg"], "must be a .png file"),
    ],
)
def test_commands_refuse_outputs_over_their_inputs_before_loading(files, capsys, argv, message):
    before = _snapshot(files)
    command = argv[:2] if argv[0] == "plot" else argv[:1]
    flags = argv[len(command) :]
    literal = [arg.startswith("--") or previous == "--sentence" for previous, arg in zip(["", *flags], flags)]
    paths = [arg if kept else str(files / arg) for arg, kept in zip(flags, literal)]
    if argv[:2] != ["plot", "history"]:
        paths = ["--model", str(files / "model"), *paths]
    code = cli.main([*command, *paths])
    err = capsys.readouterr().err
    assert code == 2
    assert message.format(tmp=files) in err and "not a model" not in err and "not a training run" not in err
    assert _snapshot(files) == before


def test_a_refused_output_names_the_library_arguments_in_python():
    with pytest.raises(ArgumentError, match=r"^output=a.txt is the file that input=a.txt reads"):
        output_files.check_outputs([("output", "a.txt")], inputs=[("input", "a.txt")])


def test_outputs_not_asked_for_and_stdin_are_passed_over(tmp_path):
    output_files.check_outputs([("output", None)], inputs=[("input", None)], folders=[("model", tmp_path)])
    deeper = tmp_path / "new" / "deeper" / "out.txt"  # its folders do not exist yet: written at the end
    output_files.check_outputs([("output", deeper)], folders=[("model", tmp_path / "m")])


def test_an_unwritable_folder_is_refused_before_the_work(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "access", lambda path, mode: False)  # the tests may run as root, which writes anywhere
    with pytest.raises(ArgumentError, match=f"cannot be written: {tmp_path} is not writable"):
        output_files.check_outputs([("output", tmp_path / "out.txt")])


def test_write_text_replaces_through_a_link_and_keeps_it(tmp_path):
    (tmp_path / "target.txt").write_text("old\n")
    (tmp_path / "link.txt").symlink_to("target.txt")
    output_files.write_text(tmp_path / "link.txt", "new\n")
    assert (tmp_path / "link.txt").is_symlink() and (tmp_path / "target.txt").read_text() == "new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.txt", "target.txt"]  # no temporary file left


def test_write_text_leaves_the_earlier_file_whole_when_writing_fails(tmp_path, monkeypatch):
    (tmp_path / "out.txt").write_text("earlier translations\n")

    def full_disk(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space left"):
        output_files.write_text(tmp_path / "out.txt", "new translations\n" * 1000)
    assert (tmp_path / "out.txt").read_text() == "earlier translations\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_write_text_writes_into_a_named_pipe(tmp_path):
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    output_files.check_outputs([("output", pipe)])
    received = []
    reader = threading.Thread(target=lambda: received.append(pipe.read_text()))
    reader.start()
    output_files.write_text(pipe, "Ein Hund rennt.\n")
    reader.join(timeout=10)
    assert received == ["Ein Hund rennt.\n"] and pipe.is_fifo()
