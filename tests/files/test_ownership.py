"""Deleting only what the package wrote: records of a run's and an export's files, and what they refuse.

The property tests build a run directory and an export of random package files
(recorded the way training and export record them), add random foreign entries
(nested and hidden files, links to files and folders outside, empty folders,
changed package files, files at names a run writes but did not record), and
remove the folder as `train --overwrite` and `export --overwrite` do
(`destinations.remove_own`). Either nothing is touched and the first foreign
entry is named, or every package file is gone and nothing foreign was there.
No TensorFlow model is needed: the files are bytes.
"""

import json
import os
import pathlib
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from keras_transformer import runs
from keras_transformer.files import atomic, destinations, manifest, ownership, run_files

SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
RUN_FILES = (
    "model.keras",
    "history.csv",
    "tokenizers/source/tokenizer.model",
    "tokenizers/source/tokenizer.json",
    "tokenizers/target/tokenizer.model",
    "logs/train/events.out.tfevents.1.host.1.0.v2",
    "logs/validation/events.out.tfevents.2.host.1.1.v2",
)
EXPORT_FILES = ("variables/variables.index", "variables/variables.data-00000-of-00001", "assets/source.model")
NAMES = st.sampled_from(["notes.txt", ".hidden", "README", "my results.md", "x.keras", "DEPLOY_NOTES.txt"])


def snapshot(folder):
    """{relative path: bytes, link target, or None for a folder} of everything under `folder`."""
    found = {}
    for parent, folders, files in os.walk(folder):
        for name in folders + files:
            path = pathlib.Path(parent) / name
            key = str(path.relative_to(folder))
            if path.is_symlink():
                found[key] = ("link", os.readlink(path))
            else:
                found[key] = path.read_bytes() if path.is_file() else None
    return found


def make_run(folder, files=RUN_FILES, finished=True):
    """A run directory of `files` (random bytes) whose config.json records them as training does."""
    folder.mkdir(parents=True)
    for index, relative in enumerate(files):
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_bytes(os.urandom(64 + index))
    atomic.write_json(folder / runs.CONFIG, {"created_by": "keras-transformer", "finished": finished})
    run_files.FileRecorder(folder).record()
    return folder


def make_export(folder):
    """A stand-in `Translator` export: a graph naming its markers, variables, assets and the manifest."""
    folder.mkdir(parents=True)
    (folder / "saved_model.pb").write_bytes(b"graph " + b" ".join(destinations.TRANSLATOR_MARKERS))
    for relative in EXPORT_FILES:
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_bytes(os.urandom(32))
    (folder / "assets.extra").mkdir()  # a SavedModel's folder, empty
    manifest.write_manifest(folder)
    return folder


@st.composite
def foreign_entries(draw, package_files):
    """A list of `(kind, relative path)` to add under a run or an export; kinds as `add_foreign` makes them."""
    folders = sorted({str(pathlib.PurePosixPath(f).parent) for f in package_files} - {"."}) + ["", "new/deeper"]
    entries = []
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["file", "empty folder", "file link", "folder link", "changed"]))
        if kind == "changed":
            entries.append((kind, draw(st.sampled_from(package_files))))
        else:
            where = draw(st.sampled_from(folders))
            entries.append((kind, f"{where}/{draw(NAMES)}".lstrip("/")))
    return entries


def add_foreign(root, outside, entries):
    """Adds `entries` under `root`; returns those that are really there (a later one may land on an earlier)."""
    added = []
    for kind, relative in entries:
        path = root / relative
        if path.exists() or path.is_symlink():
            if kind != "changed":
                continue
        path.parent.mkdir(parents=True, exist_ok=True)
        if kind == "file":
            path.write_text("the user's own words\n", encoding="utf-8")
        elif kind == "empty folder":
            path.mkdir()
        elif kind == "file link":
            path.symlink_to(outside / "thesis.txt")
        elif kind == "folder link":
            path.symlink_to(outside, target_is_directory=True)
        else:
            path.write_bytes(path.read_bytes() + b" edited by the user")
        added.append((kind, relative))
    return added


@pytest.fixture
def outside(tmp_path):
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "thesis.txt").write_text("Chapter 1\n", encoding="utf-8")
    return folder


def check_removal(folder, kind, added, outside):
    before, outside_before = snapshot(folder), snapshot(outside)
    try:
        destinations.remove_own(folder, kind)
    except destinations.UnsafeDestinationError as error:
        assert added, f"refused a folder holding only the package's files: {error}"
        assert snapshot(folder) == before and error.entry is not None and str(folder / error.entry) in str(error)
        named = error.entry
        assert any(named == relative or named.startswith(relative + "/") for _, relative in added) or any(
            relative.startswith(named + "/") for _, relative in added
        ), (named, added)
    else:
        assert not added, f"deleted a folder holding {added}"
        assert list(folder.iterdir()) == []
    assert snapshot(outside) == outside_before


@SETTINGS
@given(data=st.data())
def test_overwriting_a_run_removes_exactly_its_files_or_nothing(tmp_path_factory, data):
    root = tmp_path_factory.mktemp("run-property")
    outside = root / "outside"
    outside.mkdir()
    (outside / "thesis.txt").write_text("Chapter 1\n", encoding="utf-8")
    files = data.draw(st.lists(st.sampled_from(RUN_FILES), min_size=1, unique=True))
    run = make_run(root / "run", files)
    added = add_foreign(run, outside, data.draw(foreign_entries(files)))
    check_removal(run, "run", added, outside)


@SETTINGS
@given(data=st.data())
def test_overwriting_an_export_removes_exactly_its_files_or_nothing(tmp_path_factory, data):
    root = tmp_path_factory.mktemp("export-property")
    outside = root / "outside"
    outside.mkdir()
    (outside / "thesis.txt").write_text("Chapter 1\n", encoding="utf-8")
    export = make_export(root / "export")
    added = add_foreign(export, outside, data.draw(foreign_entries(("saved_model.pb", *EXPORT_FILES))))
    check_removal(export, "export", added, outside)


# -- the record -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "config",
    [
        '// my app\n{"created_by": "keras-transformer"}',  # JSONC: a comment
        '{"created_by": "keras-transformer", "files": ',  # cut off
        '["created_by", "keras-transformer"]',  # not an object
        '{"created_by": "someone else", "files": {}}',
        '{"created_by": "keras-transformer", "files": {"history.csv": {"size": "12", "sha256": "00"}}}',
        '{"created_by": "keras-transformer", "files": {"../outside.txt": {"size": 1, "sha256": "' + "0" * 64 + '"}}}',
        '{"created_by": "keras-transformer", "members": ["../elsewhere"]}',
    ],
    ids=["jsonc", "cut-off", "not-an-object", "other-creator", "bad-entry", "path-outside", "bad-member"],
)
def test_a_record_that_does_not_parse_means_not_ours(tmp_path, config):
    folder = tmp_path / "app"
    folder.mkdir()
    (folder / "config.json").write_text(config, encoding="utf-8")
    (folder / "history.csv").write_text("epoch,loss\n", encoding="utf-8")
    before = snapshot(folder)
    assert run_files.files_record(folder) is None
    with pytest.raises(destinations.UnsafeDestinationError, match="is not empty and is not a training run"):
        destinations.check_destination(folder, "run")
    with pytest.raises(destinations.UnsafeDestinationError):
        destinations.remove_own(folder, "run")
    assert snapshot(folder) == before


def test_an_unfinished_run_owns_the_files_training_rewrites_whatever_their_content(tmp_path):
    run = make_run(tmp_path / "run", finished=False)
    (run / "history.csv").write_bytes(b"a row written after the last record\n")
    (run / "snapshots").mkdir()
    (run / "snapshots" / "epoch-003.weights.h5").write_bytes(b"weights")
    (run / "backup").mkdir()
    (run / "backup" / "latest.weights.h5.bkp").write_bytes(b"weights")
    assert destinations.check_destination(run, "run") == "ours"
    (run / "backup" / "my-notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(destinations.UnsafeDestinationError, match="backup/my-notes.txt was not written"):
        destinations.check_destination(run, "run")


def test_a_finished_run_owns_its_files_only_as_recorded(tmp_path):
    run = make_run(tmp_path / "run")
    assert destinations.check_destination(run, "run") == "ours"
    (run / "history.csv").write_bytes(b"edited\n")
    with pytest.raises(destinations.UnsafeDestinationError, match="history.csv has changed since"):
        destinations.check_destination(run, "run")


def test_a_run_of_an_earlier_version_owns_the_files_a_run_writes_by_name(tmp_path):
    run = make_run(tmp_path / "run")
    config = runs.read_config(run)
    del config["files"]
    atomic.write_json(run / runs.CONFIG, config)
    assert destinations.check_destination(run, "run") == "ours"
    (run / "logs" / "my_notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(destinations.UnsafeDestinationError, match="logs/my_notes.txt was not written"):
        destinations.check_destination(run, "run")


def test_the_recorder_never_adopts_a_users_file_or_a_link(tmp_path, outside):
    run = make_run(tmp_path / "run")
    (run / "logs" / "my_notes.txt").write_text("mine", encoding="utf-8")
    (run / "tokenizers" / "NOTES.txt").write_text("mine", encoding="utf-8")
    (run / "history.csv").unlink()
    (run / "history.csv").symlink_to(outside / "thesis.txt")
    run_files.FileRecorder(run).record()
    files = runs.read_config(run)["files"]
    assert "logs/my_notes.txt" not in files and "tokenizers/NOTES.txt" not in files and "history.csv" not in files
    assert set(files) == set(RUN_FILES) - {"history.csv"}


def test_a_changed_export_file_a_link_or_an_added_file_is_refused(tmp_path, outside):
    export = make_export(tmp_path / "export")
    assert destinations.check_destination(export, "export") == "ours"
    cases = {
        "variables/README.txt": lambda p: p.write_text("deploy notes", encoding="utf-8"),
        "assets.extra/DEPLOY_NOTES.txt": lambda p: p.write_text("deploy notes", encoding="utf-8"),
        "assets/source.model": lambda p: p.write_bytes(b"edited"),
    }
    for relative, change in cases.items():
        copy = tmp_path / f"copy-{len(list(tmp_path.iterdir()))}"
        shutil.copytree(export, copy, symlinks=True)
        change(copy / relative)
        before = snapshot(copy)
        with pytest.raises(destinations.UnsafeDestinationError, match=f"{relative} (was not written|has changed)"):
            destinations.check_destination(copy, "export")
        with pytest.raises(manifest.ManifestMismatchError, match=relative.split("/")[-1]):
            manifest.verify_manifest(copy)
        assert snapshot(copy) == before


def test_an_empty_or_malformed_manifest_is_not_a_record_and_does_not_verify(tmp_path):
    export = make_export(tmp_path / "export")
    for text in ("", "not a manifest\n", f"{'0' * 64}  /etc/passwd\n"):
        (export / destinations.MANIFEST).write_text(text, encoding="utf-8")
        assert destinations.files_record(export, "export") is None
        with pytest.raises(manifest.ManifestMismatchError, match="cannot be verified"):
            manifest.verify_manifest(export)
    (export / destinations.MANIFEST).unlink()
    assert manifest.verify_manifest(export) is False  # the caller warns: see test_data_safety.py


# -- an interrupted replacement -------------------------------------------------------------------


def test_a_replacement_killed_between_its_renames_is_completed_next_time(tmp_path):
    """Killed after moving the previous export aside: the complete new one takes the path."""
    previous = make_export(tmp_path / ".export.old.0123abcd.tmp")
    new = make_export(tmp_path / ".export.89abcdef.tmp")
    new_files = snapshot(new)
    destinations.recover(tmp_path / "export")
    assert snapshot(tmp_path / "export") == new_files
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export"]
    assert not previous.exists()


def test_a_replacement_killed_before_its_new_export_was_complete_is_rolled_back(tmp_path):
    previous = make_export(tmp_path / ".export.old.0123abcd.tmp")
    previous_files = snapshot(previous)
    half = tmp_path / ".export.89abcdef.tmp"
    (half / "variables").mkdir(parents=True)
    (half / "saved_model.pb").write_bytes(b"half a graph")
    destinations.recover(tmp_path / "export")
    assert snapshot(tmp_path / "export") == previous_files
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export"]


def test_a_live_writers_folder_is_left_alone(tmp_path):
    export = make_export(tmp_path / "export")
    writing = tmp_path / ".export.89abcdef.tmp"
    writing.mkdir()
    with atomic._locked(writing):  # what replace_dir holds while it writes
        destinations.recover(export)
        assert writing.is_dir()
    destinations.recover(export)
    assert not writing.exists() and destinations.is_own_export(export)


def test_a_previous_export_holding_a_users_file_is_left_with_a_warning(tmp_path):
    export = make_export(tmp_path / "export")
    previous = make_export(tmp_path / ".export.old.0123abcd.tmp")
    (previous / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.warns(destinations.LeftBehindWarning, match="notes.txt"):
        destinations.recover(export)
    assert (previous / "notes.txt").read_text(encoding="utf-8") == "mine"


def test_replace_dir_removes_the_previous_folder_through_the_callers_function(tmp_path):
    export = make_export(tmp_path / "export")
    removed = []

    def write(folder):
        make_export(pathlib.Path(folder) / "inner")
        os.rmdir(pathlib.Path(folder) / "inner" / "assets.extra")
        for entry in (pathlib.Path(folder) / "inner").iterdir():
            os.replace(entry, pathlib.Path(folder) / entry.name)
        os.rmdir(pathlib.Path(folder) / "inner")

    atomic.replace_dir(write, export, lambda old: removed.append(old.name) or destinations.remove_previous(old))
    assert removed and removed[0].startswith(".export.old.")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export"] and destinations.is_own_export(export)


def test_remove_files_keeps_what_it_was_not_asked_to_delete(tmp_path):
    (tmp_path / "backup").mkdir()
    (tmp_path / "backup" / "latest.weights.h5").write_bytes(b"w")
    (tmp_path / "backup" / "mine.txt").write_text("mine", encoding="utf-8")
    (tmp_path / "snapshots").mkdir()
    (tmp_path / "snapshots" / "epoch-001.weights.h5").write_bytes(b"w")
    ownership.remove_files(tmp_path, ["backup/latest.weights.h5", "snapshots/epoch-001.weights.h5"])
    assert snapshot(tmp_path) == {"backup": None, "backup/mine.txt": b"mine"}


def test_config_json_records_json_that_other_tools_read(tmp_path):
    run = make_run(tmp_path / "run")
    files = json.loads((run / "config.json").read_text(encoding="utf-8"))["files"]
    for relative, entry in files.items():
        assert entry == {"size": (run / relative).stat().st_size, "sha256": ownership.sha256(run / relative)}
