"""In-flight batching: requests join a running decode at its next segment of steps, and leave it once done.

Dynamic batching (`batching.DynamicBatcher`) decodes a batch from its first
step to its last: a request that arrives meanwhile waits for a free worker,
and a translation that is done keeps its row until the batch's longest one
ends. `InflightBatcher` keeps one `decoding.RowPool` per search instead (the
translator's own search, greedy search, and sampling per temperature,
top-k and top-p: rows of different searches cannot share a step) and one
thread that, between two segments of `segment_steps` steps, puts the
sentences that arrived into free rows (their sources encoded as they join)
and answers the requests whose sentences are all done. A stream
(`stream_pieces`, the server's `:stream`) is a request of one sentence whose
ids are handed to its reader after each segment, cut into words there
(`translators.streaming.WordCutter`).

Each sentence gets the ids it gets alone (`tests/serving/test_inflight.py`):
its row is its own, whatever joins or leaves beside it. A sampled sentence
draws its noise as `sample` does for its request (`stream_text.sampling_noise`),
so a seed gives the draws it gives there.

It serves a run directory's `Translator` (the XLA engine): it needs the
model's decoder step. The other signatures (`nbest`, `score`) go to
`fallback`, a `DynamicBatcher`.

Example:

>>> batcher = InflightBatcher(open_translator("saved_models/multi30k-en-de"), fallback)  # doctest: +SKIP
>>> batcher.submit(("greedy", ()), {"sentences": [b"A dog runs."]}).result()["translations"]  # doctest: +SKIP
array([b'Ein Hund l\\xc3\\xa4uft.'], dtype=object)
"""

import collections
import concurrent.futures
import dataclasses
import os
import queue
import threading

import numpy as np
import tensorflow as tf

from keras_transformer import decoding
from keras_transformer.decoding.row_pool import MIN_WIDTH, SEGMENT_STEPS, RowPool, why_not_in_rows
from keras_transformer.serving.batching import QueueFull
from keras_transformer.translators.controls import Controls
from keras_transformer.translators.stream_text import sampling_noise, starts_word_of, text_of
from keras_transformer.translators.streaming import WordCutter

# signature -> the search its rows join (`sample`'s pools: one per temperature, top-k and top-p)
SEARCHES = {
    "serving_default": "best",
    "with_controls": "best",
    "greedy": "greedy",
    "greedy_with_controls": "greedy",
    "sample": "sample",
}
CONTROLS = ("source_lang", "target_lang", "target_prefix")
WARMED_WIDTHS = (MIN_WIDTH,)  # source widths `warm_up` compiles: sentences of up to 64 tokens
POLL_S = 0.05  # how often a quiet stream checks its `cancel`


def _claimed(future):
    """Whether the worker may answer `future` now: not answered yet, nor cancelled (then no one waits for it).

    A pending future can be cancelled (the server's timeout does it) until
    this moves it to running, atomically; after that `cancel` does nothing.
    """
    return not future.done() and future.set_running_or_notify_cancel()


@dataclasses.dataclass(eq=False)
class _Job:
    """A request's sentences, decoded in the pool of `key`, answered once every row is done."""

    key: tuple  # ("best" | "greedy", ()) or ("sample", (temperature, top_k, top_p))
    sentences: list  # bytes
    controls: dict  # name -> list of bytes ("" for the default)
    seed: int = -1
    future: concurrent.futures.Future = None  # a `submit`
    stream: queue.Queue = None  # a `stream_pieces`: ("ids", ids), then ("end", text, finished) or ("error", error)
    cancelled: bool = False
    noise: object = None
    results: list = None
    left: int = 0

    def __post_init__(self):
        self.results, self.left = [None] * len(self.sentences), len(self.sentences)

    @property
    def gone(self):
        return self.cancelled or (self.future is not None and self.future.cancelled())


class InflightBatcher:
    """`DynamicBatcher`'s interface (`submit`, `close`) over `RowPool`s, and streams (see the module docstring).

    Args:
        translator: a run directory's XLA `Translator` (`engines.xla`).
        fallback: a `DynamicBatcher` for the signatures that do not decode
            in rows (`nbest`, `score`); None: those are refused.
        max_rows: rows of each pool at most (the sentences decoded at once).
        min_rows: rows of each pool at least.
        segment_steps: decoder steps between two chances to join or leave.
        max_queue: sentences waiting at most before `submit` raises `QueueFull`.
    """

    def __init__(
        self, translator, fallback=None, *, max_rows=32, min_rows=1, segment_steps=SEGMENT_STEPS, max_queue=256
    ):
        self.translator, self.fallback = translator, fallback
        settings = translator.search_settings
        model, search, options, self.length = settings.model, settings.search, settings.options, settings.max_length
        refusal = why_not_in_rows(model)
        if refusal:
            raise ValueError(f"In-flight batching cannot decode this model: {refusal}")
        self._searches = {
            "best": search,
            "greedy": decoding.search_for(1, search.alpha, **options),
            "sample": decoding.search_for(None, search.alpha, temperature=1.0, **options),
        }
        self._model, self._jit_compile = model, settings.jit_compile
        self.pool_options = dict(max_rows=max_rows, min_rows=min_rows, segment_steps=segment_steps)
        self.max_queue = max_queue
        self.pools = {}  # key -> RowPool, made by the worker thread
        self.segments, self.sentences = collections.Counter(), 0  # rows a segment ran -> segments; sentences done
        self.admissions = collections.Counter()  # sentences that joined at once -> times
        self._starts_word = None
        self._pending = collections.deque()  # (job, row) not in a pool yet
        self._jobs = set()  # jobs with a row in a pool
        self._condition = threading.Condition()
        self._closing = False
        self._worker = threading.Thread(target=self._work, name="inflight", daemon=True)
        self._worker.start()

    # -- what the server calls

    def handles(self, signature):
        """Whether `signature`'s requests decode in rows here (else in `fallback`)."""
        return signature in SEARCHES

    def submit(self, key, inputs):
        """A `Future` of the outputs (`translations`, `scores`, `finished`) of the request `(signature, scalars)`."""
        signature, scalars = key
        if not self.handles(signature):
            if self.fallback is None:
                raise ValueError(f"Signature {signature!r} is not decoded in rows")
            return self.fallback.submit(key, inputs)
        scalars = dict(scalars)
        controls = {name: inputs[name] for name in CONTROLS if name in inputs}
        key = self._key(SEARCHES[signature], scalars)
        job = _Job(key, list(inputs["sentences"]), controls, scalars.get("seed", -1))
        job.future = concurrent.futures.Future()  # pending until answered: the server's timeout can cancel it
        self._enqueue(job)
        return job.future

    def stream_pieces(
        self, sentence, search="best", *, temperature=1.0, top_k=0, top_p=1.0, seed=-1, cancel=None, **controls
    ):
        """`TranslatorInterface.stream_pieces` of one `sentence` (a str), decoded in a pool's row.

        Greedy search and sampling give each word once the next begins; beam
        search gives the whole text once, at the end.
        """
        scalars = dict(temperature=temperature, top_k=top_k, top_p=top_p)
        controls = {name: [(value or "").encode("utf-8")] for name, value in controls.items() if name in CONTROLS}
        job = _Job(self._key(search, scalars), [sentence.encode("utf-8")], controls, seed, stream=queue.Queue())
        self._enqueue(job)
        return self._pieces(job, cancel)

    def close(self):
        """Answers every request already submitted, then stops the worker (and `fallback`)."""
        with self._condition:
            self._closing = True
            self._condition.notify_all()
        self._worker.join()
        if self.fallback is not None:
            self.fallback.close()

    @property
    def batch_sizes(self):
        """Sentences per admission (one tokenization and encoder call) -> admissions, and `fallback`'s batches."""
        sizes = collections.Counter(self.admissions)
        if self.fallback is not None:
            sizes.update(self.fallback.batch_sizes)
        return sizes

    def warm_up(self, widths=WARMED_WIDTHS, searches=("best", "greedy"), workers=None):
        """Compiles the pools of `searches` (the translator's own, greedy): each row count, each width.

        Each power-of-two row count up to `max_rows` at each source width of
        `widths` (rounded up as the pools round them): one segment program
        each, `workers` side by side (default one per CPU core, at most 4);
        and the encoder, traced once. Returns how many programs were compiled.
        """
        pools = [self._pool(key) for key in sorted({self._key(search, {}) for search in searches})]
        counts = [1 << n for n in range(self.pool_options["max_rows"].bit_length() + 1)]
        shapes = sorted({pools[0].shape_for(count, width) for count in counts for width in widths})
        jobs = [(pool, *shape) for pool in pools for shape in shapes]
        longest = int(self.translator.max_source_length.numpy())  # a pool is wider than the sources it holds
        pools[0].compile_encoder(1, min(shapes[0][1], longest))  # one graph for every shape: traced once
        workers = workers or min(os.cpu_count() or 1, 4)
        with concurrent.futures.ThreadPoolExecutor(workers) as executor:
            list(executor.map(lambda job: job[0].compile(*job[1:]), jobs))
        return len(jobs)

    def summary(self):
        """One line on what was decoded: sentences, segments, rows per segment."""
        segments = sum(self.segments.values())
        rows = sum(size * count for size, count in self.segments.items())
        mean = rows / segments if segments else 0.0
        steps = self.pool_options["segment_steps"]
        return f"{self.sentences} sentences in {segments} segments of up to {steps} steps, {mean:.1f} rows a segment"

    # -- the worker

    def _key(self, search, scalars):
        if search == "sample":
            return ("sample", (float(scalars["temperature"]), int(scalars["top_k"]), float(scalars["top_p"])))
        return ("greedy" if self._searches["best"].beam_size == 1 else search, ())

    def _enqueue(self, job):
        with self._condition:
            if self._closing:
                raise QueueFull("the server is shutting down")
            if len(self._pending) + len(job.sentences) > self.max_queue:
                raise QueueFull(f"the queue holds {len(self._pending)} sentences already")
            self._pending.extend((job, row) for row in range(len(job.sentences)))
            self._condition.notify_all()

    def _work(self):
        while True:
            with self._condition:
                while not self._pending and not self._jobs and not self._closing:
                    self._condition.wait()
                if self._closing and not self._pending and not self._jobs:
                    return
                joining = self._joining()
            for key, rows in joining.items():
                self._admit(key, rows)
            self._drop_gone()
            for key, pool in list(self.pools.items()):
                if pool.occupied:
                    self.segments[pool.occupied] += 1
                    try:
                        self._deliver(pool.advance())
                    except Exception as error:  # noqa: BLE001  (its requests fail; a new pool serves the next)
                        for job in {ticket[0] for ticket in pool.tickets if ticket is not None}:
                            self._fail(job, error)
                        del self.pools[key]

    def _joining(self):
        """`{key: [(job, row), ...]}`: the waiting rows that fit their pools now, taken from the queue."""
        free = {}
        joining = collections.defaultdict(list)
        kept = collections.deque()
        for job, row in self._pending:
            if job.gone:
                continue
            if job.key not in free:
                free[job.key] = self._pool(job.key).free
            if free[job.key] > 0:
                free[job.key] -= 1
                joining[job.key].append((job, row))
                self._jobs.add(job)
            else:
                kept.append((job, row))
        self._pending = kept
        return joining

    def _pool(self, key):
        if key not in self.pools:
            search, numbers = key
            settings = {}
            if search == "sample":
                temperature, top_k, top_p = numbers
                settings = dict(temperature=tf.constant(temperature), top_k=tf.constant(top_k))
                settings.update(top_p=tf.constant(top_p))
            self.pools[key] = RowPool(
                self._model,
                self._searches[search],
                self.length,
                settings=settings,
                jit_compile=self._jit_compile,
                **self.pool_options,
            )
        return self.pools[key]

    def _admit(self, key, rows):
        """Puts `rows` into their pool: one tokenization and one encoder call for all of them."""
        translator = self.translator
        try:
            sentences = tf.constant([job.sentences[row] for job, row in rows], tf.string)
            controls = Controls(  # as a graph reads them: "" the default (`Controls.filled`)
                **{
                    name: tf.constant([job.controls.get(name, [b""] * len(job.sentences))[row] for job, row in rows])
                    for name in CONTROLS
                }
            )
            source_ids, prefix = translator.search_inputs(sentences, controls)
            inputs = ()
            if key[0] == "sample":
                inputs = (tf.stack([self._noise(job)[row] for job, row in rows]),)
            self.pools[key].add(source_ids, rows, *inputs, prefix=prefix)
            self.admissions[len(rows)] += 1
        except Exception as error:  # noqa: BLE001  (a row that cannot join fails its own request)
            if len(rows) > 1:  # one at a time, so that one bad row fails only its request
                for row in rows:
                    self._admit(key, [row])
                return
            self._fail(rows[0][0], error)

    def _noise(self, job):
        """The job's sampling noise: `sample`'s draws for its request (its rows bucketed to a power of two)."""
        if job.noise is None:
            rows = 1 << max(len(job.sentences) - 1, 0).bit_length()
            job.noise = sampling_noise(rows, self.length, job.seed)
        return job.noise

    def _deliver(self, updates):
        """Streams their ids; rows done: detokenized together, their requests answered once complete."""
        done = []
        for update in updates:
            job, row = update.ticket
            if job.stream is not None and update.ids:
                job.stream.put(("ids", update.ids))
            if update.result is not None:
                done.append(update)
        if not done:
            return
        ids = tf.constant(np.stack([update.result.ids[0] for update in done]), tf.int32)
        texts = self.translator.detokenize(ids).numpy()
        for update, text in zip(done, texts):
            job, row = update.ticket
            job.results[row] = (text, update.result.scores[0], update.result.finished[0])
            job.left -= 1
            self.sentences += 1
            if not job.left:
                self._complete(job)

    def _complete(self, job):
        with self._condition:
            self._jobs.discard(job)
        if job.stream is not None:
            text, _, finished = job.results[0]
            job.stream.put(("end", text.decode("utf-8", errors="replace"), bool(finished)))
            return
        texts, scores, finished = zip(*job.results)
        outputs = {
            "translations": np.array(texts, dtype=object),
            "scores": np.array(scores, np.float32),
            "finished": np.array(finished, bool),
        }
        if _claimed(job.future):
            job.future.set_result(outputs)

    def _fail(self, job, error):
        with self._condition:
            self._jobs.discard(job)
            self._pending = collections.deque(item for item in self._pending if item[0] is not job)
        job.cancelled = True
        if job.stream is not None:
            job.stream.put(("error", error))
        elif _claimed(job.future):
            job.future.set_exception(error)

    def _drop_gone(self):
        """Rows of requests that timed out, streams whose client left: out of their pools."""
        gone = [job for job in list(self._jobs) if job.gone]
        for job in gone:
            for pool in self.pools.values():
                pool.remove([(job, row) for row in range(len(job.sentences))])
            with self._condition:
                self._jobs.discard(job)

    # -- streams

    def _pieces(self, job, cancel):
        """The job's `Piece`s, cut into words here (in the stream's own thread) from the ids the worker hands over."""
        if self._starts_word is None:
            self._starts_word = starts_word_of(self.translator)
        cutter = WordCutter(lambda ids: text_of(self.translator, self.length, ids), self._starts_word)
        end = self.translator.target_end_id
        while True:
            if cancel is not None and cancel.is_set():
                job.cancelled = True
                yield cutter.finish(cutter.text, "cancelled")
                return
            try:
                item = job.stream.get(timeout=POLL_S)
            except queue.Empty:
                continue
            if item[0] == "error":
                raise item[1]
            if item[0] == "end":
                yield cutter.finish(item[1], "end" if item[2] else "length")
                return
            for token in item[1]:
                if token != end:  # END has no text (`finish` gives what is left)
                    piece = cutter.add(token)
                    if piece is not None:
                        yield piece
