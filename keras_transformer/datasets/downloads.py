"""Downloads of the corpora that are not bundled, verified and cached by tensorflow-datasets.

`fetch("multi30k_task1")` gets the nine `.gz` files of Multi30k Task 1 from
https://github.com/multi30k/dataset (`data/task1/raw/{train,val,test_2016_flickr}.{en,de,fr}.gz`),
and `fetch("spa_eng_anki")` the zip of the TensorFlow and keras.io tutorials
(http://storage.googleapis.com/download.tensorflow.org/data/spa-eng.zip).
tensorflow-datasets' download manager fetches them into its usual data dir
(the `data_dir` argument, else `$TFDS_DATA_DIR`, else `~/tensorflow_datasets`),
under `downloads/keras_transformer/`, and checks each `.gz` against the size
and sha256 in `checksums.tsv` (shipped with the package) before it keeps it.
The plain text files are then written to
`<data dir>/downloads/extracted/keras_transformer/<corpus folder>/`, which
later calls read without any network.

Whether the hosted zip is byte-identical to the copy its checksum could be
taken from is not known, so the zip is not in `checksums.tsv` (TFDS checks
whole downloads only; it cannot check a member of an archive). Instead the
extracted `spa.txt` is checked with `hashlib` against `SPA_TXT_SHA256`; on a
mismatch the downloaded zip is deleted again and nothing is written.

Mirrors. `KERAS_TRANSFORMER_MIRROR`, a base URL, replaces the canonical hosts:
every file is fetched from `$KERAS_TRANSFORMER_MIRROR/<file name>`, e.g.
`http://mirror.example/corpora/train.en.gz` and
`http://mirror.example/corpora/spa-eng.zip` for
`KERAS_TRANSFORMER_MIRROR=http://mirror.example/corpora`; a folder holding
the ten files served by any web server is a mirror. The checksums are the same.

Stalls, Ctrl-C and progress. A download that receives nothing (no
connection, no headers, no next byte of the body) for 60 seconds fails;
`KERAS_TRANSFORMER_DOWNLOAD_TIMEOUT` sets those seconds (a positive number,
e.g. `KERAS_TRANSFORMER_DOWNLOAD_TIMEOUT=300` on a slow link). A server that
keeps sending, however slowly, is waited for, up to one byte past the size
in `checksums.tsv` (more cannot match the checksum). The download runs in the
calling thread, so Ctrl-C (KeyboardInterrupt) stops it at once. Whatever ends
a download early, its temporary files are deleted. A download that lasts more
than a few seconds shows a progress line on stderr (`download_progress`;
`display_progress(False)` turns it off). The HTTP part is `http_transport`.

With no network and no copy, a stalled server, or a file whose checksum is
wrong, `fetch` raises a one-line `ValueError` naming the file, its URL and the
folder to put it in; a file with a wrong checksum is never kept.

Example:

>>> folder = fetch("multi30k_task1", data_dir="~/tensorflow_datasets")
>>> sorted(path.name for path in folder.iterdir())[:3]
['test_2016_flickr.de', 'test_2016_flickr.en', 'test_2016_flickr.fr']
"""

import dataclasses
import gzip
import hashlib
import os
import pathlib
import shutil
import zipfile

from keras_transformer.datasets.download_progress import display_progress  # noqa: F401  (part of this API)
from keras_transformer.datasets.http_transport import TIMEOUT_ENV, TimedTransport, download_timeout  # noqa: F401

MIRROR_ENV = "KERAS_TRANSFORMER_MIRROR"
TFDS_DATA_DIR_ENV = "TFDS_DATA_DIR"
CHECKSUMS = pathlib.Path(__file__).resolve().with_name("checksums.tsv")
CACHE_NAME = "keras_transformer"
MULTI30K_URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/{}.gz"
SPA_ENG_URL = "http://storage.googleapis.com/download.tensorflow.org/data/spa-eng.zip"
SPA_TXT_SHA256 = "6ec60e212f812ee3430f7568ea6f33b6fb080e32193c5952e8da0ee8ba45574c"


@dataclasses.dataclass(frozen=True)
class Download:
    """One plain file of a corpus and where it comes from.

    `url` is the canonical address; the file is the gunzipped download, or
    `member` of the downloaded zip, whose sha256 must then be `sha256`.
    """

    file: str
    url: str
    member: str = None
    sha256: str = None


DOWNLOADS = {
    "multi30k_task1": tuple(
        Download(f"{stem}.{language}", MULTI30K_URL.format(f"{stem}.{language}"))
        for stem in ("train", "val", "test_2016_flickr")
        for language in ("en", "de", "fr")
    ),
    "spa_eng_anki": (Download("spa.txt", SPA_ENG_URL, member="spa-eng/spa.txt", sha256=SPA_TXT_SHA256),),
}


def tfds_data_dir(data_dir=None):
    """The tensorflow-datasets data dir: `data_dir`, else `$TFDS_DATA_DIR`, else `~/tensorflow_datasets`."""
    root = data_dir or os.environ.get(TFDS_DATA_DIR_ENV) or "~/tensorflow_datasets"
    return pathlib.Path(root).expanduser()


def cache_folder(folder, data_dir=None):
    """Where `fetch(folder, data_dir)` writes the plain files."""
    return tfds_data_dir(data_dir) / "downloads" / "extracted" / CACHE_NAME / folder


def source_url(url):
    """`url`, or its file name under `$KERAS_TRANSFORMER_MIRROR` when that is set.

    Example:

    >>> source_url(SPA_ENG_URL)  # with KERAS_TRANSFORMER_MIRROR=http://127.0.0.1:8000/corpora/
    'http://127.0.0.1:8000/corpora/spa-eng.zip'
    """
    mirror = os.environ.get(MIRROR_ENV, "").strip()
    if not mirror:
        return url
    return f"{mirror.rstrip('/')}/{url.rsplit('/', 1)[1]}"


def fetch(folder, data_dir=None):
    """The folder of `folder`'s plain files, downloading and checking those not cached yet.

    Args:
        folder: a key of `DOWNLOADS` (`corpora.Corpus.folder`).
        data_dir: the tensorflow-datasets data dir (see `tfds_data_dir`).

    Returns:
        A `pathlib.Path` holding every file of `DOWNLOADS[folder]`.

    Raises:
        ValueError: one line naming the file, its URL and where to put it,
            when it cannot be downloaded (no network, or nothing received
            for `download_timeout()` seconds) or its checksum is wrong; one
            naming `$KERAS_TRANSFORMER_DOWNLOAD_TIMEOUT` when that is not a
            positive number.
        KeyboardInterrupt: at once, on Ctrl-C, with no temporary file left.
    """
    target = cache_folder(folder, data_dir)
    missing = [download for download in DOWNLOADS[folder] if not (target / download.file).is_file()]
    if missing:
        manager = _download_manager(data_dir, download_timeout())
        for download in missing:
            _fetch_one(manager, download, target)
    return target


def _url_infos():
    """The registered size and sha256 of each download, under the URL it is fetched from (mirror or not)."""
    from tensorflow_datasets.core.download import checksums

    return {source_url(url): info for url, info in checksums.load_url_infos(CHECKSUMS).items()}


def _download_manager(data_dir, timeout):
    """TFDS's download manager (its cache layout, `.INFO` files and checksum checks) over `TimedTransport`."""
    import tensorflow_datasets as tfds

    url_infos = _url_infos()
    manager = tfds.download.DownloadManager(
        download_dir=tfds_data_dir(data_dir) / "downloads",
        dataset_name=CACHE_NAME,
        url_infos=url_infos,
    )
    transport = TimedTransport(timeout, url_infos)
    manager._DownloadManager__downloader = transport  # the slot that its `_downloader` property fills lazily
    if manager._downloader is not transport:
        raise RuntimeError(
            f"tensorflow-datasets {tfds.__version__}'s DownloadManager has no `_downloader` slot to give "
            "a timeout to; keras-transformer needs tensorflow-datasets 4.9."
        )
    return manager


def _fetch_one(manager, download, target):
    from tensorflow_datasets.core.download.download_manager import NonMatchingChecksumError

    url = source_url(download.url)
    try:
        path = pathlib.Path(manager.download(url))
    except NonMatchingChecksumError:
        _remove_partial_downloads(manager.download_dir)
        raise ValueError(
            _missing_line(
                download, url, target, "its sha256 is not the one in checksums.tsv (the download was deleted)"
            )
        ) from None
    except Exception as error:  # noqa: BLE001  (requests, urllib3, OSError: all mean "no download")
        _remove_partial_downloads(manager.download_dir)
        reason = (str(error).strip().splitlines() or [type(error).__name__])[0][:160]
        raise ValueError(_missing_line(download, url, target, f"cannot be downloaded ({reason})")) from None
    data = _plain_bytes(path, download)
    if download.sha256 and hashlib.sha256(data).hexdigest() != download.sha256:
        for stale in (path, path.with_name(path.name + ".INFO")):
            stale.unlink(missing_ok=True)
        raise ValueError(
            _missing_line(
                download,
                url,
                target,
                f"its extracted {download.member} has a sha256 other than {download.sha256} (the download was deleted)",
            )
        )
    _write_atomic(target / download.file, data)


def _plain_bytes(path, download):
    """The gunzipped download, or its zip member; a corrupt archive is a ValueError naming it."""
    try:
        if download.member:
            with zipfile.ZipFile(path) as archive:
                return archive.read(download.member)
        return gzip.decompress(path.read_bytes())
    except (OSError, EOFError, KeyError, zipfile.BadZipFile) as error:
        path.unlink(missing_ok=True)
        raise ValueError(
            f"{path}: cannot extract {download.file} ({error}); the download was deleted, run again to fetch it anew."
        ) from None


def _missing_line(download, url, target, reason):
    what = f"the {download.member} of that zip" if download.member else "it gunzipped"
    return (
        f"{download.file} is missing and {reason}: download {url} and put {what} in {target}/ "
        f"(or pass a folder of the plain files as `data_dir`, or set ${MIRROR_ENV} to a mirror's base URL)."
    )


def _remove_partial_downloads(download_dir):
    """Deletes what the download manager left in its temporary folders (e.g. a file that failed its check)."""
    for partial in pathlib.Path(download_dir).glob(f"{CACHE_NAME}/*.tmp.*"):
        shutil.rmtree(partial, ignore_errors=True)


def _write_atomic(path, data):
    """Writes `data` to `path` through a temporary file, which is deleted if that fails (or on Ctrl-C)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    try:
        partial.write_bytes(data)
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
