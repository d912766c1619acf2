"""Decoding that drops finished sources from the batch as it goes (TensorFlow).

A search compiled as one XLA program has static shapes: it computes every
row of the batch until its last source is done, so a batch whose outputs
range from 5 to 40 tokens pays 40 steps for each row. `compacting` runs the
same `BoundSearch` (`model_search.bind`) in segments instead (every eighth
of `max_length` steps by default), each an XLA program, and between segments
keeps only the sources
that are not done: their rows of the search and of the cached state are
gathered into a smaller batch, rounded up to a power of two (at least
`MIN_ROWS`) so that few shapes compile. What a dropped source produced is
written back into the full-size outputs, so the result is the one-loop
result, row for row. The segments run inside TensorFlow's graph (a
`tf.function`, a SavedModel's signature): only the segments are XLA
programs, compiled once per (rows, cache length) shape.

Example:

>>> decode = compacting(decoding.bind(model, decoding.GreedySearch(), max_length=8))
>>> result = decode(tf.constant([[5, 6, 7, 0]]))
>>> result.ids.shape
TensorShape([1, 1, 8])
"""

import functools

import tensorflow as tf

from keras_transformer.decoding.search import phases

MIN_ROWS = 8  # a compacted batch keeps at least this many rows (fewer shapes to compile)
SEGMENTS = 8  # compaction points per decode: after every eighth of max_length


def compacting(bound, jit_compile=True, segments=SEGMENTS, min_rows=MIN_ROWS):
    """`decode(source_ids, *inputs, prefix=None)`: `bound`'s `SearchResult`, finished sources dropped between segments.

    Args:
        bound: a `BoundSearch` (`model_search.bind`): a search joined to a
            step; `inputs` go to its `start` (sampling's noise).
        jit_compile: compile the encoder and each segment with XLA.
        segments: the decode stops to compact the batch after every
            `max_length / segments` steps, and where its cache grows.
        min_rows: the smallest batch a compaction makes; a batch of at most
            this many sources runs as one loop, as `BoundSearch.run`.

    The returned function may be called eagerly or inside a `tf.function`;
    it returns what `bound.run(source_ids, *inputs)` returns, row for row.
    """
    if not isinstance(segments, int) or segments < 1:
        raise ValueError(f"`segments` must be a positive int. Received: segments={segments!r}")
    if not isinstance(min_rows, int) or min_rows < 1:
        raise ValueError(f"`min_rows` must be a positive int. Received: min_rows={min_rows!r}")
    return _CompactingDecode(bound, jit_compile, segments, min_rows)


class _CompactingDecode:
    """`compacting`'s function: one loop for a small batch, else segments with compaction between them."""

    def __init__(self, bound, jit_compile, segments, min_rows):
        self.search, self.step = bound.search, bound.step
        self.min_rows, self.jit_compile = min_rows, jit_compile
        self.plan = segment_plan(bound.max_length, bound.step.resize_state, segments)
        self.resize_state = bound.step.resize_state or (lambda state, length: state)
        self.init = tf.function(bound.start, jit_compile=jit_compile, autograph=False)
        self.whole = tf.function(bound.run, jit_compile=jit_compile, autograph=False)
        self.segments = {}

    def __call__(self, source_ids, *inputs, prefix=None):
        source_ids = tf.convert_to_tensor(source_ids)
        return tf.cond(
            tf.shape(source_ids)[0] > self.min_rows,
            lambda: self._compacted(source_ids, *inputs, prefix=prefix),
            lambda: self.whole(source_ids, *inputs, prefix=prefix),
        )

    def _compacted(self, source_ids, *inputs, prefix=None):
        rows, state = self.init(source_ids, *inputs, prefix=prefix)
        batch = tf.shape(tf.nest.flatten(rows)[0])[0]
        results = tf.nest.map_structure(lambda x: tf.concat([x, x[:1]], 0), rows)  # + one spare row
        index, results = self._run(tf.constant(0, tf.int32), rows, state, tf.range(batch), results, self.plan)
        return self.search.finish(index, tf.nest.map_structure(lambda x: x[:batch], results))

    def _run(self, index, rows, state, origin, results, plan):
        """The segments of `plan`; the rows' results written into `results` at `origin` after each."""
        (length, stop), rest = plan[0], plan[1:]
        # Resized here, so that every call of a segment of this length gets the same static shapes.
        state = self.resize_state(state, length)
        index, rows, state = self._segment(length, index, rows, state, tf.constant(stop, tf.int32))
        results = _scatter(results, origin, rows)
        if not rest:
            return index, results
        alive = tf.logical_not(self.search.done(rows))

        def go_on():
            take, kept = _compaction(alive, origin, _spare_row(results), self.min_rows)
            rows_left, state_left = tf.nest.map_structure(lambda x: tf.gather(x, take), (rows, state))
            return self._run(index, rows_left, state_left, kept, results, rest)

        return tf.cond(tf.reduce_any(alive), go_on, lambda: (index, results))

    def _segment(self, length, index, rows, state, stop):
        """The steps up to `stop` with a cache of `length`: one function per length for any number of rows."""
        signature = [_spec(x) for x in (index, rows, state, stop)]
        key = (length, tuple(tf.nest.flatten(signature)))
        if key not in self.segments:
            self.segments[key] = tf.function(
                functools.partial(self.search.steps, self.step),
                input_signature=signature,
                jit_compile=self.jit_compile,
                autograph=False,
            )
        return self.segments[key](index, rows, state, stop)


def segment_plan(max_length, resize_state=None, segments=SEGMENTS):
    """`[(cache length, stop step), ...]`: where the decode stops to compact, and its cache then.

    The decode stops after every `max_length / segments` steps (rounded up)
    and wherever its cache grows (`search.phases`); each segment runs with
    the cache of the first phase that holds its last step.

    >>> segment_plan(64, resize_state=lambda state, length: state)
    [(16, 8), (16, 16), (32, 24), (32, 32), (64, 40), (64, 48), (64, 56), (64, 64)]
    """
    lengths = phases(max_length, resize_state)
    size = -(-max_length // segments)
    stops = sorted({min(stop, max_length) for stop in range(size, max_length + size, size)} | set(lengths))
    return [(next(length for length in lengths if length >= stop), stop) for stop in stops]


def _spec(structure):
    """The `tf.TensorSpec`s of `structure`, with any number of rows (axis 0)."""

    def spec(x):
        shape = x.shape if x.shape.rank == 0 else [None, *x.shape[1:]]
        return tf.TensorSpec(shape, x.dtype)

    return tf.nest.map_structure(spec, structure)


def _compaction(alive, origin, spare, min_rows):
    """`(take, kept_origin)`: the rows to keep (alive first, done ones as filler) and where each came from.

    The batch shrinks to the next power of two that holds the alive rows (at
    least `min_rows`, at most its size); filler rows are done rows, whose
    results go to the `spare` row.
    """
    keep = tf.cast(tf.where(alive)[:, 0], tf.int32)
    filler = tf.cast(tf.where(tf.logical_not(alive))[:, 0], tf.int32)
    count = tf.size(keep)
    rows = tf.minimum(tf.maximum(_next_power_of_two(count), min_rows), tf.size(alive))
    take = tf.concat([keep, filler], 0)[:rows]
    kept = tf.concat([tf.gather(origin, keep), tf.fill(tf.shape(filler), spare)], 0)[:rows]
    return take, kept


def _next_power_of_two(count):
    """The smallest power of two >= `count` (1 for 0)."""
    exponent = tf.round(tf.math.log(tf.cast(tf.maximum(count, 1), tf.float32)) / tf.math.log(2.0))
    power = tf.cast(2.0**exponent, tf.int32)
    return tf.where(power < count, 2 * power, power)


def _spare_row(results):
    return tf.shape(tf.nest.flatten(results)[0])[0] - 1


def _scatter(results, origin, rows):
    """`results` (full size) with the rows of `rows` written at `origin`."""
    indices = origin[:, None]
    return tf.nest.map_structure(lambda full, part: tf.tensor_scatter_nd_update(full, indices, part), results, rows)
