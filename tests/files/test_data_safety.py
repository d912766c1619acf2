"""Never lose a user's files: `train` and `export` replace only what this package made.

Each refused command runs in-process against scratch folders under `tmp_path`
(with a fake home folder, `HOME=tmp_path/home`), and every file there must be
unchanged afterwards, byte for byte. The run and export they start from are
`test_load.trained_export`'s, copied before use.
"""

import os
import pathlib
import shutil
import stat
import subprocess
import sys

import pytest

from keras_transformer import runs, training
from keras_transformer.commands import cli
from keras_transformer.export import load
from keras_transformer.files import atomic, destinations, manifest
from keras_transformer.presets import get_preset
from keras_transformer.training import data as training_data

from trained_runs import trained_export


@pytest.fixture(scope="module")
def trained():
    return trained_export()


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A fake home folder with a private key and a project in it; the current folder is a project inside."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_bytes(b"-----BEGIN OPENSSH PRIVATE KEY-----\n")
    (home / "projects" / "thesis" / "photos").mkdir(parents=True)
    (home / "projects" / "thesis" / "thesis.txt").write_text("Chapter 1\n", encoding="utf-8")
    (home / "projects" / "thesis" / "photos" / "cat.jpg").write_bytes(bytes(range(256)))
    (home / "projects" / "sibling" / "src").mkdir(parents=True)
    (home / "projects" / "sibling" / "src" / "main.py").write_text("print('hi')\n", encoding="utf-8")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(home / "projects" / "sibling")
    return home


def snapshot(folder):
    """{relative path: bytes, or None for a folder} of everything under `folder`."""
    folder = pathlib.Path(folder)
    return {str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else None) for p in sorted(folder.rglob("*"))}


def run_cli(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, err


def assert_refused(code, err, path, command="train"):
    assert code == 2, err
    assert err.startswith(f"keras-transformer {command}: error: "), err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert str(path) in err, err


# -- train ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "target, reason",
    [
        (lambda home: home, "is the home folder"),
        (lambda home: pathlib.Path("."), "is the current folder"),
        (lambda home: pathlib.Path(".."), "holds the current folder"),
        (lambda home: pathlib.Path("/"), "is the root of the file system"),
        (lambda home: home / "projects" / "thesis", "is not empty and is not a training run"),
        (lambda home: pathlib.Path("src/.."), "is the current folder"),
        (lambda home: home / "projects" / "sibling" / "src" / "..", "is the current folder"),
        (lambda home: home / "projects" / "thesis" / "photos" / "..", "is not empty"),
    ],
)
@pytest.mark.parametrize("flags", [[], ["--overwrite"], ["--resume"]])
def test_train_refuses_folders_it_did_not_make(home, capsys, target, reason, flags):
    output = target(home)
    before = snapshot(home)
    code, err = run_cli(capsys, "train", "--preset", "tiny", "--epochs", "1", "--output", output, *flags)
    assert_refused(code, err, output)
    assert reason in err and "nothing was changed" in err
    assert snapshot(home) == before


def test_train_refuses_a_file_and_a_symbolic_link(home, capsys):
    notes = home / "notes.txt"
    notes.write_text("keep me\n", encoding="utf-8")
    link = home / "link-to-thesis"
    link.symlink_to(home / "projects" / "thesis")
    before = snapshot(home)
    for output, reason in ((notes, "is a file"), (link, "is a symbolic link")):
        code, err = run_cli(capsys, "train", "--preset", "tiny", "--output", output, "--overwrite")
        assert_refused(code, err, output)
        assert reason in err
    assert snapshot(home) == before


def test_overwrite_checks_the_data_and_arguments_before_deleting_the_run(trained, tmp_path, capsys):
    run = pathlib.Path(shutil.copytree(trained[0], tmp_path / "run"))
    before = snapshot(run)
    code, err = run_cli(
        capsys, "train", "--preset", "tiny", "--output", run, "--overwrite", "--data-dir", tmp_path / "mistyped"
    )
    assert code == 2 and "mistyped" in err, err
    assert snapshot(run) == before
    for arguments, named in (
        (dict(epochs=0), "epochs"),
        (dict(epochs=-1), "epochs"),
        (dict(minutes=float("nan")), "minutes"),
        (dict(minutes=-1.0), "minutes"),
        (dict(minutes=float("inf")), "minutes"),
        (dict(seed=-1), "seed"),
        (dict(strategy="everywhere"), "strategy"),
    ):
        with pytest.raises(ValueError, match=f"`{named}` must"):
            training.train("tiny", output=run, overwrite=True, **arguments)
        assert snapshot(run) == before


def test_a_run_whose_config_does_not_parse_is_not_replaced(trained, tmp_path, capsys):
    """config.json is written atomically, so one that does not parse is not this package's: no overwrite."""
    run = pathlib.Path(shutil.copytree(trained[0], tmp_path / "run"))
    (run / runs.CONFIG).write_text('{"preset": ', encoding="utf-8")
    before = snapshot(run)
    code, err = run_cli(capsys, "train", "--preset", "tiny", "--output", run, "--overwrite")
    assert_refused(code, err, run)
    assert "is not empty and is not a training run" in err
    assert snapshot(run) == before


def test_an_app_folder_with_a_jsonc_config_is_not_a_run(home, capsys):
    """A user's app: config.json with a `//` comment, history.csv, logs/server.log. Nothing is deleted."""
    app = home / "myapp"
    (app / "logs").mkdir(parents=True)
    (app / "config.json").write_text('// settings\n{"port": 8080}\n', encoding="utf-8")
    (app / "history.csv").write_text("date,visits\n2026-11-01,12\n", encoding="utf-8")
    (app / "logs" / "server.log").write_text("started\n", encoding="utf-8")
    before = snapshot(home)
    for flags in (["--overwrite"], ["--resume"], []):
        code, err = run_cli(capsys, "train", "--preset", "tiny", "--output", app, *flags)
        assert_refused(code, err, app)
        assert "is not empty and is not a training run" in err
    assert snapshot(home) == before


@pytest.mark.parametrize("relative", ["logs/my_notes.txt", "tokenizers/NOTES.txt", "tokenizers/source/x.md"])
def test_overwrite_refuses_a_run_holding_a_users_file_in_a_subfolder(trained, tmp_path, capsys, relative):
    run = pathlib.Path(shutil.copytree(trained[0], tmp_path / "run"))
    (run / relative).parent.mkdir(parents=True, exist_ok=True)
    (run / relative).write_text("results I want to keep\n", encoding="utf-8")
    before = snapshot(run)
    code, err = run_cli(capsys, "train", "--preset", "tiny", "--output", run, "--overwrite")
    assert_refused(code, err, run)
    assert f"{run / relative} was not written by keras-transformer: refusing to write in {run};" in err
    assert snapshot(run) == before


def test_overwrite_refuses_a_run_whose_recorded_file_was_changed(trained, tmp_path, capsys):
    run = pathlib.Path(shutil.copytree(trained[0], tmp_path / "run"))
    with open(run / runs.HISTORY, "a", encoding="utf-8") as history:
        history.write("my comparison with the paper: ...\n")
    before = snapshot(run)
    code, err = run_cli(capsys, "train", "--preset", "tiny", "--output", run, "--overwrite")
    assert_refused(code, err, run)
    assert f"{run / runs.HISTORY} has changed since keras-transformer wrote it" in err
    assert snapshot(run) == before


@pytest.mark.parametrize("link", ["symbolic", "hard"])
def test_resume_never_writes_through_a_link_in_the_run(trained, home, capsys, link):
    """An interrupted run's history.csv replaced by a link to the user's thesis: --resume refuses, names it."""
    run = pathlib.Path(shutil.copytree(trained[0], home / "run"))
    config = runs.read_config(run)
    atomic.write_json(run / runs.CONFIG, {**config, "finished": False})  # interrupted
    thesis = home / "projects" / "thesis" / "thesis.txt"
    (run / runs.HISTORY).unlink()
    if link == "symbolic":
        (run / runs.HISTORY).symlink_to(thesis)
    else:
        os.link(thesis, run / runs.HISTORY)
    before = snapshot(home)
    code, err = run_cli(capsys, "train", "--preset", "tiny", "--output", run, "--resume")
    assert_refused(code, err, run)
    reason = "is a symbolic link" if link == "symbolic" else "has another name (a hard link)"
    assert f"{run / runs.HISTORY} {reason}" in err
    assert snapshot(home) == before


def test_fine_tuning_into_a_folder_inside_the_run_is_refused(trained, tmp_path, capsys):
    run = pathlib.Path(shutil.copytree(trained[0], tmp_path / "run"))
    before = snapshot(run)
    for output in (run / "finetuned", run / "logs" / "ft"):
        code, err = run_cli(capsys, "train", "--init-from", run, "--epochs", "1", "--output", output)
        assert code == 2 and "must be another folder than `init_from`" in err and "inside it" in err, err
    code, err = run_cli(capsys, "train", "--init-from", run, "--output", tmp_path, "--epochs", "1")
    assert code == 2 and "holds it" in err, err
    assert snapshot(run) == before
    assert destinations.check_destination(run, "run") == "ours"


def test_a_run_folder_holding_a_users_file_is_not_replaced(trained, tmp_path, capsys):
    run = pathlib.Path(shutil.copytree(trained[0], tmp_path / "run"))
    (run / "my-notes.md").write_text("results I want to keep\n", encoding="utf-8")
    before = snapshot(run)
    code, err = run_cli(capsys, "train", "--preset", "tiny", "--output", run, "--overwrite")
    assert_refused(code, err, run)
    assert snapshot(run) == before


@pytest.mark.slow  # trains twice in subprocesses: about a minute on 2 cores
def test_a_run_that_failed_before_its_first_epoch_is_claimed_and_restarts(tmp_path, capsys, monkeypatch):
    """The failed start leaves a run directory (not a folder only the user can clear); --resume restarts it
    on the new data instead of reusing the tokenizer learned from the old."""
    output = tmp_path / "run"

    def fail(*args, **kwargs):
        raise OSError("simulated failure before the first epoch")

    monkeypatch.setattr(training_data, "make_datasets", fail)
    with pytest.raises(OSError):
        training.train("tiny", output=output, epochs=1, max_examples=30, verbose=0)
    monkeypatch.undo()
    assert destinations.is_own_run(output)
    small_tokenizer = (output / runs.SOURCE_TOKENIZER / "tokenizer.model").read_bytes()

    code, err = run_cli(capsys, "train", "--preset", "tiny", "--epochs", "1", "--output", output)
    assert_refused(code, err, output)
    assert "interrupted run" in err and "--resume" in err and "--overwrite" in err

    training.train("tiny", output=output, epochs=1, max_examples=300, verbose=0, resume=True)
    config = runs.read_config(output)
    splits = training.load_splits(get_preset("tiny").replace(max_examples=300), None)
    assert config["finished"] and config["train_data_sha256"] == training.training_data_sha256(splits["train"])
    assert (output / runs.SOURCE_TOKENIZER / "tokenizer.model").read_bytes() != small_tokenizer


def test_resuming_on_other_data_is_refused(trained, tmp_path, capsys):
    run = pathlib.Path(shutil.copytree(trained[0], tmp_path / "run"))
    config = runs.read_config(run)
    atomic.write_json(run / runs.CONFIG, {**config, "finished": False})
    before = snapshot(run)
    with pytest.raises(destinations.DestinationInUseError, match="other training data"):
        training.train("tiny", output=run, resume=True, epochs=2, max_examples=200, verbose=0)
    assert snapshot(run) == before


# -- export ---------------------------------------------------------------------------------------


def test_export_refuses_what_it_did_not_make(trained, home, capsys):
    run = pathlib.Path(shutil.copytree(trained[0], home / "run"))
    notes = home / "notes.txt"
    notes.write_text("keep me\n", encoding="utf-8")
    targets = {
        home / "projects" / "sibling": "is the current folder",
        home / "projects" / "thesis": "is not empty and is not a SavedModel export",
        notes: "is a file",
        run: "overlaps",
        run / "tokenizers": "overlaps",
        home: "overlaps",  # holds the run (and is the home folder)
    }
    before = snapshot(home)
    for output, reason in targets.items():
        for flags in ([], ["--overwrite"]):
            code, err = run_cli(capsys, "export", "--model", run, "--output", output, *flags)
            assert_refused(code, err, output.resolve() if reason == "overlaps" else output, "export")
            assert reason in err, err
    assert snapshot(home) == before


def test_export_replaces_an_earlier_export_only_with_overwrite(trained, tmp_path, capsys):
    export = pathlib.Path(shutil.copytree(trained[1], tmp_path / "export"))
    before = snapshot(export)
    code, err = run_cli(capsys, "export", "--model", trained[0], "--output", export)
    assert_refused(code, err, export, "export")
    assert "already holds an export" in err and "--overwrite" in err
    assert snapshot(export) == before

    empty = tmp_path / "empty"
    empty.mkdir()
    assert run_cli(capsys, "export", "--model", trained[0], "--output", empty)[0] == 0
    previous_umask = os.umask(0o022)
    try:
        assert run_cli(capsys, "export", "--model", trained[0], "--output", export, "--overwrite")[0] == 0
    finally:
        os.umask(previous_umask)
    assert (export / destinations.MANIFEST).is_file() and runs.is_saved_model(empty)
    assert snapshot(export) != before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "export"]  # no stray temporary folders
    # An ordinary mkdir's permissions under the umask, so a server running as another user can read it.
    assert stat.S_IMODE(export.stat().st_mode) == 0o755
    for path in export.rglob("*"):
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode & stat.S_IROTH, f"{path} is not readable by other users: {oct(mode)}"


# -- the manifest ---------------------------------------------------------------------------------


def test_the_manifest_lists_every_file_and_sha256sum_accepts_it(trained):
    export = trained[1]
    listed = sorted(
        line.split("  ", 1)[1] for line in (export / destinations.MANIFEST).read_text(encoding="utf-8").splitlines()
    )
    files = sorted(
        p.relative_to(export).as_posix() for p in export.rglob("*") if p.is_file() and p.name != destinations.MANIFEST
    )
    assert listed == files and "saved_model.pb" in listed
    if shutil.which("sha256sum"):
        check = subprocess.run(
            ["sha256sum", "--quiet", "-c", destinations.MANIFEST], cwd=export, capture_output=True, text=True
        )
        assert check.returncode == 0, check.stdout + check.stderr


def test_a_changed_export_file_is_refused_at_load(trained, tmp_path, capsys):
    export = pathlib.Path(shutil.copytree(trained[1], tmp_path / "export"))
    data = next((export / "variables").glob("variables.data-*"))
    flipped = bytearray(data.read_bytes())
    flipped[len(flipped) // 2] ^= 0x01
    data.write_bytes(bytes(flipped))
    with pytest.raises(ValueError, match="does not match the sha256"):
        load(export)
    code, err = run_cli(capsys, "translate", "--model", export, "안녕")
    assert_refused(code, err, data, "translate")


@pytest.mark.slow  # an export of its own: 20 s
def test_an_export_without_a_manifest_loads_with_a_warning_and_is_never_replaced(trained, tmp_path, capsys):
    export = pathlib.Path(shutil.copytree(trained[1], tmp_path / "export"))
    (export / destinations.MANIFEST).unlink()
    with pytest.warns(manifest.UnverifiedExportWarning, match="has no MANIFEST.sha256: its files were not verified"):
        translator = load(export)
    assert translator.greedy(["안녕"]).shape == (1,)
    code, err = run_cli(capsys, "translate", "--model", export, "안녕")
    assert code == 0 and err.count("keras-transformer translate: warning: ") == 1, err
    assert "were not verified" in err and "Warning:" not in err  # one line, not Python's form
    before = snapshot(export)
    code, err = run_cli(capsys, "export", "--model", trained[0], "--output", export, "--overwrite")
    assert_refused(code, err, export, "export")
    assert snapshot(export) == before


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda e: (e / destinations.MANIFEST).write_text(""), "is empty or not"),
        (lambda e: (e / "variables" / "README.txt").write_text("notes"), "README.txt is not listed"),
        (lambda e: (e / "assets.extra").mkdir() or (e / "assets.extra" / "x.txt").write_text("x"), "x.txt is not"),
        (lambda e: (e / "variables" / "variables.index").unlink(), "variables.index is listed"),
    ],
    ids=["empty-manifest", "added-file", "added-folder", "deleted-file"],
)
def test_an_export_that_differs_from_its_manifest_is_refused_at_load(trained, tmp_path, capsys, damage, message):
    export = pathlib.Path(shutil.copytree(trained[1], tmp_path / "export"))
    damage(export)
    with pytest.raises(ValueError, match=message):
        load(export)
    code, err = run_cli(capsys, "translate", "--model", export, "안녕")
    assert code == 2 and message.split(" ")[0] in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("relative", ["assets.extra/DEPLOY_NOTES.txt", "variables/README.txt"])
def test_export_overwrite_refuses_an_export_holding_a_users_file(trained, tmp_path, capsys, relative):
    export = pathlib.Path(shutil.copytree(trained[1], tmp_path / "export"))
    (export / relative).parent.mkdir(exist_ok=True)
    (export / relative).write_text("deploy with care\n", encoding="utf-8")
    before = snapshot(tmp_path)
    code, err = run_cli(capsys, "export", "--model", trained[0], "--output", export, "--overwrite")
    assert_refused(code, err, export, "export")
    assert f"{export / relative} was not written by keras-transformer: refusing to write in {export};" in err
    assert snapshot(tmp_path) == before


def test_exporting_an_unfinished_run_says_so(trained, tmp_path, capsys):
    run = pathlib.Path(shutil.copytree(trained[0], tmp_path / "run"))
    config = runs.read_config(run)
    atomic.write_json(run / runs.CONFIG, {**config, "finished": False, "completed_epochs": 1})
    code, err = run_cli(capsys, "export", "--model", run, "--output", tmp_path / "export")
    assert code == 0, err
    warning = [line for line in err.splitlines() if "warning" in line]
    assert warning == [
        f"keras-transformer export: warning: {run} is an unfinished run (stopped after epoch 1, its best model is "
        f"from epoch {config['best_epoch']}): exporting that model; `keras-transformer train --resume` finishes it"
    ], err


KILL_BETWEEN_RENAMES = """
import os, sys
from keras_transformer.engines.xla.export import export_run
from keras_transformer.files import atomic
replace, calls = os.replace, []
def replace_then_die(source, destination):
    calls.append(destination)
    if len(calls) == 2 and sys.argv[3] == "between":
        os._exit(9)  # killed after the previous export moved aside, before the new one took its name
    replace(source, destination)
atomic.os.replace = replace_then_die
if sys.argv[3] == "writing":
    import tensorflow as tf
    save = tf.saved_model.save
    def save_then_die(module, path, *args, **kwargs):
        save(module, path, *args, **kwargs)
        os._exit(9)  # killed while writing: the manifest never written
    tf.saved_model.save = save_then_die
export_run(sys.argv[1], sys.argv[2], overwrite=True)
"""


# Killed between two files, the long checks (`-m slow`); killed while writing one, by default.
@pytest.mark.parametrize("moment", [pytest.param("between", marks=pytest.mark.slow), "writing"])
def test_an_export_killed_mid_replacement_is_put_right_by_the_next_command(trained, tmp_path, capsys, moment):
    export = pathlib.Path(shutil.copytree(trained[1], tmp_path / "export"))
    before = snapshot(export)
    killed = subprocess.run(
        [sys.executable, "-c", KILL_BETWEEN_RENAMES, str(trained[0]), str(export), moment],
        capture_output=True,
        text=True,
    )
    assert killed.returncode == 9, killed.stderr[-2000:]
    left = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("."))
    assert left and (not export.exists()) == (moment == "between"), left
    code, err = run_cli(capsys, "translate", "--model", export, "안녕")
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export"]
    if moment == "writing":
        assert snapshot(export) == before  # the new export never completed: the previous one stays
    assert manifest.verify_manifest(export) and destinations.is_own_export(export)
