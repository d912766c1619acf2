"""TF Serving's REST API as a FastAPI app, over a `ServedModel` and a `DynamicBatcher`.

Routes (as TF Serving's, so a client written for TF Serving works unchanged):

- `POST /v1/models/NAME:predict`, `POST /v1/models/NAME/versions/N:predict`
- `POST /v1/models/NAME:stream`: `:predict`'s body, answered word by word as
  Server-Sent Events (`sse`)
- `GET /v1/models/NAME` (and `/versions/N`): the model's version status
- `GET /v1/models/NAME/metadata` (and `/versions/N/metadata`): the signature defs
- `GET /`: a page to try the model in a browser

Every error is `{"error": "..."}` with a 4xx/5xx status: 400 for a bad
request, 404 for an unknown model, version or route, 413 for a body or
request too large, 503 (with `Retry-After`) when the queue is full, 504 when
a request waits longer than its timeout, 500 (one line, no traceback) for a
bug here. Too many connections (503) and requests that do not arrive in time
(408) are answered before the app: see `connections`.

Example:

>>> app = create_app(ServedModel("export"), name="translator")   # doctest: +SKIP
>>> uvicorn.run(app, host="127.0.0.1", port=8501)                # doctest: +SKIP
"""

import asyncio
import contextlib
import dataclasses
import json
import logging
import re

from keras_transformer.serving import page, sse
from keras_transformer.serving.batching import QueueFull
from keras_transformer.serving.request_values import RequestError

try:
    import fastapi
    from fastapi.responses import HTMLResponse, Response, StreamingResponse
    from starlette.requests import ClientDisconnect
except ModuleNotFoundError as error:  # pragma: no cover  (the extra is part of the test install)
    raise ModuleNotFoundError(
        f"`keras-transformer serve` needs the `serve` extra ({error.name} is missing): "
        "pip install keras-transformer[serve]",
        name=error.name,
    ) from None

ROUTE = re.compile(
    r"^/v1/models/(?P<name>[^/:]+)(?:/versions/(?P<version>[^/:]+))?(?P<rest>:predict|:stream|/metadata)?$"
)
MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
MODEL_NAME_RULE = "1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit"
LONG_INTEGER_DIGITS = 320  # more digits than any float64 holds (309): kept as text, never converted
logger = logging.getLogger("keras_transformer.serving")


class LongInteger:
    """A JSON integer with more than `LONG_INTEGER_DIGITS` digits, kept as its text: too long for any input.

    Neither a number nor a string to the request checks, which refuse it
    naming the field; its `repr` says how long it is instead of repeating it.
    Python's own `int` would refuse more than 4300 digits with a `ValueError`.
    """

    __slots__ = ("text",)

    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return f"an integer of {len(self.text.lstrip('-'))} digits"


def _parse_int(text):
    return int(text) if len(text) <= LONG_INTEGER_DIGITS else LongInteger(text)


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one request may ask for: body bytes, and seconds from arrival to answer."""

    max_body_bytes: int = 1 << 20
    timeout_s: float = 30.0


def check_model_name(name):
    """`name` if it can be served at `/v1/models/NAME:predict` as it is written, else a `ValueError` saying why.

    A `/` or `:` would split the route, and spaces, `%` or other characters
    are escaped differently by different clients: only `MODEL_NAME_RULE`.
    """
    if not isinstance(name, str) or not MODEL_NAME.fullmatch(name):
        raise ValueError(
            f"the model name {name!r} cannot be served at /v1/models/NAME:predict: a name is {MODEL_NAME_RULE}"
        )
    return name


def create_app(model, batcher, name, version=1, limits=Limits(), streams=None):
    """The FastAPI app serving `model` (a `ServedModel`) as `name`, batching through `batcher`.

    `batcher` is a `DynamicBatcher` whose `run_batch(key, inputs)` runs
    `model.run(*key... )`: build both with `build_batcher`. `streams` (an
    `sse.Streams`) decodes `:stream` requests word by word; without it a
    stream is the batcher's whole answer, once. The app closes the
    batcher (answering every queued request) when it shuts down. A `name`
    that `check_model_name` refuses is a `ValueError`.
    """
    check_model_name(name)
    streams = streams or sse.Streams(batch=_batched_stream(batcher, limits))

    @contextlib.asynccontextmanager
    async def lifespan(app):
        yield
        streams.close()
        await asyncio.to_thread(batcher.close)

    app = fastapi.FastAPI(title=f"keras-transformer: {name}", lifespan=lifespan, docs_url=None, redoc_url=None)
    html = page.render(name)

    @app.get("/", response_class=HTMLResponse)
    async def index():
        return html

    @app.api_route("/v1/models/{path:path}", methods=["GET", "POST"])
    async def models(path: str, request: fastapi.Request):
        try:
            return await _models(path, request, model, (batcher, streams), name, version, limits)
        except Exception as error:  # noqa: BLE001  (a bug here: one JSON line to the client, one log line)
            logger.error("Internal error answering %s %s", request.method, request.url.path, exc_info=error)
            return _error(500, f"Internal error: {type(error).__name__}: {_first_line(error)}")

    @app.exception_handler(404)
    async def not_found(request, exc):
        return _error(404, f"Malformed request: {request.method} {request.url.path}")

    return app


async def _models(path, request, model, engines, name, version, limits):
    route = ROUTE.match(f"/v1/models/{path}")
    if route is None:
        return _error(404, f"Malformed request: {request.method} /v1/models/{path}")
    found = _find_model(route["name"], route["version"], name, version)
    if found is not None:
        return _error(404, found)
    action = route["rest"] or ""
    if action == ":predict" and request.method == "POST":
        return await _predict(request, model, engines[0], limits)
    if action == ":stream" and request.method == "POST":
        return await _stream(request, model, engines[1], limits)
    if request.method == "GET" and action == "/metadata":
        return _json(model.metadata(name, version))
    if request.method == "GET" and not action:
        return _json(_status(version))
    return _error(405, f"Unsupported method or path: {request.method} /v1/models/{path}")


def build_batcher(model, **options):
    """A `DynamicBatcher` whose jobs are keyed by (signature, scalars) and run by `model.run`."""
    from keras_transformer.serving.batching import DynamicBatcher

    def run_batch(key, inputs):
        signature, scalars = key
        return model.run(signature, inputs, scalars)

    return DynamicBatcher(run_batch, **options)


def _find_model(requested, requested_version, name, version):
    """None when the request names this model (and version), else TF Serving's 404 message."""
    if requested != name:
        return f"Servable not found for request: Latest({requested})"
    if requested_version is not None and requested_version != str(version):
        return f"Servable not found for request: Specific({requested}, {requested_version})"
    return None


def _status(version):
    return {
        "model_version_status": [
            {"version": str(version), "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}
        ]
    }


async def _predict(request, model, batcher, limits):
    try:
        body = _decode(await _read_body(request, limits.max_body_bytes))
        parsed = model.parse(body)
        future = batcher.submit((parsed.signature, parsed.scalars), parsed.inputs)
    except RequestError as error:
        return _error(error.status, str(error))
    except QueueFull as error:
        return _error(503, f"Server busy: {error}; retry later", headers={"Retry-After": "1"})
    try:
        outputs = await asyncio.wait_for(asyncio.wrap_future(future), limits.timeout_s)
    except (asyncio.TimeoutError, TimeoutError):
        future.cancel()
        return _error(504, f"Deadline exceeded: no answer within the {limits.timeout_s:g} s request timeout")
    except Exception as error:  # noqa: BLE001  (a failed signature call: reported, the server goes on)
        return _error(_tf_status(error), f"{type(error).__name__}: {_first_line(error)}")
    return _json(model.render(parsed, outputs))


async def _stream(request, model, streams, limits):
    try:
        parsed = sse.check(model.parse(_decode(await _read_body(request, limits.max_body_bytes))))
    except RequestError as error:
        return _error(error.status, str(error))
    lines = sse.events(request, parsed, streams, limits.timeout_s, warnings=model.truncated(parsed))
    return StreamingResponse(lines, media_type="text/event-stream", headers={"Cache-Control": "no-cache"})


def _batched_stream(batcher, limits):
    """`Streams`' `batch`: one instance of a request through `batcher`, its whole answer as one piece."""
    from keras_transformer.translators.streaming import Piece

    def batch(request, instance):
        inputs = {name: values[instance : instance + 1] for name, values in request.inputs.items()}
        outputs = batcher.submit((request.signature, request.scalars), inputs).result(limits.timeout_s)
        finished = outputs.get("finished")
        done = True if finished is None else bool(finished[0])
        text = outputs["translations"][0].decode("utf-8", errors="replace")
        yield Piece(text, (), "end" if done else "length")

    return batch


async def _read_body(request, limit):
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise RequestError(f"Request body of {declared} bytes is larger than the limit of {limit} bytes", 413)
    chunks, size = [], 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise RequestError(f"Request body is larger than the limit of {limit} bytes", 413)
            chunks.append(chunk)
    except ClientDisconnect:  # gone (or timed out by the connection guard): no one reads the answer
        raise RequestError("The client closed the connection before sending the whole body") from None
    return b"".join(chunks)


def _decode(raw):
    """The body's JSON value; invalid UTF-8 and non-JSON are `RequestError`s that say where."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise RequestError(f"Request body is not valid UTF-8: {error.reason} at byte {error.start}") from None
    try:
        return json.loads(text, parse_int=_parse_int)
    except json.JSONDecodeError as error:
        raise RequestError(f"JSON Parse error: {error.msg} at line {error.lineno} column {error.colno}") from None
    except RecursionError:
        raise RequestError("JSON Parse error: nested too deeply") from None
    except ValueError as error:  # any other number Python cannot read
        raise RequestError(f"JSON Parse error: {str(error)[:200]}") from None


def _first_line(error, limit=300):
    """The line of `error`'s message that says what is wrong.

    A TensorFlow graph error starts "Graph execution error:" and names the
    failed assertion further down, after the Python stack where its op was
    defined: that line, when there is one, else the first.
    """
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    chosen = next((line for line in lines if line.startswith("assertion failed:")), lines[0] if lines else "")
    return chosen[:limit]


def _tf_status(error):
    import tensorflow as tf

    return 400 if isinstance(error, (tf.errors.InvalidArgumentError, ValueError)) else 500


def _json(value, status=200, headers=None):
    text = json.dumps(value, ensure_ascii=False, allow_nan=True)  # TF Serving writes NaN and Infinity too
    return Response(text, status_code=status, media_type="application/json", headers=headers)


def _error(status, message, headers=None):
    return _json({"error": message}, status, headers)
