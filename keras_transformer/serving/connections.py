"""The REST server's connections: how many it holds, and how long a request may take to arrive.

uvicorn on its own accepts connections until the process runs out of file
descriptors ("Too many open files"), and waits forever for a request whose
headers or body never finish arriving (slowloris). `ConnectionGuard` stands
between the event loop and uvicorn's HTTP protocol (it is passed to uvicorn as
the protocol "class") and bounds both:

- At most `max_connections` connections are served at once. One more is held
  only until its request's first bytes arrive, answered `503` with
  `Retry-After` and closed; at most `overflow` such connections at once, and
  beyond them new connections are closed unanswered. Together with the
  listening backlog (the most connections the event loop accepts at once)
  this keeps the open files within `ulimit -n`: see `budget`.
- A connection with no request under way is closed after `idle_timeout_s`
  (a kept-alive connection, or one that never sends a byte).
- A request must arrive whole, headers and body, within `read_timeout_s` of its
  first byte; else the connection is answered `408` and closed.

The guard learns where each request stands from `track_requests`, the ASGI
middleware around the app: each connection's requests run in tasks created
while its bytes are handed to uvicorn, so they see the connection in a context
variable.

Example:

>>> limits = budget(max_connections=None, open_files=1024)
>>> limits.max_connections, limits.overflow, limits.backlog
(512, 64, 64)
>>> config = uvicorn.Config(track_requests(app), http=ConnectionGuard(limits), backlog=limits.backlog)  # doctest: +SKIP
"""

import asyncio
import contextvars
import dataclasses
import json
import logging
import resource

RESERVED_FILES = 64  # the process's own open files: the model's, pipes, the event loop's
DEFAULT_MAX_CONNECTIONS = 1024  # at most, by default: half of `ulimit -n` below that
OVERFLOW_LINGER_S = 1.0  # how long a connection beyond the limit may take to send its request's first bytes

_CONNECTION = contextvars.ContextVar("keras_transformer_connection", default=None)
logger = logging.getLogger("keras_transformer.serving")


@dataclasses.dataclass(frozen=True)
class ConnectionLimits:
    """How many connections are served, and how long they may stay idle or take to send a request."""

    max_connections: int
    overflow: int = 64
    backlog: int = 128
    idle_timeout_s: float = 5.0
    read_timeout_s: float = 10.0


def open_files_limit():
    """The process's soft limit on open files (`ulimit -n`); a large number when unlimited."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return 1 << 20 if soft == resource.RLIM_INFINITY else soft


def budget(max_connections=None, open_files=None, **timeouts):
    """`ConnectionLimits` whose connections, overflow and accept burst fit in `open_files` (default: `ulimit -n`).

    The event loop may hold up to two listening backlogs of just-accepted
    connections before the guard closes the extra ones, so connections +
    overflow + 2 x backlog + `RESERVED_FILES` stay within `open_files`.
    `max_connections=None` takes half of `open_files`, at most
    `DEFAULT_MAX_CONNECTIONS`. A `max_connections` that does not fit is a
    `ValueError` that names the largest that does.
    """
    open_files = open_files or open_files_limit()
    backlog = min(128, max(8, open_files // 16))
    overflow = min(64, max(4, open_files // 16))
    most = open_files - RESERVED_FILES - overflow - 2 * backlog
    if most < 1:
        raise ValueError(
            f"the open-file limit (ulimit -n) is {open_files}: too few to serve connections; raise it to 1024 or more"
        )
    if max_connections is None:
        max_connections = min(DEFAULT_MAX_CONNECTIONS, open_files // 2, most)
    elif max_connections > most:
        raise ValueError(
            f"--max-connections {max_connections} needs more open files than the limit (ulimit -n) of {open_files} "
            f"allows: at most {most} (or raise ulimit -n)"
        )
    return ConnectionLimits(max_connections, overflow, backlog, **timeouts)


class ConnectionGuard:
    """A protocol factory for uvicorn (`http=`): each connection wrapped in a `GuardedConnection`.

    `inner` is uvicorn's HTTP protocol class (default: the one uvicorn picks
    with `http="auto"`). `open` and `overflowing` count the connections
    served and those being refused.
    """

    def __init__(self, limits, inner=None):
        if inner is None:
            from uvicorn.protocols.http.auto import AutoHTTPProtocol

            inner = AutoHTTPProtocol
        self.limits, self.inner = limits, inner
        self.open = self.overflowing = 0

    def __call__(self, **kwargs):
        return GuardedConnection(self, lambda: self.inner(**kwargs))


class GuardedConnection(asyncio.Protocol):
    """One connection: handed to uvicorn's protocol under the limit, else answered 503 (see the module docstring).

    States: `idle` (no request under way), `reading` (a request's first bytes
    arrived, not yet all of it), `busy` (the request arrived or its answer
    began), `refusing` (over the limit, waiting for its request), `closing`
    (answered by the guard: what the client still sends is dropped).
    """

    def __init__(self, guard, make_inner):
        self.guard, self.limits, self.make_inner = guard, guard.limits, make_inner
        self.inner = self.transport = self.timer = None
        self.state, self.counted = "idle", None

    # -- the event loop's side -------------------------------------------------------------------

    def connection_made(self, transport):
        self.transport = transport
        if self.guard.open < self.limits.max_connections:
            self._count("open")
            self.inner = self.make_inner()
            self.inner.connection_made(transport)
            self._wait_for_request()
        elif self.guard.overflowing < self.limits.overflow:
            self._count("overflowing")
            self.state = "refusing"
            self._start_timer(OVERFLOW_LINGER_S, transport.close)
        else:
            transport.close()

    def data_received(self, data):
        if self.state == "closing":
            return
        if self.state == "refusing":
            self._refuse()
            return
        self.request_started()
        token = _CONNECTION.set(self)  # the request's task, created inside, sees this connection
        try:
            self.inner.data_received(data)
        finally:
            _CONNECTION.reset(token)

    def eof_received(self):
        if self.inner is not None and self.state != "closing":
            return self.inner.eof_received()
        return None  # the transport closes

    def connection_lost(self, exc):
        self._stop_timer()
        if self.counted is not None:
            setattr(self.guard, self.counted, getattr(self.guard, self.counted) - 1)
        self.state, self.counted = "closed", None
        if self.inner is not None:
            self.inner.connection_lost(exc)

    def pause_writing(self):
        if self.inner is not None:
            self.inner.pause_writing()

    def resume_writing(self):
        if self.inner is not None:
            self.inner.resume_writing()

    # -- where the request stands (`track_requests`, and the bytes above) ------------------------------

    def request_started(self):
        """A request's first bytes arrived: it has `read_timeout_s` to arrive whole."""
        if self.state == "idle":
            self.state = "reading"
            self._start_timer(self.limits.read_timeout_s, self._read_timed_out)

    def request_arrived(self):
        """The request's body has been read, or its answer has begun: no deadline until it is answered."""
        if self.state in ("idle", "reading"):
            self.state = "busy"
            self._stop_timer()

    def request_answered(self):
        """The app has answered the request: the connection waits for the next one."""
        if self.state in ("reading", "busy") and not self.transport.is_closing():
            self._wait_for_request()

    # -- timers and answers ---------------------------------------------------------------------------

    def _wait_for_request(self):
        self.state = "idle"
        self._start_timer(self.limits.idle_timeout_s, self.transport.close)

    def _read_timed_out(self):
        seconds = f"{self.limits.read_timeout_s:g}"
        logger.warning("Answered 408 to a request that did not arrive whole within the %s s read timeout", seconds)
        message = f"Request Timeout: the request did not arrive whole within {seconds} s of its first byte"
        self._answer_and_close(408, "Request Timeout", message)

    def _refuse(self):
        limit = self.limits.max_connections
        logger.warning("Answered 503 to a connection beyond --max-connections %d", limit)
        message = f"Server busy: {limit} connections open, the most it serves (--max-connections); retry later"
        self._answer_and_close(503, "Service Unavailable", message, retry_after=1)

    def _answer_and_close(self, status, reason, message, retry_after=None):
        """Writes a whole `{"error": message}` response, then closes; only where uvicorn has not begun one.

        A refused connection (no uvicorn protocol behind it) is half-closed and
        closed once the client has read the answer (or after
        `OVERFLOW_LINGER_S`): closing with its request unread could reset the
        connection before the client reads the answer.
        """
        body = json.dumps({"error": message}).encode()
        head = [f"HTTP/1.1 {status} {reason}", "content-type: application/json", f"content-length: {len(body)}"]
        head += [f"retry-after: {retry_after}"] if retry_after is not None else []
        head += ["connection: close"]
        self.state = "closing"
        self.transport.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        if self.inner is not None or not self.transport.can_write_eof():
            self.transport.close()
            return
        self.transport.write_eof()
        self._start_timer(OVERFLOW_LINGER_S, self.transport.close)

    def _count(self, counter):
        self.counted = counter
        setattr(self.guard, counter, getattr(self.guard, counter) + 1)

    def _start_timer(self, seconds, callback):
        self._stop_timer()
        self.timer = asyncio.get_running_loop().call_later(seconds, callback)

    def _stop_timer(self):
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


def track_requests(app):
    """The ASGI `app`, telling each request's connection (`GuardedConnection`) when it arrived and was answered.

    An answer that begins before the request's body has been read whole
    (a 413 for its declared length, a 404) closes the connection after it:
    the rest of the body would otherwise arrive as if it began a new request.
    """

    async def tracked(scope, receive, send):
        connection = _CONNECTION.get()
        if connection is None or scope["type"] != "http":
            return await app(scope, receive, send)
        body_read = not _has_body(scope["headers"])

        async def receive_tracked():
            nonlocal body_read
            message = await receive()
            if message["type"] != "http.request" or not message.get("more_body", False):
                body_read = True
                connection.request_arrived()
            return message

        async def send_tracked(message):
            if message["type"] == "http.response.start":
                connection.request_arrived()
                if not body_read:
                    message = {**message, "headers": [*message.get("headers", []), (b"connection", b"close")]}
            await send(message)

        connection.request_started()  # a pipelined request arrives without new bytes
        try:
            await app(scope, receive_tracked, send_tracked)
        finally:
            connection.request_answered()

    return tracked


def _has_body(headers):
    for name, value in headers:
        if name == b"transfer-encoding" or (name == b"content-length" and value.strip() != b"0"):
            return True
    return False
