"""Where training and export may write: they replace only what this package made.

A command that writes a folder (a training run, an export) may create it,
fill an empty one, or delete and replace a folder it can prove it made:

- a training run: a `config.json` written by `keras_transformer.training`
  beside only the files a run holds (`run_dir`);
- an export: a SavedModel whose manifest (`MANIFEST.sha256`) or graph marks
  it as a `Translator` export, beside only the files a SavedModel holds;
- a CTranslate2 export: `model.bin` with a manifest and the
  `keras_transformer.json` that `ctranslate2_export.convert_run` writes,
  beside only the files a CTranslate2 model holds.

Anything else (a file, a folder of other files) raises `UnsafeDestinationError`
before any work starts, whatever options the command was given. The file system root, the
home folder, the current folder and its parents are always refused.

Example:

>>> check_destination("saved_models/new-run", "run")  # does not exist yet
'new'
>>> check_destination(pathlib.Path.home(), "run")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
keras_transformer.destinations.UnsafeDestinationError: ... is the home folder: ...
"""

import json
import os
import pathlib
import re

from keras_transformer.atomic import TEMPORARY
from keras_transformer.errors import ArgumentError, literal

RUN = "run"
EXPORT = "export"
CTRANSLATE2 = "ctranslate2"
KINDS = {RUN: "training run", EXPORT: "SavedModel export", CTRANSLATE2: "CTranslate2 export"}
MANIFEST = "MANIFEST.sha256"
CREATOR = "keras-transformer"  # config.json's "created_by"

RUN_ENTRIES = {"config.json", "model.keras", "tokenizers", "history.csv", "logs", "backup", "snapshots"}
EXPORT_ENTRIES = {"saved_model.pb", "variables", "assets", "assets.extra", "fingerprint.pb", MANIFEST}
CTRANSLATE2_PROVENANCE = "keras_transformer.json"
CTRANSLATE2_ENTRIES = {
    "model.bin",
    "config.json",
    "shared_vocabulary.json",
    "source_vocabulary.json",
    "target_vocabulary.json",
    CTRANSLATE2_PROVENANCE,
    MANIFEST,
}
# What earlier versions' atomic writes left behind when a crash interrupted them.
EARLIER_TEMPORARY = re.compile(r"\.config\.json\.\w+\.tmp|\.model\.tmp\d+\.keras")
MEMBER = re.compile(r"member-\d+")  # an ensemble's members
# The graph of every `Translator` export names these functions.
TRANSLATOR_MARKERS = (b"source_lengths", b"max_source_length")


class UnsafeDestinationError(ValueError):
    """A folder that a command will not write into, delete or replace.

    Attributes:
        path: the folder (as given).
        reason: why, in a few words.
    """

    def __init__(self, path, reason):
        self.path, self.reason = path, reason
        super().__init__(f"{path} {reason}: refusing to write there; nothing was changed")


class DestinationInUseError(ArgumentError):
    """A run or export of this package is where a new one would go.

    The caller may pass one of `arguments` (each a boolean argument that
    allows it, e.g. `"overwrite"`) or choose another destination. The
    message names them as Python does (`overwrite=True`); `describe` names
    them otherwise (the command line's `--overwrite`, see `errors.ArgumentError`).
    """

    def __init__(self, path, holds, arguments):
        self.path, self.holds, self.arguments = path, holds, tuple(arguments)
        remedies = " or ".join(f"{{{argument}=True}}" for argument in self.arguments)
        super().__init__(f"{literal(path)} already holds {literal(holds)}. Pass {remedies}, or choose another output")


def check_destination(path, kind):
    """What writing a `kind` (`"run"`, `"export"` or `"ctranslate2"`) at `path` would do.

    Returns:
        `"new"` (does not exist), `"empty"` (an empty folder), or `"ours"` (a
        run or export of this package, which the caller may resume, or replace
        when the user asked for that).

    Raises:
        UnsafeDestinationError: for a protected folder, a file, a symbolic
            link, or a non-empty folder this package did not make. No option
            of any command lifts this.
    """
    if kind not in KINDS:
        raise ValueError(f"`kind` must be one of {sorted(KINDS)}. Received: kind={kind!r}")
    path = pathlib.Path(path)
    _refuse_protected(path)
    if path.is_symlink():
        raise UnsafeDestinationError(path, "is a symbolic link")
    if not path.exists():
        return "new"
    if not path.is_dir():
        raise UnsafeDestinationError(path, "is a file, not a folder")
    if not any(path.iterdir()):
        return "empty"
    if not is_own(path, kind):
        raise UnsafeDestinationError(path, f"is not empty and is not a {KINDS[kind]} written by {CREATOR}")
    return "ours"


def check_separate(source, destination, what="the output"):
    """Refuses a `destination` that is `source`, inside it, or holds it."""
    source, destination = pathlib.Path(source).resolve(), pathlib.Path(destination).resolve()
    if source == destination or source in destination.parents or destination in source.parents:
        raise UnsafeDestinationError(destination, f"overlaps {source}, which {what} is made from")


def is_own(path, kind):
    """Whether `path` is a `kind` (`"run"`, `"export"` or `"ctranslate2"`) that this package wrote."""
    return {RUN: is_own_run, EXPORT: is_own_export, CTRANSLATE2: is_own_ctranslate2}[kind](path)


def is_own_run(path):
    """Whether `path` is a training run directory written by this package.

    Its `config.json` says so (or is a run config of an earlier version, or is
    unreadable, as after a crash mid-write), and every other entry is one a run
    writes: an ensemble's `member-*` folders and the temporary files of an
    interrupted atomic write too.
    """
    path = pathlib.Path(path)
    config_path = path / "config.json"
    if not config_path.is_file() or not _only_entries(path, RUN_ENTRIES, MEMBER):
        return False
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        return True  # written half-way: the layout around it is a run's
    if not isinstance(config, dict):
        return False
    if config.get("created_by") == CREATOR:
        return True
    return isinstance(config.get("preset"), dict) and isinstance(config.get("model"), dict)


def is_own_export(path):
    """Whether `path` is a SavedModel that `Translator.save` wrote (with or without a manifest)."""
    path = pathlib.Path(path)
    graph = path / "saved_model.pb"
    if not graph.is_file() or not _only_entries(path, EXPORT_ENTRIES):
        return False
    if (path / MANIFEST).is_file():
        return True
    data = graph.read_bytes()
    return all(marker in data for marker in TRANSLATOR_MARKERS)


def is_own_ctranslate2(path):
    """Whether `path` is a CTranslate2 model that `ctranslate2_export.convert_run` wrote.

    It holds `model.bin`, a manifest and a `keras_transformer.json` whose
    `created_by` is this package, and nothing a CTranslate2 model does not hold.
    """
    path = pathlib.Path(path)
    provenance = path / CTRANSLATE2_PROVENANCE
    if not all((path / name).is_file() for name in ("model.bin", MANIFEST, CTRANSLATE2_PROVENANCE)):
        return False
    if not _only_entries(path, CTRANSLATE2_ENTRIES):
        return False
    try:
        data = json.loads(provenance.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        return False
    return isinstance(data, dict) and data.get("created_by") == CREATOR and data.get("format") == "ctranslate2"


def _only_entries(path, names, pattern=None):
    """Whether every entry of `path` is in `names`, a temporary file, or matches `pattern`."""
    for entry in os.scandir(path):
        name = entry.name
        if name in names or TEMPORARY.fullmatch(name) or EARLIER_TEMPORARY.fullmatch(name):
            continue
        if pattern and pattern.fullmatch(name):
            continue
        return False
    return True


def _refuse_protected(path):
    resolved = path.resolve()
    if resolved == pathlib.Path(resolved.anchor):
        raise UnsafeDestinationError(path, "is the root of the file system")
    if resolved == pathlib.Path.home().resolve():
        raise UnsafeDestinationError(path, "is the home folder")
    cwd = pathlib.Path.cwd().resolve()
    if resolved == cwd:
        raise UnsafeDestinationError(path, "is the current folder")
    if resolved in cwd.parents:
        raise UnsafeDestinationError(path, "holds the current folder")
