"""Atomic writes: a file or a folder appears complete at its path, or not at all.

Everything this package writes that a crash must not leave half-written
(config.json, checkpoints, tokenizers, figures, exports, translations and
scores) goes through a temporary path beside the destination and a rename.
The temporary names match `TEMPORARY`, so a crash leaves only names that
`destinations` recognises as this package's. New files and folders get an
ordinary `open`'s or `mkdir`'s permissions (the umask applies).

Example:

>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> with atomic_path(folder / "notes.txt") as tmp:
...     _ = tmp.write_text("complete")
>>> (folder / "notes.txt").read_text()
'complete'
>>> sorted(p.name for p in folder.iterdir())  # no temporary file left
['notes.txt']
"""

import contextlib
import fcntl
import json
import os
import pathlib
import re
import secrets
import shutil
import tempfile  # noqa: F401  (the example above)

# `.NAME.XXXXXXXX.tmp`, with the destination's own suffix after it where a writer needs one (`.keras`, `.png`).
TEMPORARY = re.compile(r"\..+\.[0-9a-f]{8}\.tmp(\.[\w.]+)?")


def temporary_name(path, suffix=""):
    """A fresh temporary path beside `path` (nothing is created)."""
    path = pathlib.Path(path)
    return path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp{suffix}")


@contextlib.contextmanager
def atomic_path(path, suffix=""):
    """A temporary path to write `path` at; renamed over `path` when the block succeeds, removed otherwise.

    Args:
        path: the destination file.
        suffix: appended to the temporary name, for writers that choose the
            format by extension (`".keras"`, `".weights.h5"`, `".png"`).
    """
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_name(path, suffix)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_bytes(path, data):
    """Writes `data` to `path` atomically, flushed to the disk before the rename."""
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def write_json(path, data):
    """Writes `data` as indented UTF-8 JSON to `path` atomically (`write_bytes`)."""
    write_bytes(path, json.dumps(data, indent=2, ensure_ascii=False).encode("utf-8"))


def make_temp_dir(parent, name):
    """A new temporary folder in `parent` for writing `name` (an ordinary `mkdir`'s permissions)."""
    parent = pathlib.Path(parent)
    parent.mkdir(parents=True, exist_ok=True)
    while True:
        tmp = temporary_name(parent / name)
        try:
            tmp.mkdir()
            return tmp
        except FileExistsError:
            continue


def replace_dir(write, destination, remove_previous):
    """Calls `write(tmp_dir)`, then swaps `tmp_dir` into `destination`.

    The previous `destination`, if any, stays intact until the new one is
    complete: a crash, a full disk or an interrupt inside `write` leaves it as
    it was. The new folder is written under `.NAME.XXXXXXXX.tmp` (locked
    while it is written, see `idle_folders`) and the previous one moves to
    `.NAME.old.XXXXXXXX.tmp` for the instant of the swap; a process killed
    between the two renames leaves both, which
    `keras_transformer.files.destinations.recover` puts right. The caller decides
    whether `destination` may be replaced at all (see
    `keras_transformer.files.destinations.check_destination`) and gives
    `remove_previous(folder)`, which deletes the previous one's files once
    the swap is done.
    """
    destination = pathlib.Path(destination)
    tmp = make_temp_dir(destination.parent, destination.name)
    with _locked(tmp):
        try:
            write(str(tmp))
            old = _swap(tmp, destination)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)  # the folder this call made, not yet swapped in
            raise
    if old is not None:
        remove_previous(old)


def _swap(tmp, destination):
    """Renames `tmp` to `destination`, moving a previous one aside first; returns where it went, or None."""
    if not destination.exists():
        os.replace(tmp, destination)
        return None
    old = make_temp_dir(destination.parent, f"{destination.name}.old")
    os.replace(destination, old)
    try:
        os.replace(tmp, destination)
    except BaseException:
        if not destination.exists():
            os.replace(old, destination)  # the swap failed half-way: put the previous one back
        raise
    return old


def leftovers(destination):
    """`(new, old)`: the temporary folders that `replace_dir` calls for `destination` left beside it.

    `new` are folders being written or left by a writer that died, `old` the
    previous folders moved aside. Nothing is changed.
    """
    destination = pathlib.Path(destination)
    name = re.escape(destination.name)
    new_name = re.compile(rf"\.{name}\.[0-9a-f]{{8}}\.tmp")
    old_name = re.compile(rf"\.{name}\.old\.[0-9a-f]{{8}}\.tmp")
    try:
        entries = sorted(destination.parent.iterdir())
    except OSError:
        return [], []
    folders = [entry for entry in entries if entry.is_dir() and not entry.is_symlink()]
    return (
        [entry for entry in folders if new_name.fullmatch(entry.name)],
        [entry for entry in folders if old_name.fullmatch(entry.name)],
    )


@contextlib.contextmanager
def idle_folders(folders):
    """The `folders` that no `replace_dir` is writing now, each locked until the block ends."""
    idle, stack = [], contextlib.ExitStack()
    with stack:
        for folder in folders:
            try:
                stack.enter_context(_locked(folder, wait=False))
            except (BlockingIOError, FileNotFoundError, NotADirectoryError):
                continue  # being written by a live process, or gone
            idle.append(folder)
        yield idle


@contextlib.contextmanager
def _locked(folder, wait=True):
    """An exclusive `flock` on `folder`, released when the block ends or the process dies."""
    descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        yield
    finally:
        os.close(descriptor)
