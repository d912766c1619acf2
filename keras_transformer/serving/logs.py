"""The REST server's log: each kind of line a few times, then a count of the ones held back.

A server under attack or overload repeats itself: one "Invalid HTTP request
received." per bad request, one "socket.accept() out of system resource"
(with its traceback) per refused accept. Written in full, such a flood filled
200 MB in a minute. `RepeatLimitingHandler` writes each kind of line at most
`burst` times per `period_s`; when a period with held-back lines has ended,
the next line written (of any kind) is preceded by one summary:

    WARNING: (5230 more lines like "Invalid HTTP request received." in the last 60 s, not shown)

A kind is the logger, the level and the message's first line with numbers
and addresses blanked out (`#`), plus the exception's type. Only a kind's first
line carries its traceback; later ones show the exception's last line. A kind
that held nothing back is forgotten when its period ends, and at most
`MAX_KINDS` are tracked at once (more share one count).

Example:

>>> import io, logging
>>> stream = io.StringIO()
>>> handler = RepeatLimitingHandler(stream, burst=2)
>>> log = logging.getLogger("demo")
>>> log.addHandler(handler); log.propagate = False
>>> for port in range(1000):
...     log.warning("Bad request from port %d", port)
>>> log.removeHandler(handler); handler.close()
>>> print(stream.getvalue(), end="")
WARNING: Bad request from port 0
WARNING: Bad request from port 1
WARNING: (998 more lines like "Bad request from port #" in the last 0 s, not shown)
"""

import dataclasses
import logging
import re
import sys
import time

FORMAT = "%(levelname)s: %(message)s"
MAX_KINDS = 256
OTHER = ("", logging.WARNING, "other messages", "")
_VARIABLE = re.compile(r"0x[0-9a-fA-F]+|\d+")


@dataclasses.dataclass
class _Kind:
    started: float  # when its current period began
    shown: int = 0  # lines written in this period
    held: int = 0  # lines held back in this period
    example: str = ""  # the kind, as a summary names it
    level: str = "WARNING"
    ever_shown: bool = False


class RepeatLimitingHandler(logging.StreamHandler):
    """A `StreamHandler` that writes each kind of record at most `burst` times per `period_s` seconds.

    Held-back records are counted, and the count is written (one line per
    kind) before the next record after the period ends, and on `close()`.
    `clock` is the time source (seconds; `time.monotonic` by default).
    """

    def __init__(self, stream=None, burst=3, period_s=60.0, clock=time.monotonic):
        super().__init__(stream if stream is not None else sys.stderr)
        self.setFormatter(logging.Formatter(FORMAT))
        self.burst, self.period_s, self.clock = burst, period_s, clock
        self.kinds = {}

    def emit(self, record):
        now = self.clock()
        self._write_summaries(now, ended_only=True)
        key = _kind_key(record)
        if key not in self.kinds and len(self.kinds) >= MAX_KINDS:
            key = OTHER
        kind = self.kinds.get(key)
        if kind is None:
            kind = self.kinds[key] = _Kind(now, example=key[2], level=record.levelname)
        if kind.shown >= self.burst:
            kind.held += 1
            return
        kind.shown += 1
        super().emit(record if not kind.ever_shown else _without_traceback(record))
        kind.ever_shown = True

    def close(self):
        """Writes the counts of every held-back kind, then closes."""
        self.acquire()
        try:
            self._write_summaries(self.clock(), ended_only=False)
        finally:
            self.release()
        super().close()

    def _write_summaries(self, now, ended_only):
        for key, kind in list(self.kinds.items()):
            if ended_only and now - kind.started < self.period_s:
                continue
            if not kind.held:
                del self.kinds[key]
                continue
            seconds = now - kind.started
            line = f'({kind.held} more lines like "{kind.example}" in the last {seconds:.0f} s, not shown)'
            super().emit(logging.makeLogRecord({"msg": line, "levelname": kind.level}))
            kind.started, kind.shown, kind.held = now, 0, 0


def _kind_key(record):
    first = record.getMessage().split("\n", 1)[0].strip()
    error = record.exc_info[0].__name__ if record.exc_info and record.exc_info[0] else ""
    return record.name, record.levelno, _VARIABLE.sub("#", first), error


def _without_traceback(record):
    """A copy of `record` whose exception, if any, is its last line instead of the whole traceback."""
    if not record.exc_info:
        return record
    copy = logging.makeLogRecord(record.__dict__)
    error = record.exc_info[1]
    copy.msg, copy.args = f"{record.getMessage()} ({type(error).__name__}: {error})", None
    copy.exc_info, copy.exc_text = None, None
    return copy


def install(stream=None, level=logging.WARNING, **limits):
    """Sends every logger's records (uvicorn's, asyncio's, this package's) through one `RepeatLimitingHandler`.

    Replaces the root logger's handlers; returns the handler (close it to
    write the last counts).
    """
    handler = RepeatLimitingHandler(stream, **limits)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    return handler
