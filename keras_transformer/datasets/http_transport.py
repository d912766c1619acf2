"""HTTP downloads that time out when nothing arrives, in the caller's thread, for TFDS's download manager.

`TimedTransport` does what `tensorflow_datasets`' `DownloadManager` asks of its
downloader (see `downloads`): a stalled server fails after
`download_timeout()` seconds, Ctrl-C stops a download at once, and whatever
ends one early deletes its temporary files.
"""

import contextlib
import hashlib
import math
import os
import pathlib
import time

from keras_transformer.datasets.download_progress import DownloadProgress

TIMEOUT_ENV = "KERAS_TRANSFORMER_DOWNLOAD_TIMEOUT"
DEFAULT_TIMEOUT = 60.0  # seconds a download may receive nothing
DOWNLOAD_RETRIES = 3  # for a refused connection or a 5xx status, after 0.2, 0.4, 0.8 s
RETRY_STATUSES = (500, 502, 503, 504)
CHUNK_BYTES = 64 * 1024


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


class TimedTransport:
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
        """No progress bars of TFDS's: `DownloadProgress` shows a slow download."""
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
            with DownloadProgress(url, limit, self.timeout) as progress, requests.Session() as session:
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
