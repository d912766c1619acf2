"""`MANIFEST.sha256`: the sha256 of every file of an export, written at export, checked at load.

The file has the format of `sha256sum`, so `sha256sum -c MANIFEST.sha256`
inside the export checks it too. It finds a file that was damaged or changed
after export; it is not a signature: whoever can change the export can change
the manifest as well. Load only exports you trust: a SavedModel is a program.

Example:

>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> _ = (folder / "saved_model.pb").write_bytes(b"graph")
>>> write_manifest(folder)
>>> verify_manifest(folder)
True
>>> _ = (folder / "saved_model.pb").write_bytes(b"other graph")
>>> verify_manifest(folder)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
keras_transformer.manifest.ManifestMismatchError: .../saved_model.pb does not match ...
"""

import hashlib
import pathlib
import tempfile  # noqa: F401  (the example above)

from keras_transformer.destinations import MANIFEST


class ManifestMismatchError(ValueError):
    """A file of an export is missing or differs from its manifest."""


def write_manifest(folder):
    """Writes `folder/MANIFEST.sha256` listing every other file under `folder`."""
    folder = pathlib.Path(folder)
    lines = [f"{_sha256(path)}  {path.relative_to(folder).as_posix()}\n" for path in _files(folder)]
    (folder / MANIFEST).write_text("".join(lines), encoding="utf-8")


def verify_manifest(folder):
    """Checks `folder` against its manifest.

    Returns:
        True when every listed file matches, False when there is no manifest
        (an export of an earlier version).

    Raises:
        ManifestMismatchError: naming the first file that is missing or
            differs, or an unreadable manifest.
    """
    folder = pathlib.Path(folder)
    manifest = folder / MANIFEST
    if not manifest.is_file():
        return False
    for number, line in enumerate(manifest.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        digest, _, name = line.partition("  ")
        if len(digest) != 64 or not name or pathlib.PurePosixPath(name).is_absolute() or ".." in name.split("/"):
            raise ManifestMismatchError(f"{manifest}: line {number} is not `<sha256>  <relative path>`")
        path = folder / name
        if not path.is_file():
            raise ManifestMismatchError(f"{path} is listed in {manifest} but missing")
        if _sha256(path) != digest:
            raise ManifestMismatchError(
                f"{path} does not match the sha256 in {manifest}: it changed after export (damaged or edited)"
            )
    return True


def _files(folder):
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST)


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
