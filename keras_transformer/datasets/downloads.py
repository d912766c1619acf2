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
than `PROGRESS_AFTER` seconds shows a progress line on stderr (see
`display_progress`, which also turns it off).

With no network and no copy, a stalled server, or a file whose checksum is
wrong, `fetch` raises a one-line `ValueError` naming the file, its URL and the
folder to put it in; a file with a wrong checksum is never kept.

Example:

>>> folder = fetch("multi30k_task1", data_dir="~/tensorflow_datasets")
>>> sorted(path.name for path in folder.iterdir())[:3]
['test_2016_flickr.de', 'test_2016_flickr.en', 'test_2016_flickr.fr']
"""

import contextlib
import dataclasses
import gzip
import hashlib
import math
import os
import pathlib
import shutil
import sys
import threading
import time
import urllib.parse
import zipfile

MIRROR_ENV = "KERAS_TRANSFORMER_MIRROR"
TFDS_DATA_DIR_ENV = "TFDS_DATA_DIR"
CHECKSUMS = pathlib.Path(__file__).resolve().with_name("checksums.tsv")
CACHE_NAME = "keras_transformer"
MULTI30K_URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/{}.gz"
SPA_ENG_URL = "http://storage.googleapis.com/download.tensorflow.org/data/spa-eng.zip"
DOWNLOAD_RETRIES = 3  # for a refused connection or a 5xx status, after 0.2, 0.4, 0.8 s
RETRY_STATUSES = (500, 502, 503, 504)
TIMEOUT_ENV = "KERAS_TRANSFORMER_DOWNLOAD_TIMEOUT"
DEFAULT_TIMEOUT = 60.0  # seconds a download may receive nothing
PROGRESS_AFTER = 3.0  # seconds a download runs before its progress line appears
PROGRESS_EVERY = 5.0  # seconds between two progress lines when stderr is not a terminal
REDRAW_EVERY = 0.25  # seconds between two redraws of the line on a terminal
SILENCE_SHOWN = 1.0  # seconds without a byte after which the line says so
CHUNK_BYTES = 64 * 1024
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


def download_timeout():
    """Seconds a download may receive nothing before it fails: `$KERAS_TRANSFORMER_DOWNLOAD_TIMEOUT`, else 60.

    Raises:
        ValueError: naming the variable, when it holds anything but a
            positive finite number.

    Example:

    >>> download_timeout()  # with KERAS_TRANSFORMER_DOWNLOAD_TIMEOUT unset
    60.0
    """
    text = os.environ.get(TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_TIMEOUT
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise ValueError(
            f"${TIMEOUT_ENV} must be a positive number of seconds (how long a download may receive "
            f"nothing before it fails). Received: {TIMEOUT_ENV}={text!r}"
        )
    return seconds


_show_progress = True


def display_progress(enabled=True):
    """Turns the progress line of slow downloads on stderr on (the default) or off.

    The line appears once a download has run for `PROGRESS_AFTER` seconds.
    On a terminal it is redrawn in place, also while nothing arrives, and
    erased if the download fails. Elsewhere (a log file, a pipe) a line is
    written every `PROGRESS_EVERY` seconds while bytes are arriving (the last
    one less than `SILENCE_SHOWN` seconds ago), so a stalled download writes
    nothing but its error.
    """
    global _show_progress
    _show_progress = bool(enabled)


def _url_infos():
    """The registered size and sha256 of each download, under the URL it is fetched from (mirror or not)."""
    from tensorflow_datasets.core.download import checksums

    return {source_url(url): info for url, info in checksums.load_url_infos(CHECKSUMS).items()}


def _download_manager(data_dir, timeout):
    """TFDS's download manager (its cache layout, `.INFO` files and checksum checks) over `_Transport`."""
    import tensorflow_datasets as tfds

    url_infos = _url_infos()
    manager = tfds.download.DownloadManager(
        download_dir=tfds_data_dir(data_dir) / "downloads",
        dataset_name=CACHE_NAME,
        url_infos=url_infos,
    )
    transport = _Transport(timeout, url_infos)
    manager._DownloadManager__downloader = transport  # the slot that its `_downloader` property fills lazily
    if manager._downloader is not transport:
        raise RuntimeError(
            f"tensorflow-datasets {tfds.__version__}'s DownloadManager has no `_downloader` slot to give "
            "a timeout to; keras-transformer needs tensorflow-datasets 4.9."
        )
    return manager


class _Transport:
    """What TFDS's `DownloadManager` asks of its downloader, done in the calling thread with a timeout.

    TFDS's own downloader calls `requests` with no timeout on a pool
    thread: a server that accepts and never answers holds it forever, and
    Ctrl-C cannot stop that thread (the interpreter waits for it at exit).
    This one reads in the caller's thread, so a KeyboardInterrupt stops it at
    once, and fails when nothing arrives for `timeout` seconds. However it
    ends early, it deletes the file it wrote and the manager's temporary
    folder. The manager keeps the rest: cache layout, `.INFO` files, checksums.

    Args:
        timeout: seconds a download may receive nothing (while connecting,
            before the headers, between two reads of the body).
        url_infos: the registered `UrlInfo` of each URL; a body is cut one
            byte after its registered size (it cannot match its checksum).
    """

    def __init__(self, timeout, url_infos):
        self.timeout = timeout
        self.url_infos = url_infos

    def tqdm(self):
        """No progress bars of TFDS's: `_Progress` shows a slow download."""
        return contextlib.nullcontext()

    def increase_tqdm(self, url_info):
        """Nothing to count (the manager calls it for a file found in its cache)."""

    def download(self, url, destination_path, verify=True):
        """Downloads `url` into the empty folder `destination_path`, which is removed again if that fails.

        Returns:
            A resolved `promise.Promise` of TFDS's `DownloadResult`.

        Raises:
            TimeoutError: nothing arrived for `timeout` seconds.
            DownloadError: an HTTP status other than 200.
            requests' and urllib3's errors for a failed connection or a
            broken body; KeyboardInterrupt passes through.
        """
        import promise
        import requests
        from tensorflow_datasets.core.download import downloader

        expected = self.url_infos.get(url)
        limit = expected.size if expected else None
        path = None
        try:
            with _Progress(url, limit, self.timeout) as progress, requests.Session() as session:
                with self._get(session, url, verify) as response:
                    path = destination_path / downloader._get_filename(response)
                    url_info = _save(response, path, progress, self.timeout, limit)
        except BaseException:
            _remove_temporary(destination_path, path)
            raise
        return promise.Promise.resolve(downloader.DownloadResult(path=path, url_info=url_info))

    def _get(self, session, url, verify):
        """The streamed 200 response to GET `url`; a refused connection or a 5xx status is tried again, a stall not."""
        import requests
        from tensorflow_datasets.core.download import util

        for attempt in range(DOWNLOAD_RETRIES + 1):
            last = attempt == DOWNLOAD_RETRIES
            try:
                response = session.get(url, stream=True, timeout=self.timeout, verify=verify)
            except requests.Timeout:
                raise TimeoutError(_stalled(self.timeout)) from None
            except requests.ConnectionError:
                if last:
                    raise
            else:
                if response.status_code == 200:
                    return response
                response.close()
                if last or response.status_code not in RETRY_STATUSES:
                    raise util.DownloadError(f"HTTP status {response.status_code} from {response.url}")
            time.sleep(0.2 * 2**attempt)


def _save(response, path, progress, timeout, limit):
    """Writes the body of `response` to `path`, counting it in `progress`; returns its `UrlInfo`.

    The `UrlInfo` holds the size, the sha256 and the file name, as TFDS's own
    downloader computes them; `timeout` and `limit` are `_body`'s.
    """
    from tensorflow_datasets.core import utils
    from tensorflow_datasets.core.download import checksums

    progress.total = progress.total or _content_length(response)
    checksum, size = hashlib.sha256(), 0
    with path.open("wb") as file:
        for block in _body(response, timeout, limit):
            checksum.update(block)
            file.write(block)
            size += len(block)
            progress.advance(len(block))
    return checksums.UrlInfo(size=utils.Size(size), checksum=checksum.hexdigest(), filename=path.name)


def _body(response, timeout, limit=None):
    """The blocks of `response`'s body as they arrive, up to one byte past `limit` bytes (None: all).

    Raises:
        TimeoutError: nothing arrived for `timeout` seconds.
    """
    from urllib3.exceptions import ReadTimeoutError

    size = 0
    while limit is None or size <= limit:
        try:
            block = response.raw.read1(CHUNK_BYTES, decode_content=True)
        except ReadTimeoutError:
            raise TimeoutError(_stalled(timeout)) from None
        if not block:
            return
        size += len(block)
        yield block


def _stalled(timeout):
    """Why a download failed that received nothing for `timeout` seconds."""
    return f"nothing received for {timeout:g} s; ${TIMEOUT_ENV} sets how long to wait"


def _content_length(response):
    """The body's size from the headers, or None (none given, or it is content-encoded)."""
    length = response.headers.get("Content-Length", "")
    if response.headers.get("Content-Encoding") or not length.isdigit():
        return None
    return int(length)


def _remove_temporary(folder, path):
    """Deletes the file `path` (None: not begun) and then `folder`, if that is empty."""
    if path is not None:
        pathlib.Path(path).unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        pathlib.Path(folder).rmdir()


class _Progress:
    """The progress line on stderr of one download, shown as `display_progress` says.

    A context manager around the whole download, from the connection on: a
    daemon thread draws the line, since a stalled download calls nothing;
    `advance` counts the bytes.

    Args:
        url: what is downloaded (the line names the file and its host).
        total: its size in bytes, or None when not known (yet).
        timeout: the seconds of silence after which the download fails.
    """

    def __init__(self, url, total, timeout):
        parts = urllib.parse.urlsplit(url)
        self.name, self.host = parts.path.rsplit("/", 1)[-1], parts.netloc
        self.total, self.timeout, self.size = total, timeout, 0
        self.stream = sys.stderr
        self.terminal = _isatty(self.stream)
        self.last_byte = time.monotonic()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="download-progress", daemon=True)
        self._shown = False
        self._logged = 0

    def __enter__(self):
        if _show_progress:
            self._thread.start()
        return self

    def __exit__(self, kind, error, traceback):
        self._done.set()
        if self._thread.is_alive():
            self._thread.join()
        if self._shown and self.terminal:  # ends the line with the final count, or erases it for the error
            width = shutil.get_terminal_size().columns - 1
            self._write(f"\r{self.line(width)}\x1b[K\n" if kind is None else "\r\x1b[K")

    def advance(self, count):
        """Counts `count` more bytes received."""
        self.size += count
        self.last_byte = time.monotonic()

    def line(self, width=None):
        """What the download has done, e.g. `Downloading train.en.gz from host: 120 kB of 569 kB (21%)`.

        A line wider than `width` loses its host first, then its end.
        """
        done = _bytes(self.size)
        if self.total:
            done += f" of {_bytes(self.total)} ({min(self.size / self.total, 1):.0%})"
        silent = time.monotonic() - self.last_byte
        if silent >= SILENCE_SHOWN:
            done += f", no data for {silent:.0f} s (gives up at {self.timeout:g} s)"
        line = f"Downloading {self.name} from {self.host}: {done}"
        if width is not None and len(line) > width:
            line = f"Downloading {self.name}: {done}"[:width]
        return line

    def _run(self):
        if self._done.wait(PROGRESS_AFTER):
            return
        while True:
            self._draw()
            if self._done.wait(REDRAW_EVERY if self.terminal else PROGRESS_EVERY):
                return

    def _draw(self):
        if self.terminal:
            self._write(f"\r{self.line(shutil.get_terminal_size().columns - 1)}\x1b[K")
        elif self.size > self._logged and time.monotonic() - self.last_byte < SILENCE_SHOWN:
            self._logged = self.size
            self._write(self.line() + "\n")

    def _write(self, text):
        self._shown = True
        with contextlib.suppress(OSError, ValueError):  # a closed or broken stderr stops no download
            self.stream.write(text)
            self.stream.flush()


def _isatty(stream):
    try:
        return stream.isatty()
    except (AttributeError, OSError, ValueError):
        return False


def _bytes(count):
    """`count` bytes for people: `512 B`, `569 kB`, `2.7 MB`."""
    if count >= 1_000_000:
        return f"{count / 1e6:.1f} MB"
    return f"{count / 1e3:.0f} kB" if count >= 1_000 else f"{count} B"


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
