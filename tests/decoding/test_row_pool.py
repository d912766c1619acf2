"""`RowPool`: sources that join a running decode at different steps get `decode`'s ids, each search.

The tiny trained run (`trained_runs.tiny_run_dir`) ends its outputs at
different lengths; sources join two at a time, one or none, between segments
of two steps, so rows of every age share the pool, leave it as they end and
are cut off at `max_length` (6: most are, and the timeline is moved back
several times). Its ids must be `decode`'s for the whole batch, its scores
within float noise (other shapes, other sums).
"""

import logging
import random

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import decoding, opener
from keras_transformer.config import ModelConfig
from keras_transformer.decoding.row_pool import RowPool, why_not_in_rows
from keras_transformer.models import build_transformer
from keras_transformer.translators.controls import Controls

from trained_runs import tiny_run_dir

MAX_LENGTH = 6  # most outputs are cut off, some end; the timeline is moved back several times
# An imported OPUS-MT model's search (transformers' `generate`): per-row lengths in its stopping rule and its
# forced END, scores over the whole vocabulary.
MARIAN = dict(normalization="length", stopping="cannot_improve", cut_off="by_score", force_end=True)
MARIAN.update(softmax_over="vocabulary")


@pytest.fixture(scope="module")
def tiny():
    path, pairs = tiny_run_dir()
    translator = opener.open_translator(path)
    sentences = [source for source, _ in pairs[:6]] + ["", "A man with a dog " * 4]  # the last: 32 tokens wide
    defaults = tf.fill([len(sentences)], "")  # the run's languages
    source_ids, _ = translator.search_inputs(tf.constant(sentences), Controls(defaults, defaults, defaults))
    prefix = np.full([source_ids.shape[0], MAX_LENGTH], -1, np.int32)
    prefix[3, :2] = [20, 21]  # one output's first two tokens forced
    return translator.model, source_ids, tf.constant(prefix), len(sentences)


def pooled(model, search, source_ids, prefix, count, max_length, *inputs, min_width=64):
    """`{row: SearchResult}` of the first `count` sources, joining the pool at random steps."""
    pool = RowPool(model, search, max_length=max_length, max_rows=2, segment_steps=2, min_width=min_width)
    rng, waiting, results = random.Random(0), list(range(count)), {}
    while waiting or pool.occupied:
        joining = waiting[: min(pool.free, rng.randint(0, 2))]
        waiting = waiting[len(joining) :]
        if joining:
            rows = [tf.gather(x, joining) for x in (source_ids, *inputs)]
            pool.add(rows[0], joining, *rows[1:], prefix=tf.gather(prefix, joining))
        results.update({update.ticket: update.result for update in pool.advance() if update.result is not None})
    return results, pool


@pytest.mark.parametrize("name", ["greedy", "beam", "sample"])
def test_joining_sources_get_the_batch_decode(tiny, name):
    model, source_ids, prefix, count = tiny
    max_length = MAX_LENGTH
    # Greedy: the pool's memory 16 wide at first, widened for the last source. The others: one width.
    count, min_width = (count, 16) if name == "greedy" else (count - 1, 64)
    searches = {
        "greedy": dict(beam_size=1),
        "beam": dict(beam_size=3, **MARIAN),
        "sample": dict(temperature=0.9, top_p=0.9),
    }
    search = decoding.search_for(alpha=0.6, **searches[name])
    inputs = (tf.random.stateless_uniform([source_ids.shape[0], max_length], [1, 0]),) if name == "sample" else ()
    expected = decoding.decode(model, source_ids, search, *inputs, max_length=max_length, prefix=prefix)
    results, pool = pooled(model, search, source_ids, prefix, count, max_length, *inputs, min_width=min_width)
    for row in range(count):
        np.testing.assert_array_equal(results[row].ids, expected.ids.numpy()[row], err_msg=f"row {row}")
        np.testing.assert_array_equal(results[row].finished, expected.finished.numpy()[row])
        np.testing.assert_allclose(results[row].scores, expected.scores.numpy()[row], atol=1e-4)
    full = (expected.ids.numpy()[:count, 0, -1] != model.config.target_pad).sum()
    assert 0 < full < count  # rows of every kind: ended early, ran to max_length
    assert pool.occupied == 0 and pool.rows == pool.min_rows  # all left; shrunk back
    assert pool.min_rows == (2 if pool.beams == 1 else 1)  # one hypothesis a source: two rows, as one steps slower
    # One encoder trace, one segment trace per (rows, width) shape: never one per step.
    assert pool.traces <= 1 + 2 * (2 if name == "greedy" else 1)
    assert pool.width == (32 if name == "greedy" else 64)  # widened, not narrowed again (a quarter rule)


@pytest.mark.parametrize("beam_size", [1, 3])
def test_relative_positions_decode_in_rows(beam_size):
    """T5's bias reads distances of slots on the timeline: each row's own distances, wherever it joined."""
    config = ModelConfig(
        source_vocab_size=40, target_vocab_size=40, num_layers=1, d_model=16, num_heads=2, d_ff=24, max_length=8,
        position_layout="relative", norm="rms", scale_embeddings=False, start_id=0, end_id=1,
    )  # fmt: skip
    model = build_transformer(config=config)
    assert why_not_in_rows(model) == ""
    table = model.decoder_position_bias.embeddings
    table.assign(tf.random.stateless_normal(table.shape, [3, 0], stddev=3.0))  # a bias that decides the ids
    source_ids = tf.random.stateless_uniform([6, 5], [4, 0], minval=2, maxval=40, dtype=tf.int32)
    prefix = tf.fill([6, MAX_LENGTH], -1)
    search = decoding.search_for(beam_size, 0.6)
    expected = decoding.decode(model, source_ids, search, max_length=MAX_LENGTH)
    results, _ = pooled(model, search, source_ids, prefix, 6, MAX_LENGTH, min_width=16)
    for row in range(6):
        np.testing.assert_array_equal(results[row].ids, expected.ids.numpy()[row], err_msg=f"row {row}")
        np.testing.assert_allclose(results[row].scores, expected.scores.numpy()[row], atol=1e-4)


def test_compiling_six_shapes_traces_each_once_and_tensorflow_warns_of_no_retracing(tiny):
    """A warm-up compiles every pool shape in turn, which drew TensorFlow's warning of frequent retracing."""
    model = tiny[0]
    pool = RowPool(model, decoding.GreedySearch(), max_length=MAX_LENGTH, max_rows=8, segment_steps=2, min_width=16)
    shapes = [(rows, width) for rows in (2, 4, 8) for width in (16, 32)]
    records = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append
    logger = logging.getLogger("tensorflow")
    logger.addHandler(handler)
    try:
        for rows, width in shapes:
            pool.compile(rows, width)
        for rows, width in shapes:  # compiled: nothing traced again
            pool.compile(rows, width)
    finally:
        logger.removeHandler(handler)
    assert pool.traces == len(shapes)
    assert [r.getMessage() for r in records if "retracing" in r.getMessage()] == []
