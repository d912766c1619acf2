"""Result files (translations, scores): checked before any work, written whole, never over what is read.

Translating a test set can take an hour. `check_outputs` refuses, before the
model loads, an output that could not be written at the end or that would
destroy what the job reads: an input file (the same file under any name,
links included), a file inside the model's folder, a file inside any
training run or export of this package (a file of another kind there would
also stop `train --resume`, `--overwrite` and `export --overwrite` from
accepting the folder as theirs), or a second output of the same job.
`write_text` then writes the file at once through a temporary file and a
rename (`atomic`): an interrupt or a full disk leaves the earlier file,
never half of a new one. A path that is not a plain file (`/dev/stdout`, a
named pipe) is written to as it is.

Example:

>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> _ = (folder / "test.en").write_text("A dog runs.\\n")
>>> check_outputs([("output", folder / "test.de")], inputs=[("input", folder / "test.en")])
>>> check_outputs([("output", folder / "test.en")], inputs=[("input", folder / "test.en")])  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
keras_transformer.errors.ArgumentError: output=.../test.en is the file that input=.../test.en reads: ...
>>> write_text(folder / "test.de", "Ein Hund rennt.\\n")
>>> (folder / "test.de").read_text()
'Ein Hund rennt.\\n'
"""

import os
import pathlib
import stat
import tempfile  # noqa: F401  (the example above)

from keras_transformer.errors import ArgumentError, literal
from keras_transformer.files import atomic, destinations


def check_outputs(outputs, inputs=(), folders=()):
    """Refuses outputs that would destroy an input or a model, or that cannot be written.

    Args:
        outputs: `(argument name, path)` pairs, the files the job will write;
            a `None` path (not asked for) is passed over.
        inputs: `(argument name, path)` pairs, the files the job reads.
        folders: `(argument name, path)` pairs, folders the job reads (a run
            directory, an export) that no output may lie in.

    Raises:
        ArgumentError: naming the output's argument and what it collides
            with. Nothing is written either way.
    """
    outputs = [(name, pathlib.Path(path)) for name, path in outputs if path is not None]
    inputs = [(name, path) for name, path in inputs if path is not None]
    for index, (name, path) in enumerate(outputs):
        _check_writable(name, path)
        for other, other_path in inputs:
            if _same_file(path, other_path):
                raise ArgumentError(
                    f"{{{name}={literal(path)}}} is the file that {{{other}={literal(other_path)}}} reads: "
                    "writing there would destroy it. Choose another output file"
                )
        for other, other_path in outputs[:index]:
            if _same_file(path, other_path):
                raise ArgumentError(
                    f"{{{other}={literal(other_path)}}} and {{{name}={literal(path)}}} name the same file: "
                    "one would replace the other. Choose two files"
                )
        for other, folder in folders:
            if _resolved(folder) in _resolved(path).parents:
                raise ArgumentError(
                    f"{{{name}={literal(path)}}} lies inside {{{other}={literal(folder)}}}, which this job reads: "
                    "a file written there could replace part of it. Choose an output outside that folder"
                )
        _check_outside_runs(name, path)


def write_text(path, text):
    """Writes `text` (UTF-8) at `path`: atomically for a plain file, straight into a pipe or a device."""
    write_bytes(path, text.encode("utf-8"))


def write_bytes(path, data):
    """Writes `data` at `path`: atomically for a plain file, straight into a pipe or a device."""
    if _is_special(path):
        with open(path, "wb") as handle:
            handle.write(data)
        return
    atomic.write_bytes(_resolved(path), data)  # through a symbolic link: the link stays


def _check_outside_runs(name, path):
    """Refuses `path` inside a training run or an export of this package."""
    for folder in _resolved(path).parents:
        kind = destinations.marked_kind(folder)
        if kind is not None:
            raise ArgumentError(
                f"{{{name}={literal(path)}}} lies inside {literal(folder)}, a {destinations.KINDS[kind]} of "
                f"{destinations.CREATOR}: a file of another kind there would stop it from being resumed or "
                "replaced, or could replace one of its files. Choose an output outside that folder"
            )


def _is_special(path):
    """Whether `path` exists and is neither a plain file nor a folder (a pipe, a device), links followed."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _check_writable(name, path):
    if path.is_dir():
        raise ArgumentError(f"{{{name}={literal(path)}}} is a folder. Name a file to write")
    if _is_special(path):
        return  # written to as it is
    parent = _resolved(path).parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise ArgumentError(f"{{{name}={literal(path)}}} cannot be written: {literal(parent)} is a file, not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ArgumentError(f"{{{name}={literal(path)}}} cannot be written: {literal(parent)} is not writable")


def _same_file(path, other):
    path, other = pathlib.Path(path), pathlib.Path(other)
    if path.exists() and other.exists():
        return os.path.samefile(path, other)
    return _resolved(path) == _resolved(other)


def _resolved(path):
    return pathlib.Path(os.path.realpath(path))
