"""Which files under a run or an export this package wrote, and removing exactly those.

Every folder this package writes keeps a record of its own files: a training
run in its `config.json` (`"files"`: each file's path, size and sha256; see
`keras_transformer.runs`), an export in its `MANIFEST.sha256` (see `manifest`). A `Record`
is what such a record says. `first_foreign` walks the folder, never following
a link, and names the first entry the record does not account for:

- a file that is not recorded, or whose size or sha256 is not the recorded one;
- a symbolic link, a named pipe, a socket or a device;
- a folder that holds no recorded file and is not one of the record's own.

The temporary files of an interrupted atomic write (`atomic.TEMPORARY`) are
the package's wherever they are. `remove_recorded` deletes a folder's files
one by one, and then its emptied folders, only when nothing under it is
foreign; otherwise it raises `ForeignPathError` before deleting anything.

Example:

>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> _ = (folder / "model.bin").write_bytes(b"weights")
>>> record = Record({"model.bin": file_entry(folder / "model.bin")})
>>> first_foreign(folder, record) is None
True
>>> _ = (folder / "notes.txt").write_text("mine")
>>> first_foreign(folder, record)
('notes.txt', 'was not written by keras-transformer')
"""

import dataclasses
import hashlib
import os
import pathlib
import re
import stat
import tempfile  # noqa: F401  (the example above)
from collections.abc import Mapping

from keras_transformer.files.atomic import TEMPORARY

CREATOR = "keras-transformer"
NOT_WRITTEN = f"was not written by {CREATOR}"
CHANGED = f"has changed since {CREATOR} wrote it"
# What earlier versions' atomic writes left behind when a crash interrupted them.
EARLIER_TEMPORARY = re.compile(r"\.config\.json\.\w+\.tmp|\.model\.tmp\d+\.keras")


class ForeignPathError(ValueError):
    """A folder holds something this package did not write; nothing was deleted.

    Attributes:
        folder: the folder that was to be replaced or deleted.
        relative: the foreign entry's path inside it (POSIX form).
        reason: why it is foreign, in a few words.
    """

    def __init__(self, folder, relative, reason):
        self.folder, self.relative, self.reason = folder, relative, reason
        super().__init__(f"{pathlib.Path(folder) / relative} {reason}")


@dataclasses.dataclass(frozen=True)
class Record:
    """What a folder's record says this package wrote there.

    Attributes:
        files: `{relative POSIX path: (size or None, sha256 or None)}`; a
            `None` is not checked.
        by_name: paths accepted whatever their content (a run's files that
            its training rewrites while it has not finished), or None.
        folders: folders that are the package's even when empty, or None.
        members: `{relative folder: Record}`, folders with records of their
            own (an ensemble's members).
    """

    files: Mapping = dataclasses.field(default_factory=dict)
    by_name: re.Pattern = None
    folders: re.Pattern = None
    members: Mapping = dataclasses.field(default_factory=dict)

    def accepts_folder(self, relative):
        if self.folders is not None and self.folders.fullmatch(relative):
            return True
        prefix = relative + "/"
        return any(path.startswith(prefix) for path in self.files)

    def foreign_file(self, relative, path):
        """Why the file at `path` (recorded as `relative`) is not the package's, or None."""
        if self.by_name is not None and self.by_name.fullmatch(relative):
            return None
        if relative in self.files:
            size, digest = self.files[relative]
            if size is not None and path.stat().st_size != size:
                return CHANGED
            if digest is not None and sha256(path) != digest:
                return CHANGED
            return None
        if is_temporary(path.name):
            return None
        return NOT_WRITTEN


def is_temporary(name):
    """Whether `name` is an interrupted atomic write's temporary file, this version's or an earlier one's."""
    return bool(TEMPORARY.fullmatch(name) or EARLIER_TEMPORARY.fullmatch(name))


def first_foreign(folder, record):
    """`(relative path, reason)` of the first entry under `folder` that `record` does not account for, or None.

    Entries are visited in sorted order, depth first, without following links.
    """
    return _first_foreign(pathlib.Path(folder), "", record)


def _first_foreign(root, prefix, record):
    for entry in sorted(os.scandir(root / prefix) if prefix else os.scandir(root), key=lambda e: e.name):
        relative = f"{prefix}/{entry.name}" if prefix else entry.name
        reason = _entry_reason(entry)
        if reason:
            return relative, reason
        if entry.is_dir(follow_symlinks=False):
            found = _foreign_in_folder(root, relative, record)
        else:
            reason = record.foreign_file(relative, pathlib.Path(entry.path))
            found = (relative, reason) if reason else None
        if found:
            return found
    return None


def _foreign_in_folder(root, relative, record):
    if relative in record.members:
        member = record.members[relative]
        if member is None:
            if not any((root / relative).iterdir()):
                return None  # made, and its run killed before it wrote anything
            return relative, f"is an ensemble member without a record of its files ({CREATOR} did not write it)"
        found = first_foreign(root / relative, member)
        return (f"{relative}/{found[0]}", found[1]) if found else None
    if not record.accepts_folder(relative):
        return relative, f"is a folder {CREATOR} did not make"
    return _first_foreign(root, relative, record)


def _entry_reason(entry):
    if entry.is_symlink():
        return "is a symbolic link"
    mode = entry.stat(follow_symlinks=False).st_mode
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        return "is not a regular file (a pipe, a socket or a device)"
    return None


def check_recorded(folder, record):
    """Raises `ForeignPathError` naming the first entry under `folder` that `record` does not account for."""
    found = first_foreign(folder, record)
    if found:
        raise ForeignPathError(folder, *found)


def first_missing(folder, record):
    """The first file `record` lists that is not under `folder` (a relative POSIX path), or None."""
    folder = pathlib.Path(folder)
    return next((relative for relative in sorted(record.files) if not (folder / relative).is_file()), None)


def remove_recorded(folder, record):
    """Deletes every file under `folder`, then its folders, once `check_recorded` has found nothing foreign.

    `folder` itself stays (empty). Nothing is deleted when anything under it is
    foreign: `ForeignPathError` names it.
    """
    folder = pathlib.Path(folder)
    check_recorded(folder, record)
    for parent, folders, files in os.walk(folder, topdown=False):
        for name in files:
            os.unlink(os.path.join(parent, name))
        for name in folders:
            os.rmdir(os.path.join(parent, name))


def remove_files(folder, relative_paths):
    """Deletes the files `relative_paths` under `folder` (those that exist), then each folder they leave empty.

    For files this package has just written and knows by name (a run's
    backups, once it finishes); anything else in their folders stays.
    """
    folder = pathlib.Path(folder)
    parents = set()
    for relative in relative_paths:
        path = folder / relative
        if path.is_file() and not path.is_symlink():
            path.unlink()
        parents.update(p for p in pathlib.PurePosixPath(relative).parents if str(p) != ".")
    for parent in sorted(parents, key=lambda p: len(p.parts), reverse=True):
        path = folder / parent
        if path.is_dir() and not path.is_symlink() and not any(path.iterdir()):
            path.rmdir()


def file_entry(path):
    """`(size, sha256)` of the file at `path`, as a `Record` lists it."""
    return os.stat(path).st_size, sha256(path)


def sha256(path):
    """The hex sha256 of the file at `path`, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
