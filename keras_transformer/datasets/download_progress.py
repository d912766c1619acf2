"""The progress line of a slow download on stderr: `Downloading train.en.gz from host: 120 kB of 569 kB (21%)`."""

import contextlib
import shutil
import sys
import threading
import time
import urllib.parse

PROGRESS_AFTER = 3.0  # seconds a download runs before its progress line appears
PROGRESS_EVERY = 5.0  # seconds between two progress lines when stderr is not a terminal
REDRAW_EVERY = 0.25  # seconds between two redraws of the line on a terminal
SILENCE_SHOWN = 1.0  # seconds without a byte after which the line says so

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


class DownloadProgress:
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
