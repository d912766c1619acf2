"""`POST /v1/models/NAME:stream`: a translation as Server-Sent Events, word by word.

The body is `:predict`'s (`{"instances": [...]}`, with `signature_name`
`serving_default`, `greedy` or `sample` and its numbers); the answer is
`text/event-stream` in text-generation-inference's shape. For each instance,
in order, one event per piece of text (`translators.streaming.Piece`: whole
words)::

    data: {"index": 0, "instance": 0, "token": {"ids": [120], "text": "Ein", "special": false},
           "generated_text": null, "details": null}

then one last event with the whole text and why it ended (`end`, `length`
or `cancelled`)::

    data: {"index": 3, "instance": 0, "token": null, "generated_text": "Ein Hund läuft.",
           "details": {"finish_reason": "end", "generated_tokens": 6}}

An instance whose sentence was longer than the model reads (truncated,
as `:predict`'s `"warnings"` say) has a `"warning"` in its last event.

A stream decodes on `Streams`' threads. A client that disconnects cancels
its decoding at the next decoder step; a stream past the request timeout
(`--timeout`) ends with `finish_reason` `cancelled` and an `error`. Streams
are connections like any other: `--max-connections`, the read and idle
timeouts of `connections` apply.

Example:

>>> line = event({"index": 0, "generated_text": None})
>>> line
'data: {"index": 0, "generated_text": null}\\n\\n'
"""

import asyncio
import concurrent.futures
import json
import threading
import time

from keras_transformer.serving.request_values import RequestError

# signature -> `stream`'s search (`*_with_controls`: a request whose instances name languages or a prefix)
STREAMED = {
    "serving_default": "best",
    "greedy": "greedy",
    "sample": "sample",
    "with_controls": "best",
    "greedy_with_controls": "greedy",
}
CONTROLS = ("source_lang", "target_lang", "target_prefix")  # an instance's own, "" for the default
POLL_S = 0.05  # how often a quiet stream checks that its client is still there


def event(value):
    """One Server-Sent Event carrying `value` as JSON."""
    return f"data: {json.dumps(value, ensure_ascii=False)}\n\n"


class Streams:
    """Runs streams for the server: `translator` (a `TranslatorInterface`) on `threads` threads.

    Without a `translator` (a SavedModel served by its signatures), a
    stream is the signature's whole answer, once, from `batch(request)`.
    """

    def __init__(self, translator=None, threads=2, batch=None):
        self.translator, self.batch = translator, batch
        self.pool = concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="stream")
        self.decoded = 0  # sentences `translator` streamed to their end (those of `batch` its batcher counts)
        self._count = threading.Lock()

    def pieces(self, request, cancel):
        """`(instance, Piece)` of every instance of the parsed `request`, in order (runs on a stream thread)."""
        search = STREAMED[request.signature]
        scalars = dict(request.scalars)
        sentences = request.inputs.get("sentences", request.inputs.get("prompts"))  # a GPT export's: `prompts`
        for instance, sentence in enumerate(sentences):
            if self.translator is None:
                yield from ((instance, piece) for piece in self.batch(request, instance))
                continue
            controls = {
                name: request.inputs[name][instance].decode("utf-8") for name in CONTROLS if name in request.inputs
            }
            controls = {name: value for name, value in controls.items() if value}
            text = sentence.decode("utf-8")
            pieces = self.translator.stream_pieces(text, search, cancel=cancel, **scalars, **controls)
            for piece in pieces:
                yield instance, piece
            if cancel.is_set():
                return
            with self._count:
                self.decoded += 1

    def close(self):
        self.pool.shutdown(wait=False, cancel_futures=True)


def check(request):
    """The parsed `request` if its signature streams, else a `RequestError`."""
    if request.signature not in STREAMED:
        names = ", ".join(name for name in STREAMED if "controls" not in name)
        raise RequestError(f"Signature {request.signature!r} does not stream; :stream takes {names}")
    return request


async def events(http_request, request, streams, timeout_s, warnings=None):
    """The event stream's text, event by event (an async iterator for a `StreamingResponse`).

    `warnings` (`{instance: line}`: a sentence truncated to the model's
    source limit) go in the last event of their instance, as `"warning"`.
    """
    loop = asyncio.get_running_loop()
    queue, cancel = asyncio.Queue(), threading.Event()
    done = object()

    def work():
        try:
            for item in streams.pieces(request, cancel):
                loop.call_soon_threadsafe(queue.put_nowait, item)
        except Exception as error:  # noqa: BLE001  (one event to the client)
            loop.call_soon_threadsafe(queue.put_nowait, error)
        finally:
            loop.call_soon_threadsafe(queue.put_nowait, done)

    deadline = time.monotonic() + timeout_s
    future = loop.run_in_executor(streams.pool, work)
    state = _Instances(warnings)
    try:
        while True:
            item = await _next(queue, http_request, deadline, cancel)
            if item is done:
                return
            if isinstance(item, Exception):
                yield event({"error": f"{type(item).__name__}: {str(item).splitlines()[0][:300] if str(item) else ''}"})
                return
            if item is None:  # the deadline passed
                cancel.set()
                for line in state.cancelled(f"Deadline exceeded: the stream ran past the {timeout_s:g} s timeout"):
                    yield line
                return
            for line in state.add(*item):
                yield line
    finally:
        cancel.set()  # a client gone (the response cancelled) stops the decoding at its next step
        future.cancel()


async def _next(queue, http_request, deadline, cancel):
    """The next item of `queue`; None past `deadline`; polls the client while it waits."""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        try:
            return await asyncio.wait_for(queue.get(), min(POLL_S, left))
        except (asyncio.TimeoutError, TimeoutError):
            if await http_request.is_disconnected():
                cancel.set()


class _Instances:
    """The events of each instance's pieces: numbered, then the last with the text and its reason."""

    def __init__(self, warnings=None):
        self.index, self.instance, self.texts, self.tokens = 0, None, [], 0
        self.warnings = warnings or {}

    def add(self, instance, piece):
        if piece.text or piece.ids:
            self.texts.append(piece.text)
            self.tokens += len(piece.ids)
            if piece.text:
                yield self._event(instance, {"ids": list(piece.ids), "text": piece.text, "special": False}, None)
        if piece.finish_reason is not None:
            yield self._final(instance, piece.finish_reason)

    def cancelled(self, message):
        if self.instance is not None:
            yield self._final(self.instance, "cancelled", error=message)

    def _event(self, instance, token, generated, details=None, **extra):
        self.instance = instance
        value = {"index": self.index, "instance": instance, "token": token, "generated_text": generated}
        self.index += 1
        return event({**value, "details": details, **extra})

    def _final(self, instance, reason, **extra):
        text, tokens = "".join(self.texts), self.tokens
        self.texts, self.tokens = [], 0
        details = {"finish_reason": reason, "generated_tokens": tokens}
        if instance in self.warnings:
            extra["warning"] = self.warnings[instance]
        line = self._event(instance, None, text, details, **extra)
        self.instance = None
        return line
