"""XLA's persistent compilation cache: what one process compiles, the next one loads.

Decoding compiles one XLA program per search and input shape, seconds each
at real size, and a new process compiled them all again. With the cache
on, TensorFlow writes every program it compiles to a folder, and a later
process that runs the same program (the same model, search and shapes)
loads it instead of compiling it: a second `translate` or `serve` of a
model compiles nothing.

The folder is `user_cache.cache_root()`'s `xla/<machine>`: `<machine>`
names the CPU's model and instruction sets and TensorFlow's version, so a
home folder shared by two kinds of machine never loads a program built for
the other. The programs are native code: the folder is made private to its
user, and one that others may write to is not used (a warning says so).

The commands turn the cache on; `KERAS_TRANSFORMER_XLA_CACHE=off` turns
it off and any other value names the folder to use. In Python, call
`enable()` before the first compilation: TensorFlow reads its flags then.
A `--tf_xla_persistent_cache_directory` already in `TF_XLA_FLAGS` is kept.

Example:

>>> environ = {"KERAS_TRANSFORMER_XLA_CACHE": "/tmp/kt-xla"}
>>> enable(environ=environ)
PosixPath('/tmp/kt-xla')
>>> environ["TF_XLA_FLAGS"]
'--tf_xla_persistent_cache_directory=/tmp/kt-xla --tf_xla_persistent_cache_device_types=CPU'
"""

import hashlib
import importlib.metadata
import os
import pathlib
import platform
import stat
import warnings

from keras_transformer.errors import KerasTransformerWarning
from keras_transformer.files.user_cache import cache_root

CACHE_ENV = "KERAS_TRANSFORMER_XLA_CACHE"
DIRECTORY_FLAG = "--tf_xla_persistent_cache_directory"
DEVICE_TYPES_FLAG = "--tf_xla_persistent_cache_device_types"


def enable(folder=None, environ=None):
    """Turns the cache on in `environ` (default `os.environ`): the folder used, or None where it is off.

    `folder` defaults to `$KERAS_TRANSFORMER_XLA_CACHE`, else
    `default_folder()`. Off: `KERAS_TRANSFORMER_XLA_CACHE=off`, or a folder
    that other users may write to (with a `KerasTransformerWarning`).
    """
    environ = os.environ if environ is None else environ
    flags = environ.get("TF_XLA_FLAGS", "").split()
    for flag in flags:
        if flag.startswith(DIRECTORY_FLAG + "="):
            return pathlib.Path(flag.split("=", 1)[1])
    chosen = folder or environ.get(CACHE_ENV) or default_folder()
    if str(chosen).lower() == "off":
        return None
    folder = _private_folder(pathlib.Path(chosen).expanduser())
    if folder is None:
        return None
    flags += [f"{DIRECTORY_FLAG}={folder}", f"{DEVICE_TYPES_FLAG}=CPU"]
    environ["TF_XLA_FLAGS"] = " ".join(flags)
    return folder


def default_folder():
    """`cache_root()/xla/<machine>`: one folder per CPU kind and TensorFlow version."""
    return cache_root() / "xla" / machine_tag()


def machine_tag():
    """A short name of this machine's CPU (model, instruction sets) and TensorFlow's version.

    Example:

    >>> len(machine_tag().split("-")[-1])
    16
    """
    cpu = _cpu_description()
    try:
        tensorflow = importlib.metadata.version("tensorflow")
    except importlib.metadata.PackageNotFoundError:
        tensorflow = "unknown"
    digest = hashlib.sha256(f"{cpu}\n{tensorflow}".encode()).hexdigest()[:16]
    return f"{platform.machine() or 'cpu'}-tf{tensorflow}-{digest}"


def _cpu_description():
    """The CPU's model name and flags (`/proc/cpuinfo`), else what `platform` says."""
    try:
        text = pathlib.Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return f"{platform.machine()} {platform.processor()}"
    wanted = ("model name", "flags", "features", "cpu model")
    lines = [line for line in text.splitlines() if line.split(":")[0].strip().lower() in wanted]
    return "\n".join(sorted(set(lines)))


def _private_folder(folder):
    """`folder`, created private to this user; None (with a warning) where others may write to it."""
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        status = folder.stat()
    except OSError as error:
        warnings.warn(
            f"XLA's compilation cache is off: {folder}: {error.strerror}", KerasTransformerWarning, stacklevel=2
        )
        return None
    others_write = status.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    not_mine = hasattr(os, "getuid") and status.st_uid != os.getuid()
    if others_write or not_mine:
        warnings.warn(
            f"XLA's compilation cache is off: {folder} is writable by others or not yours, and its programs "
            f"would run as native code; make it private (chmod 700) or set {CACHE_ENV} to another folder",
            KerasTransformerWarning,
            stacklevel=2,
        )
        return None
    return folder
