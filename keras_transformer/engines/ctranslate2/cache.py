"""The CTranslate2 engine's cache of conversions: a run converted once, and again when it changes.

`cached_model(run)` is the folder of `run`'s conversion (`convert_run`) in
the user's cache folder (`cache_root()`): reused while the run's model and
tokenizers are unchanged (their sha256, recorded in the conversion's
`keras_transformer.json`), converted again when they change.

The cache lives outside the run: a run directory holds only the files its
`config.json` records (`files.destinations`), so a folder added there would
make `train --overwrite` refuse the run. A cache folder is replaced only
when it is a CTranslate2 export of this package that holds nothing but its
manifest's files, atomically (a crash leaves the previous one); anything
else there is refused with `UnsafeDestinationError` and left as it is.
"""

import hashlib
import json
import pathlib
import threading

from keras_transformer import runs
from keras_transformer.ctranslate2 import conversion as writer
from keras_transformer.files import destinations, ownership
from keras_transformer.files.user_cache import cache_root

INSTALL = 'pip install "keras-transformer[ctranslate2]"'
_lock = threading.Lock()  # one conversion at a time in this process


def require_ctranslate2():
    """The `ctranslate2` module, or a one-line `ValueError` saying what to install."""
    try:
        import ctranslate2
    except ModuleNotFoundError:
        raise ValueError(f"The ctranslate2 engine needs the ctranslate2 package: {INSTALL}") from None
    return ctranslate2


def check_run(path):
    """`path` as a `pathlib.Path` if it is a run directory; a one-line `ValueError` for anything else."""
    path = pathlib.Path(path)
    if not runs.is_run_dir(path):
        raise ValueError(
            f"{path} is not a run directory: the ctranslate2 engine converts run directories (`keras-transformer "
            "train` or `import`); open exports with `keras_transformer.open_translator`"
        )
    return path


def fingerprint(run):
    """The sha256 of what a conversion reads: `model.keras`, every tokenizer file, and `add_source_end`."""
    run = pathlib.Path(run)
    files = [run / runs.MODEL, *sorted(p for p in (run / "tokenizers").rglob("*") if p.is_file())]
    lines = [f"add_source_end={runs.RunConfig.read(run).add_source_end}"]
    lines += [f"{ownership.sha256(file)}  {file.relative_to(run).as_posix()}" for file in files]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def cached_model(run, cache_dir=None):
    """The folder of `run`'s CTranslate2 conversion, converted now if missing or out of date.

    The folder is `cache_dir` (default `cache_root()`)`/ctranslate2/NAME-HASH`,
    HASH of the run's absolute path. A conversion is reused while its
    recorded `run_sha256` is the run's `fingerprint` and every file its
    manifest lists is there; otherwise it is replaced (only a CTranslate2
    export of this package, file by file).

    Example:

    >>> cached_model("saved_models/multi30k-en-de")
    PosixPath('/home/me/.cache/keras_transformer/ctranslate2/multi30k-en-de-3f2a9c1b7d4e')
    """
    require_ctranslate2()
    run = check_run(run).resolve()
    where = hashlib.sha256(str(run).encode()).hexdigest()[:12]
    folder = pathlib.Path(cache_dir or cache_root()) / "ctranslate2" / f"{run.name}-{where}"
    with _lock:
        destinations.recover(folder)
        expected = fingerprint(run)
        if recorded(folder).get("run_sha256") != expected or not destinations.is_whole(
            folder, destinations.CTRANSLATE2
        ):
            folder.parent.mkdir(parents=True, exist_ok=True)
            writer.convert_run(run, folder, overwrite=True, record={"run_sha256": expected})
    return folder


def recorded(folder):
    """What a conversion in `folder` recorded of itself (`keras_transformer.json`); {} if unreadable."""
    try:
        return json.loads((folder / writer.PROVENANCE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
