"""A folder cache that the README's two pytest processes share: a tiny trained run is built once, not once each.

`cached(name, build, depends_on)` returns `(folder, value)`. On a miss it calls
`build(folder)`, which writes files into an empty folder and returns a
JSON-serialisable value, and keeps both under
`$KERAS_TRANSFORMER_TEST_CACHE` (default: `keras-transformer-tests-<uid>-<checkout>`
in the temporary folder, one per checkout, so that test runs of two
checkouts side by side never remove each other's entries). The key is a sha256 of everything the build depends
on: every file of the `keras_transformer` package, the files in `depends_on`
(the test module that defines the build, the corpus it reads), and the
versions of Python, TensorFlow, Keras, NumPy and SentencePiece. A hit is
used only if every file still has the sha256 recorded when it was built (a
test that wrote into the folder invalidates it), else it is built again.
Builds are written to a scratch folder and renamed into place, so a crash
never leaves a half-written entry; a lock file per name makes processes that
need the same entry at once (pytest-xdist's workers) build it once, the
others waiting for it. Older entries of the same name are removed.
"""

import fcntl
import hashlib
import importlib.metadata
import json
import os
import pathlib
import platform
import shutil
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = REPO / "keras_transformer"
INFO = "cache-entry.json"
VERSIONED = ("tensorflow", "tensorflow-text", "keras", "numpy", "sentencepiece")


def cache_root():
    checkout = hashlib.sha256(str(REPO).encode()).hexdigest()[:12]
    default = pathlib.Path(tempfile.gettempdir()) / f"keras-transformer-tests-{os.getuid()}-{checkout}"
    return pathlib.Path(os.environ.get("KERAS_TRANSFORMER_TEST_CACHE") or default)


def _version(distribution):
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _files(folder):
    return sorted(p for p in pathlib.Path(folder).rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def key(name, depends_on):
    digest = hashlib.sha256(json.dumps([name, platform.python_version()] + [_version(d) for d in VERSIONED]).encode())
    for path in _files(PACKAGE) + [pathlib.Path(p) for p in depends_on]:
        digest.update(str(path.relative_to(REPO) if path.is_relative_to(REPO) else path).encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:24]


def _digest(folder):
    """{relative path: sha256} of every file under `folder` but the entry's own record."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in _files(folder)
        if p.name != INFO or p.parent != folder
    }


def _read(folder):
    """The value stored in `folder`, or None where the entry is missing, incomplete or changed."""
    try:
        info = json.loads((folder / INFO).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return info if info.get("files") == _digest(folder) else None


def cached(name, build, depends_on):
    root = cache_root()
    folder = root / f"{name}-{key(name, depends_on)}"
    info = _read(folder)
    if info is not None:
        return folder, info["value"]
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one builder at a time; the others wait, then read its entry
        info = _read(folder)
        if info is not None:
            return folder, info["value"]
        return folder, _build(name, build, root, folder)


def _build(name, build, root, folder):
    shutil.rmtree(folder, ignore_errors=True)  # an entry that is incomplete or was changed
    scratch = pathlib.Path(tempfile.mkdtemp(prefix=f".{name}-", dir=root))
    try:
        value = build(scratch)
        (scratch / INFO).write_text(json.dumps({"value": value, "files": _digest(scratch)}), encoding="utf-8")
        os.rename(scratch, folder)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    for old in root.glob(f"{name}-*"):
        if old != folder:
            shutil.rmtree(old, ignore_errors=True)
    return value
