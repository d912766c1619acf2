"""In-flight batching's decoder: a pool of row slots that sources join and leave between segments of steps.

A compiled search (`compile_search`) decodes a batch from its first step to
its last: a source that arrives meanwhile waits for the whole batch, and a
source that is done keeps its row until the longest one ends. `RowPool`
holds a fixed number of row slots instead, each an independent source: its
own encoder output (cross-attention keys and values, encoded when it joins),
its own position (`row_search.RowSearch`: the search with a step index per
row) and its own entries of the self-attention cache. `add` puts sources into
free slots; `advance` runs one segment (`segment_steps` steps, one XLA
program) of every row in the pool and returns what each row generated and,
for the rows that are done, their results, which then leave the pool.

Rows at different positions share one self-attention cache laid out on a
timeline: step `t` of the pool writes every row's keys and values at slot
`t`, and a row attends the slots from the one it joined at to `t` (a mask per
row; the model's positions are the row's own, so the slots' order changes
nothing but float rounding). When the timeline is full the slots are moved
back to the start (`slots` = `max_length` plus a quarter of it, so this
happens once every `max_length / 4` steps or so).

Shapes stay static: a pool has a power-of-two number of slots (from
`min_rows` to `max_rows`) and a power-of-two source width (`MIN_WIDTH`, 64,
and more for longer sources), grown when sources join and shrunk when most
are unused, so XLA compiles one segment program per (rows, width) pair; the
encoder is one TensorFlow graph for every shape (XLA's, one program per
shape, with `encoder_jit_compile`). One model (no ensemble) of
`build_transformer`.

Example:

>>> pool = RowPool(model, GreedySearch(alpha=0.0), max_length=8)
>>> pool.add(tf.constant([[5, 6, 7, 0]]), ["first"])
>>> results = {}
>>> while pool.occupied:
...     results.update({u.ticket: u.result for u in pool.advance() if u.result is not None})
>>> results["first"].ids.shape  # (beams, max_length), as `decode(...).ids[0]`
(1, 8)
"""

import dataclasses
import logging

import tensorflow as tf
from keras import ops

from keras_transformer.decoding.cache import _ancestry_mask, check_source_ids
from keras_transformer.decoding.greedy_search import GreedySearch  # noqa: F401  (the example)
from keras_transformer.decoding.model_search import MIN_STEP_ROWS, empty_sources, resolve_max_length
from keras_transformer.decoding.row_search import RowSearch
from keras_transformer.decoding.search import SearchResult
from keras_transformer.models import as_transformer, is_decoder_only

SEGMENT_STEPS = 4  # steps between two chances to join or leave
MIN_WIDTH = 64  # the narrowest source width of a pool (widths are powers of two): one for most sentences


@dataclasses.dataclass(frozen=True)
class RowUpdate:
    """What one source's row did in a segment: the ids it generated, and its result once it is done.

    `result` is a `SearchResult` of NumPy arrays, ids `(beams, max_length)`,
    scores and finished `(beams,)` (one source's part of `decode`'s result).
    """

    ticket: object
    ids: tuple
    result: SearchResult = None


def why_not_in_rows(model):
    """Why `model` cannot decode in a `RowPool`, in a few words; `""` where it can.

    T5's relative position bias decodes in rows: a row's positions and its
    slots on the timeline differ by one offset, so their distances agree.
    """
    model = as_transformer(model)
    if is_decoder_only(model):
        return "a decoder-only model has no source to join"
    return ""


class RowPool:
    """Sources decoded side by side, each joining and leaving on its own (see the module docstring).

    Args:
        model: a model from `build_transformer`.
        search: a `GreedySearch`, `SamplingSearch` or `BeamSearch` (ids left
            None are the model's).
        max_length: tokens a source generates at most (default the model's).
        max_rows: slots at most; `add` refuses more sources than `free`.
        min_rows: slots at least (the pool never shrinks below); greedy
            search and sampling keep two at least, as one row steps slower.
        segment_steps: steps of each `advance`.
        min_width: the narrowest source width of the pool (a power of two).
        settings: fields of the search given as tensors at every segment
            (sampling's `temperature`, `top_k`, `top_p`; a `ban_mask`): one
            program for every value.
        jit_compile: compile the segments with XLA.
        encoder_jit_compile: compile the encoder with XLA, one program per
            shape of the sources that join; by default it runs as one
            TensorFlow graph for every shape (nothing to compile).
    """

    def __init__(
        self,
        model,
        search,
        max_length=None,
        *,
        max_rows=32,
        min_rows=1,
        segment_steps=SEGMENT_STEPS,
        min_width=MIN_WIDTH,
        settings=None,
        jit_compile=True,
        encoder_jit_compile=False,
    ):
        model = as_transformer(model)
        refusal = why_not_in_rows(model)
        if refusal:
            raise ValueError(f"`RowPool` cannot decode this model: {refusal}")
        counts = (("max_rows", max_rows), ("min_rows", min_rows), ("segment_steps", segment_steps))
        for name, value in (*counts, ("min_width", min_width)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"`{name}` must be a positive int. Received: {name}={value!r}")
        if min_rows > max_rows:
            raise ValueError(f"`min_rows` must be at most `max_rows`. Received: {min_rows} > {max_rows}")
        self.model = model
        self.max_length = resolve_max_length(model, max_length)
        self.search = RowSearch(search.with_ids(**model.config.special_ids()), self.max_length)
        self.beams = self.search.beams
        # A pool of one hypothesis per source steps two rows at least (`model_search.MIN_STEP_ROWS`).
        min_rows = min(max(min_rows, -(-MIN_STEP_ROWS // self.beams)), max_rows)
        self.max_rows, self.min_rows, self.segment_steps = max_rows, min_rows, segment_steps
        self.min_width = _bucket(min_width, 1)
        self.slots = self.max_length + max(segment_steps, -(-self.max_length // 4))
        self.settings = dict(settings or {})
        self.traces = 0  # how many times the encoder or a segment was traced (each a new shape)
        ids = [tf.TensorSpec([None, None], tf.int32)]
        self._encode = tf.function(
            self._encode_fn, input_signature=ids, jit_compile=encoder_jit_compile, autograph=False
        )
        self._segment = tf.function(self._segment_fn, jit_compile=jit_compile, autograph=False)
        self.t = 0  # the timeline slot of the next step
        self.tickets, self.joined, self.widths, self.positions = [], [], [], []  # per slot (Python)
        self.state = None
        self._resized(min_rows)

    # -- what callers read

    @property
    def rows(self):
        """The slots of the pool now (a power of two)."""
        return len(self.tickets)

    @property
    def width(self):
        """The source width of the pool now (a power of two)."""
        return int(self.state["mask"].shape[1])

    @property
    def occupied(self):
        """How many sources are in the pool."""
        return sum(ticket is not None for ticket in self.tickets)

    @property
    def free(self):
        """How many more sources `add` takes now."""
        return self.max_rows - self.occupied

    # -- joining and leaving

    def add(self, source_ids, tickets, *inputs, prefix=None):
        """Puts the first `len(tickets)` rows of `source_ids` into free slots; they step from the next `advance`.

        Args:
            source_ids: int `(batch, width)`, 0-padded (more rows than
                tickets may be given: a bucketed batch, its extra rows unused).
            tickets: one hashable per source, returned with its updates.
            *inputs: the search's per-source inputs (sampling's noise
                `(batch, max_length)`).
            prefix: int `(batch, length)`, each output's forced first
                tokens (-1 where free), as `decode`'s.
        """
        count = len(tickets)
        if count > self.free:
            raise ValueError(f"The pool has {self.free} free slots; {count} sources were added")
        if not count:
            return
        source_ids = check_source_ids(source_ids)
        cross, mask = self._encode(source_ids)
        source_width = int(source_ids.shape[1])
        new = {
            "positions": tf.zeros([count], tf.int32),
            "rows": self.search.initial_rows(
                count,
                empty_sources(source_ids[:count], self.model.config.pad_id),
                *(x[:count] for x in inputs),
                prefix=None if prefix is None else prefix[:count],
            ),
            "cross": tf.nest.map_structure(lambda x: x[:count], cross),
            "mask": mask[:count],
            "join": tf.fill([count], self.t),
        }
        self._make_room(self.occupied + count, max([source_width, *self._occupied_widths()]))
        new["cross"], new["mask"] = _padded_memory(new["cross"], new["mask"], self.width)
        free = [slot for slot, ticket in enumerate(self.tickets) if ticket is None][:count]
        self.state = {**self.state, **_scattered({k: self.state[k] for k in new}, free, new)}
        for slot, ticket in zip(free, tickets):
            self.tickets[slot], self.joined[slot] = ticket, self.t
            self.widths[slot], self.positions[slot] = source_width, 0

    def advance(self):
        """One segment of steps for every source in the pool; a `RowUpdate` per source, done ones removed."""
        occupied = [slot for slot, ticket in enumerate(self.tickets) if ticket is not None]
        if not occupied:
            self.t = 0
            return []
        if self.t + self.segment_steps > self.slots:
            self._rebase(min(self.joined[slot] for slot in occupied))
        s = self.state
        steps, positions, rows, caches, ancestry, report = self._segment(
            tf.constant(self.t, tf.int32), s["positions"], s["rows"], s["caches"], s["ancestry"],
            (s["cross"], s["mask"]), s["join"], self.settings,
        )  # fmt: skip
        self.state = {**s, "positions": positions, "rows": rows, "caches": caches, "ancestry": ancestry}
        self.t += int(steps)
        new_positions, done = ops.convert_to_numpy(report)
        ids = ops.convert_to_numpy(rows[0]) if self.beams == 1 else None
        leaving = [slot for slot in occupied if done[slot]]
        results = self._results(leaving, positions, rows)
        updates = []
        for slot in occupied:
            start, stop = self.positions[slot], int(new_positions[slot])
            generated = tuple(int(i) for i in ids[slot, start + 1 : stop + 1]) if ids is not None else ()
            updates.append(RowUpdate(self.tickets[slot], generated, results.get(slot)))
            self.positions[slot] = stop
        for slot in leaving:
            self.tickets[slot] = None
        self._make_room(self.occupied, max(self._occupied_widths(), default=1))
        return updates

    def remove(self, tickets):
        """Takes the sources of `tickets` out of the pool (cancelled), without results."""
        gone = set(tickets)
        for slot, ticket in enumerate(self.tickets):
            if ticket is not None and ticket in gone:
                self.tickets[slot] = None
                self.state = {**self.state, **_scattered(
                    {"positions": self.state["positions"]}, [slot], {"positions": tf.constant([self.max_length])}
                )}  # fmt: skip

    def shape_for(self, count, width):
        """`(rows, width)`: the pool's shape for `count` sources at most `width` tokens long."""
        return _bucket(count, self.min_rows, self.max_rows), _bucket(width, self.min_width)

    def compile(self, rows, width):
        """Compiles the segment program of `rows` slots and source width `width` (a warm-up: nothing decoded).

        A warm-up traces one shape after another on purpose: TensorFlow's
        warning of frequent retracing is left out while it does.
        """
        state = self._vacant(*self.shape_for(rows, width))
        memory = (state["cross"], state["mask"])
        logger, quiet = logging.getLogger("tensorflow"), _WarmUpTraces()
        logger.addFilter(quiet)
        try:
            self._segment(
                tf.constant(0, tf.int32), state["positions"], state["rows"], state["caches"], state["ancestry"],
                memory, state["join"], self.settings,
            )  # fmt: skip
        finally:
            logger.removeFilter(quiet)

    def compile_encoder(self, rows, width):
        """Compiles the encoder for `rows` sources `width` tokens wide (a warm-up)."""
        self._encode(tf.zeros([rows, width], tf.int32))

    # -- the compiled parts

    def _encode_fn(self, source_ids):
        self.traces += 1
        model = self.model
        return model.cross_attention_caches(model.encode(source_ids)), model.source_padding_mask(source_ids)

    def _segment_fn(self, t, positions, rows, caches, ancestry, memory, join, settings):
        self.traces += 1
        search = self.search.replace(**settings) if settings else self.search

        def cond(i, t, positions, rows, caches, ancestry):
            return ops.logical_and(i < self.segment_steps, ops.any(ops.logical_not(search.done(positions, rows))))

        def body(i, t, positions, rows, caches, ancestry):
            active = ops.logical_not(search.done(positions, rows))
            step_positions = search.step_positions(positions)
            logits, caches, ancestry = self._step(
                search.tokens(positions, rows), step_positions, t, caches, ancestry, memory, join
            )
            processed = search.search.processed(
                logits, step_positions[:, None], self.max_length, search.forced(positions, rows)
            )
            rows, parents = search.update(positions, rows, processed, active)
            if parents is not None:  # the beams moved: so does their ancestry (the cache stays where it is)
                ancestry = ops.take_along_axis(ancestry, parents[:, :, None], axis=1)
            return i + 1, t + 1, ops.where(active, positions + 1, positions), rows, caches, ancestry

        start = (ops.convert_to_tensor(0, "int32"), t, positions, rows, caches, ancestry)
        steps, _, positions, rows, caches, ancestry = ops.while_loop(cond, body, start)
        report = ops.stack([positions, ops.cast(search.done(positions, rows), "int32")])
        return steps, positions, rows, caches, ancestry, report

    def _step(self, tokens, positions, t, caches, ancestry, memory, join):
        """The decoder step of every row at its own position, its keys and values written at slot `t`."""
        k = self.beams
        cross, source_mask = memory
        own_beam = ops.broadcast_to(ops.arange(k, dtype="int32")[None, :, None], (ops.shape(join)[0], k, 1))
        ancestry = ops.slice_update(ancestry, (0, 0, t), own_beam)
        slots = ops.arange(self.slots, dtype="int32")[None]
        in_row = ops.logical_and(slots >= join[:, None], slots <= t)  # (rows, slots): this row's entries
        if k > 1:
            mask = ops.logical_and(_ancestry_mask(ancestry, self.slots, k), ops.repeat(in_row, k, axis=1)[:, None])
        else:
            mask = in_row[:, None]
        logits, caches = self.model.decoder_step(
            ops.reshape(tokens, (-1, k)),
            positions,
            caches,
            cross,
            source_mask,
            cache_update_index=t * k,
            attention_mask=mask,
        )
        return ops.cast(ops.reshape(logits, (-1, ops.shape(logits)[-1])), "float32"), caches, ancestry

    # -- the pool's shape

    def _results(self, slots, positions, rows):
        """`{slot: SearchResult}` (NumPy, one source each) of the rows at `slots`."""
        if not slots:
            return {}
        take = tf.constant(slots, tf.int32)
        leaving = tf.nest.map_structure(lambda x: tf.gather(x, take), rows)
        result = self.search.finish(tf.gather(positions, take), leaving)
        ids, scores, finished = (ops.convert_to_numpy(x) for x in result)
        return {slot: SearchResult(ids[i], scores[i], finished[i]) for i, slot in enumerate(slots)}

    def _occupied_widths(self):
        return [width for width, ticket in zip(self.widths, self.tickets) if ticket is not None]

    def _make_room(self, count, width):
        """Slots for `count` sources and a source width of `width`: grown as needed, shrunk when mostly unused."""
        rows, width = self.shape_for(count, width)
        if rows > self.rows or rows * 4 <= self.rows or (not count and rows < self.rows):  # few copies
            self._resized(rows)
        if width > self.width or width * 4 <= self.width:
            cross, mask = _padded_memory(self.state["cross"], self.state["mask"], width)
            self.state = {**self.state, "cross": cross, "mask": mask}

    def _resized(self, rows):
        """The pool with `rows` slots: the occupied ones first when it shrinks, vacant ones added when it grows."""
        current = len(self.tickets)
        if rows < current:
            occupied = [slot for slot in range(current) if self.tickets[slot] is not None]
            take = (occupied + [slot for slot in range(current) if self.tickets[slot] is None])[:rows]
            self.state = tf.nest.map_structure(lambda x: tf.gather(x, take), self.state)
            for name in ("tickets", "joined", "widths", "positions"):
                setattr(self, name, [getattr(self, name)[slot] for slot in take])
        elif rows > current:
            extra = self._vacant(rows - current, self.width if current else self.min_width)
            if current:
                extra = tf.nest.map_structure(lambda x, y: tf.concat([x, y], 0), self.state, extra)
            self.state = extra
            self.tickets += [None] * (rows - current)
            self.joined += [0] * (rows - current)
            self.widths += [0] * (rows - current)
            self.positions += [self.max_length] * (rows - current)

    def _vacant(self, count, width):
        """The pool's tensors for `count` empty slots (done from the start) of source width `width`."""
        model, k = self.model, self.beams
        cross = tuple(
            tuple(tf.zeros([count, layer.num_heads, width, layer.d_model // layer.num_heads]) for _ in "kv")
            for layer in model.decoder_layers
        )
        noise = [tf.zeros([count, self.max_length])] if _takes_noise(self.search.search) else []
        return {
            "positions": tf.fill([count], self.max_length),
            "rows": self.search.initial_rows(count, tf.ones([count], tf.bool), *noise),
            "caches": model.empty_self_attention_caches(count, self.slots * k),
            "ancestry": tf.zeros([count, k, self.slots], tf.int32),
            "cross": tf.nest.map_structure(lambda x: tf.cast(x, model.compute_dtype), cross),
            "mask": tf.zeros([count, width], tf.bool),
            "join": tf.zeros([count], tf.int32),
        }

    def _rebase(self, first):
        """The timeline moved back by `first` slots (the earliest any source in the pool reads)."""
        k, shift = self.beams, first

        def move(x, axis, per_slot):
            cut = tf.gather(x, tf.range(shift * per_slot, x.shape[axis]), axis=axis)
            padding = [[0, 0]] * len(x.shape)
            padding[axis] = [0, shift * per_slot]
            return tf.pad(cut, padding)

        self.state = {
            **self.state,
            "caches": tf.nest.map_structure(lambda x: move(x, 2, k), self.state["caches"]),
            "ancestry": move(self.state["ancestry"], 2, 1),
            "join": tf.maximum(self.state["join"] - shift, 0),
        }
        self.t -= shift
        self.joined = [max(joined - shift, 0) for joined in self.joined]


def _takes_noise(search):
    """Whether the search's rows carry sampling's noise (`SamplingSearch`)."""
    return hasattr(search, "temperature")


def _bucket(count, smallest, largest=None):
    """The power of two that holds `count`, at least `smallest` (and at most `largest`)."""
    size = smallest
    while size < count:
        size *= 2
    return size if largest is None else min(size, largest)


def _padded_memory(cross, mask, width):
    """Cross-attention keys/values `(rows, heads, w, key_dim)` and the source mask `(rows, w)` at `width`."""
    current = int(mask.shape[1])
    if current >= width:
        return tf.nest.map_structure(lambda x: x[:, :, :width], cross), mask[:, :width]
    extra = width - current
    cross = tf.nest.map_structure(lambda x: tf.pad(x, [[0, 0], [0, 0], [0, extra], [0, 0]]), cross)
    return cross, tf.pad(mask, [[0, 0], [0, extra]])


def _scattered(state, slots, new):
    """`state`'s tensors with the rows of `new` written at `slots`."""
    index = tf.constant(slots, tf.int32)[:, None]
    return tf.nest.map_structure(lambda x, y: tf.tensor_scatter_nd_update(x, index, tf.cast(y, x.dtype)), state, new)


class _WarmUpTraces(logging.Filter):
    """Drops TensorFlow's warning that a function traced often: a warm-up traces each shape once, in turn."""

    def filter(self, record):
        return "triggered tf.function retracing" not in record.getMessage()
