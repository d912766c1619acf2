"""`MANIFEST.sha256`: the sha256 of every file of an export, written at export, checked at load.

The file has the format of `sha256sum`, so `sha256sum -c MANIFEST.sha256`
inside the export checks it too. It finds a file that was damaged, changed,
removed or added after export, and it is the export's record of the files
this package wrote (`destinations`); it is not a signature: whoever can
change the export can change the manifest as well. Load only exports you
trust: a SavedModel is a program.

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
keras_transformer.files.manifest.ManifestMismatchError: .../saved_model.pb does not match ...
"""

import os
import pathlib
import tempfile  # noqa: F401  (the example above)
import warnings

from keras_transformer.errors import KerasTransformerWarning
from keras_transformer.files.destinations import MANIFEST, read_manifest
from keras_transformer.files.ownership import sha256


class ManifestMismatchError(ValueError):
    """A file of an export is missing, added or differs from its manifest, or the manifest is unreadable."""


class UnverifiedExportWarning(KerasTransformerWarning):
    """An export has no `MANIFEST.sha256`, so its files could not be checked."""


def write_manifest(folder):
    """Writes `folder/MANIFEST.sha256` listing every other file under `folder`."""
    folder = pathlib.Path(folder)
    lines = [f"{sha256(folder / name)}  {name}\n" for name in _files(folder)]
    (folder / MANIFEST).write_text("".join(lines), encoding="utf-8")


def verify_manifest(folder):
    """Checks `folder` against its manifest.

    Returns:
        True when the manifest lists exactly the files under `folder` and
        each matches its sha256; False when there is no manifest (an export
        that cannot be verified: warn about it).

    Raises:
        ManifestMismatchError: an empty or unreadable manifest, or naming the
            first file that is missing, differs, was added, or is a symbolic
            link.
    """
    folder = pathlib.Path(folder)
    manifest = folder / MANIFEST
    if not manifest.exists() and not manifest.is_symlink():
        return False
    listed = read_manifest(folder)
    if listed is None:
        raise ManifestMismatchError(
            f"{manifest} is empty or not `<sha256>  <relative path>` lines: the export cannot be verified"
        )
    present = _files(folder)
    missing = sorted(listed.keys() - set(present))
    if missing:
        raise ManifestMismatchError(f"{folder / missing[0]} is listed in {manifest} but missing")
    for name in present:
        path = folder / name
        if path.is_symlink():
            raise ManifestMismatchError(f"{path} is a symbolic link: an export holds only plain files")
        if name not in listed:
            raise ManifestMismatchError(f"{path} is not listed in {manifest}: it was added after export")
        if sha256(path) != listed[name]:
            raise ManifestMismatchError(
                f"{path} does not match the sha256 in {manifest}: it changed after export (damaged or edited)"
            )
    return True


def verify_or_warn(folder):
    """`verify_manifest(folder)`, with an `UnverifiedExportWarning` when there is no manifest to verify."""
    if not verify_manifest(folder):
        warnings.warn(
            UnverifiedExportWarning(
                f"{folder} has no {MANIFEST}: its files were not verified (export it again to add one)"
            ),
            stacklevel=3,
        )


def _files(folder):
    """The relative POSIX paths of every file and link under `folder` but the manifest, sorted."""
    found = []
    for parent, folders, names in os.walk(folder):
        relative = pathlib.Path(parent).relative_to(folder)
        found += [(relative / name).as_posix() for name in names]
        found += [(relative / name).as_posix() for name in folders if os.path.islink(os.path.join(parent, name))]
    return sorted(name for name in found if name != MANIFEST)
