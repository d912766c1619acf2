"""`keras-transformer serve`: a SavedModel (or a LiteRT export) over TF Serving's REST API, with dynamic batching.

Example::

    keras-transformer serve --model saved_models/en-de-export --name en-de
    curl -d '{"instances": ["A dog runs."]}' http://127.0.0.1:8501/v1/models/en-de:predict
    keras-transformer serve --model saved_models/nllb --source-lang eng_Latn --target-lang fra_Latn --name nllb
    curl -d '{"instances": [{"sentence": "A dog runs.", "target_lang": "deu_Latn"}]}' \\
        http://127.0.0.1:8501/v1/models/nllb:predict

An instance may be an object with the controls of its translation,
`{"sentence": ..., "source_lang": ..., "target_lang": ..., "target_prefix": ...}`
(each but `sentence` optional); `--source-lang` and `--target-lang` are the
languages of the requests that name none, and the model's metadata
(`GET /v1/models/NAME/metadata`) lists its language codes and defaults.

A training run directory is exported to a temporary folder first; a LiteRT
export folder is served through its translator with the same signatures but
`sample` (`keras_transformer.serving.served_translator`), and so is an
imported GPT-2 run, whose tokenizer runs in Python, through its `Generator`
(the opener says which: `opener.open_served`). It binds to
127.0.0.1 unless `--host` says otherwise, before anything else (a port in use
is an error at once, not after the export and the warm-up), and accepts
connections once the model is ready; SIGTERM (or Ctrl-C) stops accepting,
answers the requests already accepted, and exits 0. It serves at most
`--max-connections` at once (more are answered 503), closes idle connections
after `--keep-alive-timeout` and answers 408 to a request that does not arrive
whole within `--read-timeout`; exposed to a network, put a reverse proxy in
front (docs/serving.md). A run directory served with the xla engine is batched
in flight (`--batching in-flight`, the default: sentences join the running
decode every `--segment-steps` steps and leave it when done); other models,
and `--batching dynamic`, in dynamic batches. Needs the `serve` extra:
`pip install keras-transformer[serve]`.
"""

import pathlib
import shutil
import socket
import sys
import tempfile

from keras_transformer.commands.arguments import (
    TRUST,
    add_engine_argument,
    add_language_arguments,
    int_in_range,
    languages_as_flags,
    non_empty,
    non_negative_finite_float,
    positive_finite_float,
    positive_int,
)

BATCHING = ("in-flight", "dynamic")


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "serve",
        help="serve a SavedModel, LiteRT export or training run over TF Serving's REST API",
        description=__doc__.split("\n\n")[0] + " " + TRUST,
    )
    parser.add_argument(
        "--model", required=True, type=non_empty, help="a SavedModel, a LiteRT export, or a training run directory"
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    parser.add_argument(
        "--port",
        type=int_in_range(0, 65535, "a port number from 0 to 65535 (0: any free port)"),
        default=8501,
        help="port (default 8501, as TF Serving; 0: any)",
    )
    parser.add_argument(
        "--name",
        default=None,
        help="the model's name in URLs: letters, digits, '.', '_' and '-' (default: the folder's name)",
    )
    parser.add_argument("--version", type=positive_int, default=1, help="the version it is served as (default 1)")
    add_engine_argument(parser)
    add_language_arguments(parser, served=True)
    _add_batching_arguments(parser.add_argument_group("batching and limits"))
    _add_connection_arguments(
        parser.add_argument_group("connections (see docs/serving.md: a reverse proxy belongs in front)")
    )
    parser.set_defaults(run=run)


def _add_batching_arguments(batching):
    """How requests are batched, and what one request may ask for."""
    batching.add_argument(
        "--max-batch-size", type=positive_int, default=32, help="sentences decoded in one call at most (default 32)"
    )
    batching.add_argument(
        "--batch-timeout-ms",
        type=non_negative_finite_float,
        default=5.0,
        help="how long a request waits for others to batch with (default 5)",
    )
    batching.add_argument(
        "--batching",
        choices=BATCHING,
        default="in-flight",
        help="in-flight: sentences join the running decode between segments of steps and leave it when done (a "
        "run directory, the xla engine); dynamic: requests that arrive together are decoded as one batch, as TF "
        "Serving (every other model) (default in-flight)",
    )
    batching.add_argument(
        "--segment-steps",
        type=positive_int,
        default=4,
        help="in-flight batching: decoder steps between two chances to join or leave (default 4)",
    )
    batching.add_argument(
        "--no-batching", action="store_true", help="decode each request alone (batch-of-one, as TF Serving's default)"
    )
    batching.add_argument(
        "--always-wait",
        action="store_true",
        help="wait --batch-timeout-ms for other requests also when no batch is being decoded (as TF Serving); "
        "by default a request that arrives while the server is idle is decoded at once",
    )
    batching.add_argument("--threads", type=positive_int, default=2, help="batches decoded at once (default 2)")
    batching.add_argument(
        "--max-queue", type=positive_int, default=256, help="requests waiting at most; more get 503 (default 256)"
    )
    batching.add_argument(
        "--max-instances", type=positive_int, default=64, help="sentences per request at most (default 64)"
    )
    batching.add_argument(
        "--max-body-bytes", type=positive_int, default=1 << 20, help="request body size at most (default 1 MiB)"
    )
    batching.add_argument(
        "--timeout",
        type=positive_finite_float,
        default=30.0,
        help="seconds a request may wait for its answer (default 30)",
    )
    batching.add_argument(
        "--no-warmup",
        action="store_true",
        help="start at once, without compiling the decoders of the first requests (one short sentence each) "
        "before listening; the first requests then wait for their XLA compile",
    )
    batching.add_argument(
        "--warmup-all",
        action="store_true",
        help="compile every batch size up to --max-batch-size at every source length before listening (minutes "
        "on a model of long sources); by default other shapes compile when first asked for, once, and the "
        "compilation cache keeps them for the next start",
    )


def _add_connection_arguments(connections):
    """How many connections the server holds, and how long they may idle or take to send a request."""
    connections.add_argument(
        "--max-connections",
        type=positive_int,
        default=None,
        help="connections served at once; one more is answered 503 (default: half of `ulimit -n`, at most 1024)",
    )
    connections.add_argument(
        "--keep-alive-timeout",
        type=positive_finite_float,
        default=5.0,
        help="seconds a connection may wait idle for its next request before it is closed (default 5)",
    )
    connections.add_argument(
        "--read-timeout",
        type=positive_finite_float,
        default=10.0,
        help="seconds a request may take to arrive whole, headers and body, from its first byte; "
        "then it is answered 408 and closed (default 10)",
    )


def run(args):
    try:
        import uvicorn

        from keras_transformer.serving import rest
    except ModuleNotFoundError as error:
        raise ValueError(
            f"serving needs the `serve` extra ({error.name} is not installed): pip install keras-transformer[serve]"
        ) from None
    from keras_transformer import opener
    from keras_transformer.serving import connections

    name = _model_name(rest, args)
    connection_limits = connections.budget(
        args.max_connections, idle_timeout_s=args.keep_alive_timeout, read_timeout_s=args.read_timeout
    )
    sock = _bind(args.host, args.port)  # first: a taken port fails now, not after minutes of export and warm-up
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="kt-serve-"))
    try:
        languages = dict(source_lang=args.source_lang, target_lang=args.target_lang)
        with languages_as_flags():
            served = opener.open_served(
                args.model,
                args.engine,
                workdir=workdir,
                on_export=_exporting,
                threads=args.threads,
                precision=args.precision,
                **languages,
            )
            model = _served_model(args, served, languages)
        if not args.no_warmup:
            _warm_up(model, 1 if args.no_batching else args.max_batch_size, args.warmup_all)
        batcher = rest.build_batcher(
            model,
            max_batch_size=args.max_batch_size,
            timeout_ms=args.batch_timeout_ms,
            max_queue=args.max_queue,
            num_threads=args.threads,
            enabled=not args.no_batching,
            always_wait=args.always_wait,
        )
        batcher = _in_flight(args, served, batcher)
        limits = rest.Limits(max_body_bytes=args.max_body_bytes, timeout_s=args.timeout)
        streams = _streams(args, served, batcher)
        app = rest.create_app(model, batcher, name, args.version, limits, streams)
        return _serve(uvicorn, app, sock, name, model, (batcher, streams), connection_limits)
    finally:
        sock.close()
        shutil.rmtree(workdir, ignore_errors=True)


def _served_model(args, served, languages):
    """What the REST API calls: the served SavedModel's signatures, or the engine's translator as signatures."""
    if served.saved_model is not None:
        from keras_transformer.serving.signatures import ServedModel

        codes = {name: code for name, code in languages.items() if code is not None}
        return ServedModel(served.saved_model, max_instances=args.max_instances, **codes)
    from keras_transformer.serving.served_translator import ServedTranslator

    return ServedTranslator(served.translator, args.model, max_instances=args.max_instances)


def _exporting(path):
    print(f"Exporting the run {path} to a temporary SavedModel...", file=sys.stderr, flush=True)


def _in_flight(args, served, batcher):
    """`batcher` inside an `InflightBatcher` of the run's translator (`--batching in-flight`), else itself."""
    if args.batching != "in-flight" or args.no_batching:
        return batcher
    if not served.in_rows:
        print(
            "Batching: dynamic (in-flight batching decodes a translation run directory with the xla engine)",
            file=sys.stderr,
            flush=True,
        )
        return batcher
    from keras_transformer.serving.inflight import InflightBatcher

    rows = dict(max_rows=args.max_batch_size, segment_steps=args.segment_steps)
    try:
        in_flight = InflightBatcher(served.translator, batcher, max_queue=args.max_queue, **rows)
    except ValueError as error:  # a model the rows cannot decode (a decoder-only one)
        print(f"Batching: dynamic ({error})", file=sys.stderr, flush=True)
        return batcher
    print(
        f"Batching: in-flight, up to {args.max_batch_size} sentences at once, joining and leaving every "
        f"{args.segment_steps} steps",
        file=sys.stderr,
        flush=True,
    )
    if not args.no_warmup:
        import time

        started = time.perf_counter()
        compiled = in_flight.warm_up()
        seconds = time.perf_counter() - started
        print(f"Warmed up in-flight rows: {compiled} programs in {seconds:.1f} s", file=sys.stderr, flush=True)
    return in_flight


def _streams(args, served, batcher):
    """What decodes `:stream` word by word: the in-flight rows, else the translator the opener gave, if any."""
    from keras_transformer.serving.sse import Streams

    if hasattr(batcher, "stream_pieces"):  # in-flight: streams join the same rows (their threads only wait)
        return Streams(batcher, max(args.threads, args.max_batch_size))
    if served.translator is not None:  # an encoder's (BERT) and a SavedModel's answer whole, once
        return Streams(served.translator, args.threads)
    return None  # its signatures' whole answers, once (docs/serving.md)


def _model_name(rest, args):
    """The name the model is served as: `--name`, else the folder's name; a `ValueError` if no URL can hold it."""
    name = args.name if args.name is not None else pathlib.Path(args.model).resolve().name
    try:
        return rest.check_model_name(name)
    except ValueError as error:
        given = f"--name {name!r}" if args.name is not None else f"the folder's name {name!r} (pass --name)"
        raise ValueError(f"{given}: {error}") from None


def _warm_up(model, max_batch_size, every_shape):
    """Compiles the first requests' decoders (or, `every_shape`, all of them), a line for each as it ends."""
    import time

    shapes = f"every shape of batches up to {max_batch_size}" if every_shape else "the first requests' shapes"
    print(f"Warming up: {model.warm_up_does}, {shapes}...", file=sys.stderr, flush=True)
    started = time.perf_counter()
    calls = model.warm_up(
        max_batch_size, every_shape, progress=lambda line: print(f"  {line}", file=sys.stderr, flush=True)
    )
    print(f"Warmed up: {calls} signature calls in {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)


def _graceful_server(uvicorn):
    class GracefulServer(uvicorn.Server):
        """uvicorn's server, which exits 0 after a signal's graceful shutdown instead of re-raising the signal."""

        def handle_exit(self, sig, frame):
            super().handle_exit(sig, frame)
            getattr(self, "_captured_signals", []).clear()

    return GracefulServer


def _bind(host, port):
    """A socket bound to `host:port` that does not listen yet: clients are refused until the model is ready."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # asyncio sets TCP_NODELAY only then
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise OSError(f"cannot listen on {host}:{port}: {error.strerror}") from None
    return sock


def _serve(uvicorn, app, sock, name, model, decoders, limits):
    from keras_transformer.serving import connections, logs

    sock.listen(limits.backlog)
    host, bound = sock.getsockname()[:2]
    shown = f"[{host}]" if sock.family == socket.AF_INET6 else host
    print(
        f"Serving {name} ({', '.join(sorted(model.functions))}) at http://{shown}:{bound}/ "
        f"(predict: POST /v1/models/{name}:predict; at most {limits.max_connections} connections)",
        file=sys.stderr,
        flush=True,
    )
    log = logs.install(sys.stderr)  # uvicorn's, asyncio's and the guard's lines, each kind a few times a minute
    config = uvicorn.Config(
        connections.track_requests(app),
        http=connections.ConnectionGuard(limits),
        loop="asyncio",  # accepts at most `backlog` connections at once, which `connections.budget` counts on
        backlog=limits.backlog,
        timeout_keep_alive=limits.idle_timeout_s,
        log_config=None,
        log_level="warning",
        access_log=False,
        lifespan="on",
    )
    try:
        _graceful_server(uvicorn)(config).run(sockets=[sock])
    finally:
        log.close()
    print(f"Stopped: every accepted request was answered ({_answered(*decoders)}).", file=sys.stderr, flush=True)
    return 0


def _answered(batcher, streams):
    """What the server decoded: the batcher's sentences and signature calls, and the sentences streamed apart."""
    sizes = batcher.batch_sizes
    batches, sentences = sum(sizes.values()), sum(size * count for size, count in sizes.items())
    streamed = streams.decoded if streams is not None else 0
    return f"{sentences} sentences in {batches} signature calls" + (
        f", and {streamed} streamed sentence{'s' * (streamed != 1)}" if streamed else ""
    )
