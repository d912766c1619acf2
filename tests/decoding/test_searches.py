"""The searches over constructed steps: beam search's rules, sampling's filters, the kernels, `search_for`."""

import numpy as np
import pytest
import tensorflow as tf
from keras import ops

from keras_transformer import decoding


def _constructed_step(index_logits):
    """A step function whose next-token log-probs depend only on the step index."""
    table = ops.convert_to_tensor(np.log(np.array(index_logits, "float32") + 1e-9))

    def step_fn(tokens, index, state):
        row = ops.take(table, ops.minimum(index, len(index_logits) - 1), axis=0)
        return ops.tile(row[None], (ops.shape(tokens)[0], 1)), state

    return step_fn


# Tokens 0-3 are reserved (3 = END); 4 = "a". Step 0: END 0.4, "a" 0.6; then END 0.6, "a" 0.4.
# Short [END]: log 0.4 = -0.92. Long [a, END]: log 0.36 = -1.02, but lp(2) = (7/6)^alpha.
LENGTH_CASE = [[0, 0, 0, 0.4, 0.6], [0, 0, 0, 0.6, 0.4]]


@pytest.mark.parametrize("alpha, expected", [(0.0, [3, 0, 0]), (2.0, [4, 3, 0])])
def test_length_penalty_changes_the_ranking(alpha, expected):
    ids, scores, _ = decoding.BeamSearch(2, alpha=alpha).run(_constructed_step(LENGTH_CASE), (), 1, 3)
    np.testing.assert_array_equal(ops.convert_to_numpy(ids[0, 0]), expected)
    short, long = np.log(0.4), np.log(0.6 * 0.6) / (7 / 6) ** alpha
    np.testing.assert_allclose(ops.convert_to_numpy(scores[0]), sorted([short, long])[::-1], rtol=1e-5)
    assert float(decoding.rules.length_penalty(1.0, alpha)) == pytest.approx(1.0)


# Step 0: "a" (4) 0.6, END 0.3, "b" (5) 0.1; then "a" 0.999, "b" 9e-4, END 1e-4. With 2 beams, [END]
# ends at step 0 (log 0.3 = -1.20) and nothing else ends in 3 steps, while the cut-off [a, a, a]
# scores log(0.6 * 0.999^2) = -0.51: higher, but unfinished.
FINISHED_CASE = [[0, 0, 0, 0.3, 0.6, 0.1], [0, 0, 0, 1e-4, 0.999, 9e-4]]


def test_a_finished_hypothesis_outranks_a_cut_off_one_with_a_higher_score():
    ids, scores, finished = decoding.BeamSearch(2, alpha=0.0).run(_constructed_step(FINISHED_CASE), (), 1, 3)
    ids, scores, finished = map(ops.convert_to_numpy, (ids, scores, finished))
    np.testing.assert_array_equal(ids[0], [[3, 0, 0], [4, 4, 4]])
    np.testing.assert_array_equal(finished[0], [True, False])
    np.testing.assert_allclose(scores[0], [np.log(0.3), np.log(0.6 * 0.999**2)], rtol=1e-4)
    assert scores[0, 1] > scores[0, 0]  # the cut-off one scores higher, and still ranks second
    two = decoding.BeamSearch(2, alpha=0.0).run(_constructed_step(FINISHED_CASE), (), 1, 3)
    np.testing.assert_array_equal(ops.convert_to_numpy(two[0]), ids)  # the same, run again


def test_filter_logits_known_values():
    logits = ops.log(ops.convert_to_tensor([[0.5, 0.3, 0.15, 0.05]]))
    kept = lambda filtered: np.isfinite(ops.convert_to_numpy(filtered))[0].tolist()  # noqa: E731
    assert kept(decoding.filter_logits(logits, top_p=0.7)) == [True, True, False, False]
    assert kept(decoding.filter_logits(logits, top_p=0.2)) == [True, False, False, False]
    assert kept(decoding.filter_logits(logits, top_k=3)) == [True, True, True, False]
    assert kept(decoding.filter_logits(logits, top_k=3, top_p=0.7)) == [True, True, False, False]
    assert kept(decoding.filter_logits(logits, top_k=ops.convert_to_tensor(1))) == [True, False, False, False]
    halved = ops.convert_to_numpy(decoding.filter_logits(logits, temperature=0.5))
    np.testing.assert_allclose(halved, 2 * ops.convert_to_numpy(logits))


@pytest.mark.parametrize("jit_compile", [False, True])
def test_greedy_choice_and_its_log_prob_equal_argmax_and_log_softmax(jit_compile):
    from keras_transformer.decoding.greedy_search import chosen_log_probs, first_max_index

    rng = np.random.default_rng(0)
    logits = rng.normal(size=(64, 300)).astype("float32")
    logits[:8, 40:43] = 50.0  # ties: the first one wins, as with argmax
    logits[8, :] = -np.inf
    logits[8, 299] = 1.0  # the only finite one is last

    @tf.function(jit_compile=jit_compile)
    def choose(logits):
        tokens = first_max_index(logits)
        return tokens, chosen_log_probs(logits, tokens), tf.nn.log_softmax(logits)

    tokens, log_probs, log_softmax = map(ops.convert_to_numpy, choose(tf.constant(logits)))
    np.testing.assert_array_equal(tokens, logits.argmax(-1))
    assert tokens[:8].tolist() == [40] * 8 and tokens[8] == 299
    np.testing.assert_allclose(log_probs, log_softmax[np.arange(64), tokens], rtol=0, atol=1e-6)
    assert log_probs[8] == 0.0


@pytest.mark.parametrize("vocab", [12_000, 64])
@pytest.mark.parametrize("jit_compile", [False, True])
def test_best_candidates_equal_top_k_of_all_scores(jit_compile, vocab):
    from keras_transformer.decoding.beam_search import best_candidates

    rng = np.random.default_rng(0)
    sources, beams = 12, 4
    logits = rng.normal(size=(sources, beams, vocab)).astype("float32")
    logits[:4] = np.round(logits[:4])  # many equal scores, within and across blocks
    logits[:, :, [0, 2]] = -np.inf  # PAD and START are never chosen
    logits[4, :, 130:400] = 9.0  # the best all in a few blocks
    logits[5, :, -8:] = 9.0  # in the last block
    log_probs = rng.normal(size=(sources, beams)).astype("float32") - 5.0
    log_probs[:4] = -1.0  # equal beams: equal scores across beams
    log_probs[6, 1:] = -np.inf  # the first step: one live beam
    block = 128 if vocab > 64 else 8  # about best_candidates' block size (125 and 8)
    last = vocab - 2 * block  # nine equal scores: four in early blocks, five in the best one's
    logits[7] = -5.0
    logits[7, 0, [block, 2 * block, 3 * block, 4 * block, last + 1, last + 2, last + 3, last + 4, last + 5]] = 3.0
    logits[7, 0, last] = 9.0
    log_probs[7, 1:] = -np.inf

    @tf.function(jit_compile=jit_compile)
    def both(logits, log_probs):
        expected = log_probs[:, :, None] + tf.nn.log_softmax(logits)
        flat = tf.reshape(logits, (sources * beams, vocab))
        return best_candidates(flat, log_probs, 2 * beams), tf.math.top_k(
            tf.reshape(expected, (sources, -1)), 2 * beams
        )

    (scores, index), (expected_scores, expected_index) = both(tf.constant(logits), tf.constant(log_probs))
    np.testing.assert_array_equal(ops.convert_to_numpy(index), expected_index.numpy())
    np.testing.assert_allclose(ops.convert_to_numpy(scores), expected_scores.numpy(), rtol=0, atol=2e-5)
    assert (ops.convert_to_numpy(index)[6] < vocab).all()  # all from the live beam


def test_sampling_inverts_the_filtered_cdf():
    step_fn = _constructed_step([[0, 0, 0, 0.05, 0.5, 0.3, 0.15]])
    noise = np.array([[0.1], [0.5], [0.7], [0.99]], "float32")  # one step
    sample = lambda **kw: ops.convert_to_numpy(  # noqa: E731
        decoding.SamplingSearch(**kw).run(step_fn, (), 4, 1, noise).ids[:, 0]
    )[:, 0].tolist()
    assert sample(top_k=2) == [4, 4, 5, 5]  # p = (0.625, 0.375) over tokens 4 and 5
    assert sample(top_p=0.9) == [4, 4, 5, 6]
    assert sample(temperature=0.0) == [4, 4, 4, 4]  # greedy
    seeded = [decoding.SamplingSearch(seed=7).run(step_fn, (), 4, 3).ids for _ in range(2)]
    np.testing.assert_array_equal(*map(ops.convert_to_numpy, seeded))


def test_search_for_decides_that_a_beam_of_one_is_greedy_search():
    assert decoding.search_for(1, 0.6) == decoding.GreedySearch(alpha=0.6)
    assert decoding.search_for(4, 1.0) == decoding.BeamSearch(4, alpha=1.0)
    assert decoding.search_for() is None  # nothing asked for: the model's default
    sampling = decoding.search_for(temperature=0.8, top_p=0.9, seed=1)
    assert sampling == decoding.SamplingSearch(0.8, 0, 0.9, 1)
    assert decoding.search_for(3, start_id=7, end_id=8) == decoding.BeamSearch(3, start_id=7, end_id=8)
    with pytest.raises(ValueError, match="beam_size"):
        decoding.search_for(0)
    with pytest.raises(ValueError, match="no beams"):
        decoding.search_for(4, temperature=1.0)


@pytest.mark.parametrize(
    "search", [decoding.GreedySearch(alpha=0.6), decoding.SamplingSearch(seed=3), decoding.BeamSearch(3, alpha=0.6)]
)
def test_every_search_returns_one_result_type(search):
    result = search.run(_constructed_step(LENGTH_CASE), (), 2, 3, finished=ops.convert_to_tensor([False, True]))
    beams = search.beam_size
    assert isinstance(result, decoding.SearchResult)
    assert [tuple(x.shape) for x in result] == [(2, beams, 3), (2, beams), (2, beams)]
    ids, scores, finished = map(ops.convert_to_numpy, result)
    np.testing.assert_array_equal(ids[1], 0)  # a source flagged finished produces nothing, scores 0
    np.testing.assert_array_equal(scores[1], 0.0)
    assert finished[1].all() and finished[0, 0]
    length = (ids[0, 0] != 0).sum()  # the best's score: its log-probability over the length penalty
    log_p = np.log(np.array(LENGTH_CASE, "float32") + 1e-9)[np.minimum(np.arange(length), 1), ids[0, 0, :length]].sum()
    np.testing.assert_allclose(scores[0, 0], log_p / ((5 + length) / 6) ** search.alpha, rtol=1e-5)
