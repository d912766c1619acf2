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


def replace_dir(write, destination):
    """Calls `write(tmp_dir)`, then swaps `tmp_dir` into `destination`.

    The previous `destination`, if any, stays intact until the new one is
    complete: a crash, a full disk or an interrupt inside `write` leaves it as
    it was. The caller decides whether `destination` may be replaced at all
    (see `keras_transformer.destinations.check_destination`).
    """
    destination = pathlib.Path(destination)
    tmp = make_temp_dir(destination.parent, destination.name)
    old = None
    try:
        write(str(tmp))
        if destination.exists():
            old = make_temp_dir(destination.parent, f"{destination.name}.old")
            os.replace(destination, old)
        os.replace(tmp, destination)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and old.exists() and not destination.exists():
            os.replace(old, destination)  # the swap failed half-way: put the previous one back
        raise
