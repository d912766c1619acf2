"""Where training and export may write: they replace only what this package wrote and recorded.

A command that writes a folder (a training run, an export) may create it,
fill an empty one, or replace a folder this package wrote, deleting only the
files its record lists (`ownership`):

- a training run: a `config.json` written by `keras_transformer.training`,
  whose `"files"` lists each file of the run with its size and sha256
  (`run_files.files_record`);
- an export: a SavedModel of a `Translator` whose `MANIFEST.sha256` lists
  every file;
- a CTranslate2 export: `model.bin` with a manifest and the
  `keras_transformer.json` that `ctranslate2.conversion.convert_run` writes;
- a LiteRT export: `model.tflite` with a manifest and the `litert.json`
  that `litert.export_run` writes;
- a Hugging Face checkpoint export: `model.safetensors` with a manifest and
  the `keras_transformer.json` (format `transformers`) that
  `pretrained.export_checkpoint` writes.

Anything else anywhere under the folder (a file the record does not list or
whose sha256 differs, a symbolic link, a folder of the user's) raises
`UnsafeDestinationError` naming it, before any work starts and whatever
options the command was given; a record that does not parse means the folder
is not this package's. The file system root, the home folder, the current
folder and its parents are always refused. A replacement that a crash
interrupted is completed or rolled back first (`recover`).

Example:

>>> check_destination("saved_models/new-run", "run")  # does not exist yet
'new'
>>> check_destination(pathlib.Path.home(), "run")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
keras_transformer.files.destinations.UnsafeDestinationError: ... is the home folder: ...
"""

import dataclasses
import json
import os
import pathlib
import re
import shutil
import warnings
from collections.abc import Callable

from keras_transformer.errors import ArgumentError, KerasTransformerWarning, literal
from keras_transformer.files import atomic, ownership, run_files

RUN = "run"
EXPORT = "export"
CTRANSLATE2 = "ctranslate2"
LITERT = "litert"
TRANSFORMERS = "transformers"
MANIFEST = "MANIFEST.sha256"
CREATOR = ownership.CREATOR  # config.json's "created_by"
CTRANSLATE2_PROVENANCE = "keras_transformer.json"
TRANSFORMERS_PROVENANCE = CTRANSLATE2_PROVENANCE  # one name: its `format` tells the two apart
LITERT_PROVENANCE = "litert.json"
# The graph of every `Translator` export names these functions.
TRANSLATOR_MARKERS = (b"source_lengths", b"max_source_length")
EXPORT_FOLDERS = re.compile(r"assets|assets\.extra|variables")  # a SavedModel's, which may be empty


@dataclasses.dataclass(frozen=True)
class Destination:
    """A kind of folder that this package writes and may replace: how one that it wrote is told from any other.

    An export's folder holds a manifest (`MANIFEST.sha256`) that lists its
    files, `model_file` and `provenance_file` among them; the provenance
    file is a JSON object whose `created_by` is this package and whose
    `format` is `kind`. A kind told otherwise (a run, by its config.json; a
    SavedModel, by its graph) gives `record` and `marked`.

    Attributes:
        kind: its name (`check_destination(path, kind)`); an export's is its format's.
        label: what it is, in messages (`"CTranslate2 export"`).
        model_file: the file every one holds (`"model.bin"`).
        provenance_file: the JSON file that says who wrote it, in which format.
        record_file: the file that holds its record of the files it wrote.
        record: `record(path) -> ownership.Record | None`, where the two
            files above do not tell it; None otherwise.
        marked: `marked(path) -> bool`, whether `path` bears its mark, whole
            or not (see `marked_kind`), where the provenance file does not tell it.
    """

    kind: str
    label: str
    model_file: str | None = None
    provenance_file: str | None = None
    record_file: str = MANIFEST
    record: Callable | None = None
    marked: Callable | None = None

    def files_record(self, path):
        """What the folder `path` records of its files (`ownership.Record`), or None when it is not one of these."""
        path = pathlib.Path(path)
        if self.record is not None:
            return self.record(path)
        return _provenance_record(path, self.model_file, self.provenance_file, self.kind)

    def bears_mark(self, path):
        """Whether the folder `path` bears the mark of one of these, whole or not."""
        path = pathlib.Path(path)
        if self.marked is not None:
            return self.marked(path)
        provenance = _mark(path / self.provenance_file)
        return provenance.get("created_by") == CREATOR and provenance.get("format") == self.kind


DESTINATIONS = {}  # {kind: Destination}, in the order `kind_of` and `marked_kind` try them
KINDS = {}  # {kind: label}


def register(destination):
    """Adds `destination` (a `Destination`) to the kinds this package writes and may replace; returns it.

    The export registry registers each format's (`export_formats.register`).
    A kind registered again must be the same `Destination`.
    """
    known = DESTINATIONS.setdefault(destination.kind, destination)
    if known != destination:
        raise ValueError(f"the destination kind {destination.kind!r} is registered already, as {known}")
    KINDS[destination.kind] = destination.label
    return destination


class UnsafeDestinationError(ValueError):
    """A folder that a command will not write into, delete or replace.

    Attributes:
        path: the folder (as given).
        reason: why, in a few words.
        entry: the path inside it that is the reason (POSIX form), or None.
    """

    def __init__(self, path, reason, entry=None):
        self.path, self.reason, self.entry = path, reason, entry
        if entry is None:
            super().__init__(f"{path} {reason}: refusing to write there; nothing was changed")
        else:
            super().__init__(f"{pathlib.Path(path) / entry} {reason}: refusing to write in {path}; nothing was changed")


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


class LeftBehindWarning(KerasTransformerWarning):
    """A previous export moved aside during a replacement holds files this package did not write: it stays."""


def check_destination(path, kind):
    """What writing a `kind` (`"run"`, `"export"`, `"ctranslate2"`, ..., each of `DESTINATIONS`) at `path` does.

    Returns:
        `"new"` (does not exist), `"empty"` (an empty folder), or `"ours"` (a
        run or export of this package, every file under it recorded, which
        the caller may resume, or replace when the user asked for that).

    Raises:
        UnsafeDestinationError: for a protected folder, a file, a symbolic
            link, a non-empty folder this package did not make, or one that
            holds anything its record does not list (named). No option of
            any command lifts this.
    """
    if kind not in KINDS:
        raise ValueError(f"`kind` must be one of {sorted(KINDS)}. Received: kind={kind!r}")
    path = pathlib.Path(path)
    _refuse_protected(path)
    if path.is_symlink():
        raise UnsafeDestinationError(path, "is a symbolic link")
    recover(path)
    if not path.exists():
        return "new"
    if not path.is_dir():
        raise UnsafeDestinationError(path, "is a file, not a folder")
    if not any(path.iterdir()):
        return "empty"
    record = files_record(path, kind)
    if record is None:
        raise UnsafeDestinationError(
            path, f"is not empty and is not a {KINDS[kind]} written by {CREATOR}{_why(path, kind)}"
        )
    found = ownership.first_foreign(path, record)
    if found:
        raise UnsafeDestinationError(path, *reversed(found))
    return "ours"


def check_separate(source, destination, what="the output"):
    """Refuses a `destination` that is `source`, inside it, or holds it."""
    source, destination = pathlib.Path(source).resolve(), pathlib.Path(destination).resolve()
    if source == destination or source in destination.parents or destination in source.parents:
        raise UnsafeDestinationError(destination, f"overlaps {source}, which {what} is made from")


def files_record(path, kind):
    """What a `kind` at `path` records of its files (`ownership.Record`), or None when it has no such record."""
    return DESTINATIONS[kind].files_record(path)


def kind_of(path):
    """The kind of run or export of this package that `path` holds a record of, or None."""
    return next((kind for kind in KINDS if files_record(path, kind) is not None), None)


def marked_kind(path):
    """The kind of run or export of this package that `path` bears the mark of, whole or not; or None.

    Looser than `kind_of`: a run's config.json written by this package, a
    SavedModel with a manifest or a `Translator` graph, an export whose
    provenance file (`keras_transformer.json`, `litert.json`) this package
    wrote. For refusing to write a file into such a folder, which would make
    it foreign to its own record.
    """
    return next((kind for kind, destination in DESTINATIONS.items() if destination.bears_mark(path)), None)


def _mark(path):
    """The JSON object in the file at `path`, or {} when there is none."""
    try:
        data = json.loads(pathlib.Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def _why(path, kind):
    """Why `path` holds no record of a `kind`, for the message, when its record file exists."""
    record_file = path / DESTINATIONS[kind].record_file
    if not record_file.exists():
        return ""
    return f" ({record_file} is not its record of the files it wrote)"


def is_own(path, kind):
    """Whether `path` is a `kind` that this package wrote, with nothing under it that its record does not list."""
    record = files_record(path, kind)
    return record is not None and ownership.first_foreign(path, record) is None


def is_whole(path, kind):
    """Whether `path` is a `kind` of this package holding exactly its record's files: none foreign, none missing."""
    record = files_record(path, kind)
    return is_own(path, kind) and ownership.first_missing(path, record) is None


def is_own_run(path):
    """Whether `path` is a training run of this package holding only recorded files (see `is_own`)."""
    return is_own(path, RUN)


def is_own_export(path):
    """Whether `path` is a `Translator` SavedModel holding only the files its manifest lists (see `is_own`)."""
    return is_own(path, EXPORT)


def is_own_ctranslate2(path):
    """Whether `path` is a CTranslate2 export of this package holding only the files its manifest lists."""
    return is_own(path, CTRANSLATE2)


def remove_own(path, kind):
    """Deletes the files of the `kind` at `path` one by one, then its folders; `path` itself stays, empty.

    Raises:
        UnsafeDestinationError: `path` holds no record of a `kind`, or
            something its record does not list (named); nothing is deleted.
    """
    record = files_record(path, kind)
    if record is None:
        raise UnsafeDestinationError(path, f"is not a {KINDS[kind]} written by {CREATOR}")
    try:
        ownership.remove_recorded(path, record)
    except ownership.ForeignPathError as error:
        raise UnsafeDestinationError(path, error.reason, error.relative) from None


def remove_previous(folder):
    """Deletes a previous export that a replacement moved aside, if it holds only its recorded files.

    Otherwise it stays where it is, with a `LeftBehindWarning` naming it and
    what it holds.
    """
    folder = pathlib.Path(folder)
    if not any(folder.iterdir()):
        folder.rmdir()  # the empty folder the export was written into
        return
    kind = kind_of(folder)
    try:
        if kind is None:
            raise UnsafeDestinationError(folder, "holds no record of its files")
        remove_own(folder, kind)
        folder.rmdir()
    except UnsafeDestinationError as error:
        where = folder if error.entry is None else folder / error.entry
        warnings.warn(LeftBehindWarning(f"{where} {error.reason}: {folder} was left where it is"), stacklevel=2)


def recover(path):
    """Completes or rolls back a replacement of `path` that a crash interrupted; removes what it left.

    When a process died between moving the previous export aside and moving
    the new one in, the new one takes `path` if it is complete (its record is
    whole), else the previous one goes back. Temporary folders of writers
    that died are deleted, previous exports moved aside too (see
    `remove_previous`); those of live writers are left alone.
    """
    path = pathlib.Path(path)
    new, old = atomic.leftovers(path)
    if not new and not old:
        return
    with atomic.idle_folders(new) as idle:
        if len(idle) < len(new) and not path.exists():
            return  # a live writer is between its two renames
        if not path.exists() and old:
            complete = [folder for folder in idle if _is_complete(folder)]
            restored = complete[0] if complete else old.pop(0)
            os.replace(restored, path)
        for folder in idle:
            if folder.exists():
                shutil.rmtree(folder)  # a folder this package made and a writer that died left half-written
    for folder in old:
        remove_previous(folder)


def _is_complete(folder):
    kind = kind_of(folder)
    return kind is not None and is_own(folder, kind)


def read_manifest(path):
    """`{relative path: sha256}` from `path/MANIFEST.sha256`, or None when it is missing, empty or malformed."""
    manifest = pathlib.Path(path) / MANIFEST
    if manifest.is_symlink() or not manifest.is_file():
        return None
    try:
        lines = manifest.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    files = {}
    for line in lines:
        digest, _, name = line.partition("  ")
        if not re.fullmatch(r"[0-9a-f]{64}", digest) or not _is_relative(name) or name in files:
            return None
        files[name] = digest
    return files or None


def _is_relative(name):
    parts = name.split("/")
    return bool(name) and not name.startswith("/") and "" not in parts and "." not in parts and ".." not in parts


def _export_record(path):
    files = read_manifest(path)
    graph = path / "saved_model.pb"
    if files is None or "saved_model.pb" not in files or graph.is_symlink() or not graph.is_file():
        return None
    data = graph.read_bytes()
    if not all(marker in data for marker in TRANSLATOR_MARKERS):
        return None
    return _manifest_record(files, EXPORT_FOLDERS)


def _provenance_record(path, model_file, provenance_file, format_name):
    """The manifest's record of an export whose `provenance_file` says this package wrote it in `format_name`."""
    files = read_manifest(path)
    if files is None or not {model_file, provenance_file} <= files.keys():
        return None
    try:
        data = json.loads((path / provenance_file).read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if not (isinstance(data, dict) and data.get("created_by") == CREATOR and data.get("format") == format_name):
        return None
    return _manifest_record(files)


def _manifest_record(files, folders=None):
    entries = {name: (None, digest) for name, digest in files.items()}
    return ownership.Record({**entries, MANIFEST: (None, None)}, folders=folders)


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


def _is_run_marked(path):
    return run_files.files_record(path) is not None or _mark(path / run_files.CONFIG).get("created_by") == CREATOR


def _is_export_marked(path):
    graph = path / "saved_model.pb"
    return graph.is_file() and ((path / MANIFEST).is_file() or _export_record(path) is not None)


# The kinds whose writers live below the export registry (training, engines, ctranslate2, litert, pretrained),
# which check their destinations without it, and which `recover` must know whatever a process imported;
# `export_formats` registers each format's (these for its four) and any other.
for _destination in (
    Destination(
        RUN, "training run", record_file=run_files.CONFIG, record=run_files.files_record, marked=_is_run_marked
    ),
    Destination(EXPORT, "SavedModel export", record=_export_record, marked=_is_export_marked),
    Destination(CTRANSLATE2, "CTranslate2 export", "model.bin", CTRANSLATE2_PROVENANCE),
    Destination(LITERT, "LiteRT export", "model.tflite", LITERT_PROVENANCE),
    Destination(TRANSFORMERS, "Hugging Face checkpoint export", "model.safetensors", TRANSFORMERS_PROVENANCE),
):
    register(_destination)
