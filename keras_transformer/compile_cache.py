"""XLA's persistent compilation cache: what one process compiles, the next one loads, each program checked first.

Decoding compiles one XLA program per search and input shape, seconds each
at real size, and a new process compiled them all again. With the cache
on, the programs TensorFlow compiles are kept in a folder, and a later
process that runs the same program (the same model, search and shapes)
loads it instead of compiling it: a second `translate` or `serve` of a
model compiles nothing.

The folder is `user_cache.cache_root()`'s `xla/<machine>`: `<machine>`
names the CPU's model and instruction sets and TensorFlow's version, so a
home folder shared by two kinds of machine never loads a program built for
the other. The programs are native code: the folder is made private to its
user, and one that others may write to is not used (a warning says so).

TensorFlow reads a cached program as it finds it, and a damaged one (a
flipped byte, a file cut short, emptied, or two programs swapped) failed
every later run of that shape. So TensorFlow never reads the folder
itself. Each process gets a session folder (`sessions/`) holding links to
the programs (`programs/`) whose sha256 and size match `index.json`,
checked as the process starts; TensorFlow loads from there and writes
there what it compiles, and when the process ends (`atexit`) the new
programs join `programs/` with their digests. A program that fails its
check is deleted (only `programs/` is deleted from: files this package
put there) and compiled again, with one warning line. The folder holds at
most `$KERAS_TRANSFORMER_XLA_CACHE_MB` megabytes of programs (256 by
default): past it, the least recently used go first (the last use read
from the file's access time, or its adoption where the file system keeps
none).

The commands turn the cache on; `KERAS_TRANSFORMER_XLA_CACHE=off` turns
it off and any other value names the folder to use. In Python, call
`enable()` before the first compilation: TensorFlow reads its flags then.
A `--tf_xla_persistent_cache_directory` already in `TF_XLA_FLAGS` is kept,
and that folder left to TensorFlow as it is.

Example:

>>> environ = {"KERAS_TRANSFORMER_XLA_CACHE": "/tmp/kt-xla"}
>>> enable(environ=environ)
PosixPath('/tmp/kt-xla')
>>> environ["TF_XLA_FLAGS"].startswith("--tf_xla_persistent_cache_directory=/tmp/kt-xla/sessions/")
True
"""

import atexit
import contextlib
import fcntl
import hashlib
import importlib.metadata
import json
import math
import os
import pathlib
import platform
import secrets
import shutil
import stat
import time
import warnings

from keras_transformer.errors import KerasTransformerWarning
from keras_transformer.files.user_cache import cache_root

CACHE_ENV = "KERAS_TRANSFORMER_XLA_CACHE"
SIZE_ENV = "KERAS_TRANSFORMER_XLA_CACHE_MB"
DEFAULT_MB = 256
DIRECTORY_FLAG = "--tf_xla_persistent_cache_directory"
DEVICE_TYPES_FLAG = "--tf_xla_persistent_cache_device_types"
INDEX, PROGRAMS, SESSIONS = "index.json", "programs", "sessions"


def enable(folder=None, environ=None):
    """Turns the cache on in `environ` (default `os.environ`): the folder used, or None where it is off.

    `folder` defaults to `$KERAS_TRANSFORMER_XLA_CACHE`, else
    `default_folder()`. Off: `KERAS_TRANSFORMER_XLA_CACHE=off`, or a folder
    that other users may write to (with a `KerasTransformerWarning`). The
    programs of the folder are checked now (`Store.open_session`), and the
    session is closed when the process exits. A bad
    `$KERAS_TRANSFORMER_XLA_CACHE_MB` is a `ValueError` naming it.
    """
    environ = os.environ if environ is None else environ
    flags = environ.get("TF_XLA_FLAGS", "").split()
    given = session_folder(environ)
    if given is not None:
        if not _is_session(given):
            return given  # the user's own folder, left to TensorFlow
        if given.name.split("-")[0] == str(os.getpid()):
            return given.parent.parent  # enabled already in this process
        # A session of the process that started this one (inherited flags): this process opens its own.
        flags = [f for f in flags if not f.startswith((DIRECTORY_FLAG + "=", DEVICE_TYPES_FLAG + "="))]
        folder = folder or given.parent.parent
    chosen = folder or environ.get(CACHE_ENV) or default_folder()
    if str(chosen).lower() == "off":
        return None
    limit = size_limit(environ)
    folder = _private_folder(pathlib.Path(chosen).expanduser())
    if folder is None:
        return None
    session = Store(folder, limit).open_session()
    atexit.register(session.close)
    flags += [f"{DIRECTORY_FLAG}={session.path}", f"{DEVICE_TYPES_FLAG}=CPU"]
    environ["TF_XLA_FLAGS"] = " ".join(flags)
    return folder


def session_folder(environ=None):
    """The folder TensorFlow loads and writes this process's programs in (`TF_XLA_FLAGS`'), or None.

    Example:

    >>> session_folder({"TF_XLA_FLAGS": "--tf_xla_persistent_cache_directory=/tmp/x"})
    PosixPath('/tmp/x')
    """
    environ = os.environ if environ is None else environ
    for flag in environ.get("TF_XLA_FLAGS", "").split():
        if flag.startswith(DIRECTORY_FLAG + "="):
            return pathlib.Path(flag.split("=", 1)[1])
    return None


def size_limit(environ=None):
    """The cache's limit in bytes: `$KERAS_TRANSFORMER_XLA_CACHE_MB` megabytes, 256 by default.

    Example:

    >>> size_limit({"KERAS_TRANSFORMER_XLA_CACHE_MB": "64"})
    67108864
    """
    environ = os.environ if environ is None else environ
    text = environ.get(SIZE_ENV, "").strip()
    if not text:
        return DEFAULT_MB * 2**20
    try:
        megabytes = float(text)
    except ValueError:
        megabytes = math.nan
    if not math.isfinite(megabytes) or megabytes <= 0:
        raise ValueError(
            f"${SIZE_ENV} must be a positive number of megabytes (the XLA compilation cache's size; "
            f"{CACHE_ENV}=off turns it off). Received: {SIZE_ENV}={text!r}"
        )
    return int(megabytes * 2**20)


class Store:
    """A cache folder: `programs/` (each program checked by `index.json`) and the `sessions/` TensorFlow uses.

    Args:
        folder: the cache folder (private to its user).
        limit: the most bytes of programs kept (`size_limit`).
    """

    def __init__(self, folder, limit):
        self.folder, self.limit = pathlib.Path(folder), int(limit)
        self.programs, self.sessions = self.folder / PROGRAMS, self.folder / SESSIONS

    def open_session(self):
        """A `Session`: a new folder of links to the programs that pass their check, for TensorFlow to use.

        Programs that fail it, sessions of processes that ended without
        closing theirs (killed), and programs the index does not list (a lost
        index) are deleted; a warning line says how many programs were.
        """
        with self._locked():
            self.programs.mkdir(exist_ok=True)
            self.sessions.mkdir(exist_ok=True)
            self._remove_dead_sessions()
            index, lost = self._read_index()
            damaged = [name for name, entry in index.items() if not _intact(self.programs / name, entry)]
            for name in damaged:
                del index[name]
            unlisted = [p.name for p in self.programs.iterdir() if p.name not in index]
            for name in [*damaged, *unlisted]:
                _remove(self.programs / name)
            session = Session(self, index)
            self._write_index(index)
        if damaged or lost:
            what = f"its index {INDEX} was unreadable" if lost else f"{len(damaged)} program(s) were damaged"
            warnings.warn(
                f"XLA's compilation cache in {self.folder}: {what}; removed, they are compiled again "
                f"({CACHE_ENV}=off turns the cache off)",
                KerasTransformerWarning,
                stacklevel=3,
            )
        return session

    def adopt(self, session):
        """Moves the programs TensorFlow wrote in `session` into `programs/`, records uses, then evicts."""
        with self._locked():
            index, _ = self._read_index()
            now = time.time()
            for path in sorted(session.path.iterdir()):
                name = path.name
                if name == Session.MARKER or not path.is_file() or path.is_symlink():
                    continue
                if name in session.linked:
                    entry = index.get(name)
                    if entry is not None and os.stat(path).st_mtime_ns >= session.opened_ns:
                        data = path.read_bytes()  # TensorFlow wrote it again (through the link): its new digest
                        entry.update(sha256=hashlib.sha256(data).hexdigest(), size=len(data), used=now)
                    elif entry is not None and _used_since(path, session.opened_ns):
                        entry["used"] = now
                    continue
                if name in index or not name.endswith(".pb"):
                    continue  # another process kept it first; or not TensorFlow's
                data = path.read_bytes()
                os.replace(path, self.programs / name)
                index[name] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data), "used": now}
            self._evict(index)
            self._write_index(index)

    def _evict(self, index):
        """Deletes the least recently used programs until the rest fit in `limit`."""
        total = sum(entry["size"] for entry in index.values())
        for name in sorted(index, key=lambda n: (index[n]["used"], n)):
            if total <= self.limit:
                break
            total -= index.pop(name)["size"]
            _remove(self.programs / name)

    def _remove_dead_sessions(self):
        """Deletes the session folders no live process holds (their process ended without closing them)."""
        for path in self.sessions.iterdir():
            if not path.is_dir() or path.is_symlink():
                continue
            with contextlib.suppress(BlockingIOError, FileNotFoundError):
                descriptor = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
                try:
                    fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    _remove_session(path)
                finally:
                    os.close(descriptor)

    def _read_index(self):
        """`({name: {"sha256", "size", "used"}}, lost)`: `lost` where the index exists but cannot be read."""
        path = self.folder / INDEX
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}, False
        except (OSError, ValueError, RecursionError):
            return {}, True
        entries = data.get("programs") if isinstance(data, dict) else None
        if not isinstance(entries, dict) or not all(_is_entry(name, entry) for name, entry in entries.items()):
            return {}, True
        return entries, False

    def _write_index(self, index):
        from keras_transformer.files import atomic

        atomic.write_json(self.folder / INDEX, {"format": "keras-transformer xla cache", "programs": index})

    @contextlib.contextmanager
    def _locked(self):
        descriptor = os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
            yield
        finally:
            os.close(descriptor)


class Session:
    """One process's folder of checked programs (links), where TensorFlow also writes what it compiles."""

    MARKER = ".opened"  # made after the links: its time tells a program read since from one that was not

    def __init__(self, store, index):
        self.store, self.linked = store, set()
        self.path = store.sessions / f"{os.getpid()}-{secrets.token_hex(4)}"
        self.path.mkdir(mode=0o700)
        self._descriptor = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY)
        fcntl.flock(self._descriptor, fcntl.LOCK_EX)  # held while the process lives: not a dead session
        for name in index:
            _link(store.programs / name, self.path / name)
            self.linked.add(name)
        marker = self.path / self.MARKER
        marker.touch()
        self.opened_ns = marker.stat().st_mtime_ns  # the file system's clock, as access times are
        self._closed = False

    def close(self):
        """Keeps what TensorFlow compiled in this session (`Store.adopt`) and deletes the session folder."""
        if self._closed:
            return
        self._closed = True
        try:
            self.store.adopt(self)
        except OSError:
            pass  # a cache that cannot be written loses this session's programs, nothing else
        finally:
            _remove_session(self.path)
            os.close(self._descriptor)


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


def _is_session(path):
    """Whether `path` is a session folder of a cache of this package (`<cache>/sessions/<pid>-<hex>`)."""
    return path.parent.name == SESSIONS and (path.parent.parent / PROGRAMS).is_dir()


def _intact(path, entry):
    """Whether the program at `path` is the one `entry` recorded: a regular file of its size and sha256."""
    try:
        status = os.lstat(path)
        if not stat.S_ISREG(status.st_mode) or status.st_size != entry["size"]:
            return False
        return hashlib.sha256(path.read_bytes()).hexdigest() == entry["sha256"]
    except OSError:
        return False


def _is_entry(name, entry):
    sizes_ok = isinstance(entry, dict) and isinstance(entry.get("size"), int) and isinstance(entry.get("sha256"), str)
    named_ok = isinstance(name, str) and name.endswith(".pb") and "/" not in name and not name.startswith(".")
    return sizes_ok and named_ok and isinstance(entry.get("used"), (int, float))


def _used_since(path, opened_ns):
    """Whether the linked program at `path` was read after the session opened (its access time)."""
    try:
        return os.stat(path).st_atime_ns >= opened_ns
    except OSError:
        return False


def _link(source, destination):
    try:
        os.link(source, destination)
    except OSError:  # a file system without hard links
        shutil.copyfile(source, destination)


def _remove(path):
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def _remove_session(path):
    """Deletes a session folder: the links and the programs TensorFlow wrote there, then the folder."""
    with contextlib.suppress(FileNotFoundError):
        for entry in path.iterdir():
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                _remove(entry)
        path.rmdir()


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
