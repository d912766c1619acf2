"""Compacting decoding drops finished sources between segments and returns the one-loop result, row for row."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import ops

from keras_transformer import build_transformer, decoding
from keras_transformer.decoding import compaction

MAX_LENGTH = 24
# Sources of several lengths, one empty; each row's output is forced to end after `LENGTHS[row]` tokens.
SOURCES = np.array(
    [[5, 6, 7, 8, 9, 10], [11, 12, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0], [13, 14, 15, 0, 0, 0], [16, 17, 18, 19, 0, 0]]
    + [[20 + i, 21 + i, 0, 0, 0, 0] for i in range(7)],
    "int32",
)
LENGTHS = np.array([3, 24, 1, 9, 5, 17, 2, 30, 6, 11, 4, 20], "int32")  # 30: cut off at MAX_LENGTH


@pytest.fixture(scope="module")
def model():
    keras.utils.set_random_seed(3)
    return build_transformer(64, 64, num_layers=2, d_model=32, num_heads=4, d_ff=64, max_length=MAX_LENGTH)


def forced_lengths_decoder(model, method, beam_size=1):
    """A `BoundSearch` over `model`'s real cached step whose outputs end after a given number of tokens per source.

    The step adds a large bonus to END's logit from the row's length on and
    a large malus before it, so the sources finish at very different steps
    while the cache, the ancestry and the encoder memory are the model's.
    """
    step = decoding.cached_step(model, beam_size)

    def step_fn(tokens, index, state):
        inner, lengths = state
        logits, inner = step(tokens, index, inner)
        rows = ops.repeat(lengths, beam_size, axis=0)
        bonus = ops.where(index + 1 >= rows, 1e4, -1e4)
        end = ops.cast(ops.equal(ops.arange(ops.shape(logits)[-1]), decoding.END_ID), "float32")
        return logits + ops.cast(bonus, "float32")[:, None] * end[None], (inner, lengths)

    def resize_state(state, length):
        return decoding.resize_cache(state[0], length), state[1]

    def reorder_state(state, parents):
        return decoding.reorder_beams(state[0], parents), state[1]

    if method == "beam":
        search = decoding.BeamSearch(beam_size, alpha=0.6)
    elif method == "sample":
        search = decoding.SamplingSearch(0.9, 0, 0.95, alpha=0.0)
    else:
        search = decoding.GreedySearch(alpha=0.0)

    def init(search, source_ids, lengths, *extras, prefix=None):
        source_ids = ops.cast(source_ids, "int32")
        batch = ops.shape(source_ids)[0]
        empty = ops.logical_not(ops.any(ops.not_equal(source_ids, 0), axis=1))
        rows = search.initial_rows(batch, MAX_LENGTH, empty, *extras, prefix=prefix)
        return rows, (decoding.initial_state(model, source_ids, MAX_LENGTH, beam_size), lengths)

    steps = decoding.Step(step_fn, resize_state, reorder_state)
    return decoding.BoundSearch(search.with_ids(), steps, init, MAX_LENGTH)  # the package's ids, as `bind` gives


def _numpy(outputs):
    return [ops.convert_to_numpy(x) for x in outputs]


def _assert_same(expected, actual):
    for one_loop, compacted in zip(_numpy(expected), _numpy(actual)):
        if one_loop.dtype.kind == "f":
            np.testing.assert_allclose(compacted, one_loop, atol=1e-5)
        else:
            np.testing.assert_array_equal(compacted, one_loop)


# Beam search row for row with the long checks: `test_compile_decoder_compacts_...` compacts a beam of 3 by default.
@pytest.mark.parametrize(
    "method, beam_size",
    [("greedy", 1), pytest.param("beam", 3, marks=pytest.mark.slow), pytest.param("sample", 1, marks=pytest.mark.slow)],
)
def test_compacting_returns_the_one_loop_result_row_for_row(model, method, beam_size):
    parts = forced_lengths_decoder(model, method, beam_size)
    inputs = (tf.constant(LENGTHS),)
    if method == "sample":
        inputs += (tf.random.stateless_uniform((len(SOURCES), MAX_LENGTH), (1, 2)),)
    # Without XLA (its compiles are slow; `test_compile_decoder_compacts_...` has them): the same graph.
    one_loop = tf.function(lambda *args: parts.run(*args))(SOURCES, *inputs)
    # Six segments, down to two rows: the batch of 12 shrinks to 8, 4, then 2 rows as its sources end.
    compacted = tf.function(compaction.compacting(parts, jit_compile=False, segments=6, min_rows=2))(SOURCES, *inputs)
    _assert_same(one_loop, compacted)

    ids, finished = _numpy(compacted)[0], _numpy(compacted)[-1]
    best = ids if ids.ndim == 2 else ids[:, 0]
    lengths = (best != 0).sum(axis=1)
    expected = np.where(SOURCES.any(axis=1), np.minimum(LENGTHS, MAX_LENGTH), 0)
    np.testing.assert_array_equal(lengths, expected)  # the forced lengths: sources really ended apart
    best_finished = finished if finished.ndim == 1 else finished[:, 0]
    np.testing.assert_array_equal(best_finished, LENGTHS <= MAX_LENGTH)


def test_compacting_runs_eagerly_too(model):
    parts = forced_lengths_decoder(model, "greedy")
    eager = compaction.compacting(parts, jit_compile=False, segments=4, min_rows=2)(SOURCES, tf.constant(LENGTHS))
    _assert_same(parts.run(SOURCES, tf.constant(LENGTHS)), eager)


def test_compile_decoder_compacts_with_the_same_ids(model):
    compacted = decoding.compile_search(model, decoding.BeamSearch(3), compact=True)
    one_program = decoding.compile_search(model, decoding.BeamSearch(3), compact=False)
    _assert_same(one_program(SOURCES), compacted(SOURCES))


def test_a_small_batch_runs_as_one_loop(model):
    parts = forced_lengths_decoder(model, "greedy")
    decode = compaction.compacting(parts, jit_compile=False, min_rows=len(SOURCES))
    _assert_same(parts.run(SOURCES, tf.constant(LENGTHS)), decode(SOURCES, tf.constant(LENGTHS)))
    assert not decode.segments  # no segment was ever built
    compacting = compaction.compacting(parts, jit_compile=False, min_rows=len(SOURCES) - 1)
    compacting(SOURCES, tf.constant(LENGTHS))
    assert compacting.segments


def test_compaction_keeps_the_alive_rows_first_and_fills_with_done_ones():
    alive = tf.constant([False, True, False, False, True, False, False, False, False, True])
    origin = tf.constant([7, 0, 3, 9, 2, 8, 1, 4, 5, 6])
    take, kept = compaction._compaction(alive, origin, spare=10, min_rows=2)
    # Three alive rows: a batch of four, the fourth a done row whose results go to the spare row.
    assert take.numpy().tolist() == [1, 4, 9, 0]
    assert kept.numpy().tolist() == [0, 2, 6, 10]
    take, kept = compaction._compaction(alive, origin, spare=10, min_rows=8)
    assert take.numpy().tolist() == [1, 4, 9, 0, 2, 3, 5, 6]
    assert kept.numpy().tolist() == [0, 2, 6, 10, 10, 10, 10, 10]


def test_segment_plan_stops_evenly_within_the_cache_phases():
    grow = decoding.resize_cache
    plan = compaction.segment_plan(24, grow, segments=6)
    assert plan == [(6, 4), (6, 6), (12, 8), (12, 12), (24, 16), (24, 20), (24, 24)]
    assert compaction.segment_plan(24, None, segments=4) == [(24, 6), (24, 12), (24, 18), (24, 24)]
    assert compaction.segment_plan(10, grow, segments=1) == [(3, 3), (5, 5), (10, 10)]
    assert compaction.segment_plan(5, grow, segments=8) == [(2, 1), (2, 2), (3, 3), (5, 4), (5, 5)]


@pytest.mark.parametrize("argument", [dict(segments=0), dict(min_rows=0), dict(segments=2.5)])
def test_bad_compaction_arguments_are_named(model, argument):
    with pytest.raises(ValueError, match=next(iter(argument))):
        compaction.compacting(decoding.bind(model, decoding.GreedySearch()), **argument)


def test_compact_is_refused_where_it_cannot_work(model):
    with pytest.raises(ValueError, match="compact=True"):
        decoding.compile_search(model, decoding.GreedySearch(), cached=False, compact=True)
