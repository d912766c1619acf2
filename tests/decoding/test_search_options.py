"""The options a pretrained checkpoint's generation needs (Hugging Face transformers' order), on constructed steps.

Each step here is a table of probabilities whose outcome can be worked out by
hand: per step index (`_indexed_step`), or per previous token, a bigram model
(`_bigram_step`). Tokens 0-3 are this package's PAD, UNK, START and END
unless a test says otherwise; 4 and up are words ("a" = 4, "b" = 5).
"""

import numpy as np
import pytest
from keras import ops

from keras_transformer import decoding

A, B = 4, 5


def _log(probs):
    return np.log(np.array(probs, "float32") + 1e-9)


def _indexed_step(rows):
    """A step whose next-token probabilities depend only on the step index (the last row repeats)."""
    table = ops.convert_to_tensor(_log(rows))

    def step_fn(tokens, index, state):
        row = ops.take(table, ops.minimum(index, len(rows) - 1), axis=0)
        return ops.tile(row[None], (ops.shape(tokens)[0], 1)), state

    return step_fn


def _bigram_step(table):
    """A step whose next-token probabilities depend only on the token fed: `table[previous]`."""
    table = ops.convert_to_tensor(_log(table))

    def step_fn(tokens, index, state):
        return ops.take(table, tokens, axis=0), state

    return step_fn


def _numpy(result):
    return tuple(ops.convert_to_numpy(x) for x in result)


# Marian's ids: END = 0, PAD = START = 6 (the last id). From START the bigram prefers PAD (banned), then
# 2; then 4, then END: [2, 4, END], PAD after it.
MARIAN = dict(start_id=6, end_id=0, pad_id=6)
MARIAN_TABLE = np.full((7, 7), 0.1)
MARIAN_TABLE[6] = [0.05, 0.05, 0.3, 0.0, 0.1, 0.0, 0.5]
MARIAN_TABLE[2] = [0.2, 0.0, 0.0, 0.2, 0.6, 0.0, 0.0]
MARIAN_TABLE[4] = [0.7, 0.0, 0.0, 0.0, 0.0, 0.3, 0.0]


@pytest.mark.parametrize("softmax_over", ["allowed", "vocabulary"])
def test_greedy_search_uses_its_own_start_end_and_pad_ids(softmax_over):
    search = decoding.GreedySearch(alpha=0.0, softmax_over=softmax_over, **MARIAN)
    finished = ops.convert_to_tensor([False, True])
    ids, scores, done = _numpy(search.run(_bigram_step(MARIAN_TABLE), (), 2, 5, finished=finished))
    # Token 2 first: the step was fed START = 6 (from the default START, 2, it would prefer 4).
    np.testing.assert_array_equal(ids[:, 0], [[2, 4, 0, 6, 6], [6, 6, 6, 6, 6]])
    np.testing.assert_array_equal(done[:, 0], [True, True])
    # PAD (= START) is banned: its 0.5 is shared out over the rest ("allowed") or lost ("vocabulary").
    first = 0.3 / 0.5 if softmax_over == "allowed" else 0.3
    np.testing.assert_allclose(scores[:, 0], [np.log(first * 0.6 * 0.7), 0.0], rtol=1e-5)


def test_beam_search_uses_its_own_start_end_and_pad_ids():
    search = decoding.BeamSearch(2, alpha=0.0, **MARIAN)
    ids, _, done = _numpy(
        search.run(_bigram_step(MARIAN_TABLE), (), 2, 5, finished=ops.convert_to_tensor([False, True]))
    )
    np.testing.assert_array_equal(ids[0, 0], [2, 4, 0, 6, 6])
    np.testing.assert_array_equal(ids[1], 6)  # an empty source: all PAD
    assert done.all()
    for hypothesis in ids[0]:  # PAD only after END, never generated before it
        end = list(hypothesis).index(0)
        assert 6 not in hypothesis[:end] and (hypothesis[end + 1 :] == 6).all(), hypothesis


# Step 0: END 0.4, a 0.5, b 0.1; then END 0.4, a 0.3, b 0.3. Beam 2 finishes [END] (p 0.4, 1 token) and
# [a, END] (p 0.2, 2 tokens). alpha = 1: GNMT divides by (5 + len) / 6, transformers' "length" by len.
NORMALIZATION_CASE = [[0, 0, 0, 0.4, 0.5, 0.1], [0, 0, 0, 0.4, 0.3, 0.3]]


@pytest.mark.parametrize(
    "normalization, expected",
    [
        ("gnmt", ([[3, 0, 0], [A, 3, 0]], [np.log(0.4), np.log(0.2) / (7 / 6)])),
        ("length", ([[A, 3, 0], [3, 0, 0]], [np.log(0.2) / 2, np.log(0.4)])),
    ],
)
def test_normalization_changes_the_beam_ranking(normalization, expected):
    search = decoding.BeamSearch(2, alpha=1.0, normalization=normalization)
    ids, scores, done = _numpy(search.run(_indexed_step(NORMALIZATION_CASE), (), 1, 3))
    np.testing.assert_array_equal(ids[0], expected[0])
    np.testing.assert_allclose(scores[0], expected[1], rtol=1e-5)
    greedy = decoding.GreedySearch(alpha=1.0, normalization=normalization)
    ids, scores, _ = _numpy(greedy.run(_indexed_step(NORMALIZATION_CASE), (), 1, 3))
    np.testing.assert_array_equal(ids[0, 0], [A, 3, 0])  # the ids do not depend on it
    divisor = 2.0 if normalization == "length" else 7 / 6
    np.testing.assert_allclose(scores[0, 0], np.log(0.2) / divisor, rtol=1e-5)


def test_length_normalization_of_an_empty_output_is_zero_not_nan():
    search = decoding.GreedySearch(alpha=1.0, normalization="length")
    _, scores, _ = _numpy(
        search.run(_indexed_step(NORMALIZATION_CASE), (), 1, 3, finished=ops.convert_to_tensor([True]))
    )
    assert scores[0, 0] == 0.0


# Beam 2, alpha 1, scores log p / len. Step 0: END 0.5, a 0.45, b 0.05; step 1: END 0.3, a 0.6, b 0.1; then
# END 0.9, a 0.05, b 0.05. After step 1 two hypotheses have ended: [END] (-0.69) and [a, END] (log 0.135 / 2
# = -1.00). "beams_ended" stops there. The best live beam [a, a] (log 0.27 = -1.31, / 2 = -0.65) beats the
# worst ended one, so "cannot_improve" goes on: [a, a, END] (log 0.243 / 3 = -0.47) takes the first place,
# and then the best live beam (log 0.0135 / 3 = -1.43) cannot beat [END]: it stops.
GOES_ON_CASE = [[0, 0, 0, 0.5, 0.45, 0.05], [0, 0, 0, 0.3, 0.6, 0.1], [0, 0, 0, 0.9, 0.05, 0.05]]


@pytest.mark.parametrize(
    "stopping, expected",
    [
        ("beams_ended", ([[3, 0, 0, 0], [A, 3, 0, 0]], [np.log(0.5), np.log(0.135) / 2])),
        ("cannot_improve", ([[A, A, 3, 0], [3, 0, 0, 0]], [np.log(0.243) / 3, np.log(0.5)])),
    ],
)
def test_cannot_improve_goes_on_while_a_live_beam_beats_the_worst_ended_one(stopping, expected):
    search = decoding.BeamSearch(2, stopping, alpha=1.0, normalization="length")
    ids, scores, done = _numpy(search.run(_indexed_step(GOES_ON_CASE), (), 1, 4))
    np.testing.assert_array_equal(ids[0], expected[0])
    np.testing.assert_allclose(scores[0], expected[1], rtol=1e-5)
    assert done.all()


# Step 0: END 0.5, a 0.45, b 0.05; step 1: END 0.2, each of the five words 4-8 0.16; then END 0.99. After
# step 1: [END] (-0.69) and [a, END] (log 0.09 / 2 = -1.20) have ended; the best live beam [a, 4] scores
# log 0.072 / 2 = -1.32 at its length: no better, so the source is done. Going on would have found
# [a, 4, END] (log 0.0713 / 3 = -0.88): transformers' heuristic misses it, and so must this rule.
STOPS_CASE = [[0, 0, 0, 0.5, 0.45, 0.05, 0, 0, 0], [0, 0, 0, 0.2] + [0.16] * 5, [0, 0, 0, 0.99] + [0.002] * 5]


def test_cannot_improve_stops_where_transformers_heuristic_stops():
    search = decoding.BeamSearch(2, "cannot_improve", alpha=1.0, normalization="length")
    ids, scores, _ = _numpy(search.run(_indexed_step(STOPS_CASE), (), 1, 4))
    np.testing.assert_array_equal(ids[0], [[3, 0, 0, 0], [A, 3, 0, 0]])
    np.testing.assert_allclose(scores[0], [np.log(0.5), np.log(0.09) / 2], rtol=1e-5)


# Every step: a 0.9, b 0.0999, END 1e-4: nothing ends within 3 tokens unless END is forced at the last.
NEVER_ENDS = [[0, 0, 0, 1e-4, 0.9, 0.0999]]


@pytest.mark.parametrize("softmax_over", ["allowed", "vocabulary"])
def test_force_end_ends_every_output_at_the_last_step(softmax_over):
    step = _indexed_step(NEVER_ENDS)
    options = dict(alpha=0.0, softmax_over=softmax_over)
    ids, _, done = _numpy(decoding.GreedySearch(**options).run(step, (), 1, 3))
    np.testing.assert_array_equal(ids[0, 0], [A, A, A])
    assert not done[0, 0]
    ids, scores, done = _numpy(decoding.GreedySearch(force_end=True, **options).run(step, (), 1, 3))
    np.testing.assert_array_equal(ids[0, 0], [A, A, 3])
    assert done[0, 0]
    # The forced END scores log-probability 0 (transformers sets it to 0), not log 1e-4.
    np.testing.assert_allclose(scores[0, 0], 2 * np.log(0.9), rtol=1e-4)
    ids, scores, done = _numpy(decoding.BeamSearch(2, force_end=True, **options).run(step, (), 1, 3))
    np.testing.assert_array_equal(ids[0], [[A, A, 3], [A, B, 3]])
    np.testing.assert_allclose(scores[0], [2 * np.log(0.9), np.log(0.9 * 0.0999)], rtol=1e-4)
    assert done.all()
    _, _, cut_off = _numpy(decoding.BeamSearch(2, **options).run(step, (), 1, 3))
    assert not cut_off.any()


# PAD 0.3, a 0.4, b 0.2, END 0.1, then END: banning PAD (the default) picks a; banning a too picks b.
BANNED_CASE = [[0.3, 0, 0, 0.1, 0.4, 0.2], [0, 0, 0, 1.0, 0, 0]]


@pytest.mark.parametrize(
    "banned_ids, softmax_over, token, probability",
    [
        (None, "allowed", A, 0.4 / 0.7),
        (None, "vocabulary", A, 0.4),
        ((0, 2, A), "allowed", B, 0.2 / 0.3),
        ((0, 2, A), "vocabulary", B, 0.2),
    ],
)
def test_banned_ids_are_never_generated(banned_ids, softmax_over, token, probability):
    search = decoding.GreedySearch(alpha=0.0, banned_ids=banned_ids, softmax_over=softmax_over)
    ids, scores, _ = _numpy(search.run(_indexed_step(BANNED_CASE), (), 1, 2))
    np.testing.assert_array_equal(ids[0, 0], [token, 3])
    np.testing.assert_allclose(scores[0, 0], np.log(probability), rtol=1e-5)


# A bigram: from START, a 0.6 and b 0.4; after a, PAD 0.5 and END 0.5; after b, PAD 0.1 and END 0.9. PAD
# is banned. A log-softmax over the allowed tokens gives END probability 1 after either: [a, END] (0.6)
# wins. Transformers' order (log-softmax over the vocabulary, then the ban) loses PAD's share: [a, END]
# 0.3, [b, END] 0.36, and [b, END] wins.
SOFTMAX_TABLE = np.zeros((6, 6))
SOFTMAX_TABLE[2] = [0, 0, 0, 0, 0.6, 0.4]
SOFTMAX_TABLE[A] = [0.5, 0, 0, 0.5, 0, 0]
SOFTMAX_TABLE[B] = [0.1, 0, 0, 0.9, 0, 0]


@pytest.mark.parametrize(
    "softmax_over, expected",
    [
        ("allowed", ([[A, 3], [B, 3]], [np.log(0.6), np.log(0.4)])),
        ("vocabulary", ([[B, 3], [A, 3]], [np.log(0.36), np.log(0.3)])),
    ],
)
def test_softmax_over_the_vocabulary_comes_before_the_bans(softmax_over, expected):
    search = decoding.BeamSearch(2, alpha=0.0, softmax_over=softmax_over, banned_ids=(0,))  # PAD, as imports ban it
    ids, scores, _ = _numpy(search.run(_bigram_step(SOFTMAX_TABLE), (), 1, 2))
    np.testing.assert_array_equal(ids[0], expected[0])
    np.testing.assert_allclose(scores[0], expected[1], rtol=1e-4)


def test_search_for_passes_the_options_on():
    options = dict(
        pad_id=6,
        start_id=6,
        end_id=0,
        normalization="length",
        force_end=True,
        banned_ids=(6,),
        softmax_over="vocabulary",
    )
    beam = decoding.search_for(4, 1.0, stopping="cannot_improve", **options)
    assert beam == decoding.BeamSearch(4, "cannot_improve", alpha=1.0, **options)
    # A beam of 1 is greedy search, whatever the stopping rule (it has one hypothesis to end).
    assert decoding.search_for(1, 1.0, stopping="cannot_improve", **options) == decoding.GreedySearch(
        alpha=1.0, **options
    )
    sampling = decoding.search_for(temperature=0.7, **options)
    assert sampling == decoding.SamplingSearch(0.7, alpha=0.6, **options)
    unbound = decoding.BeamSearch(4)
    assert (unbound.pad_id, unbound.start_id, unbound.end_id) == (None, None, None)  # the model's, once bound
    defaults = unbound.with_ids()
    assert (defaults.pad_id, defaults.start_id, defaults.end_id) == (0, 2, 3)
    assert (defaults.normalization, defaults.stopping, defaults.force_end) == ("gnmt", "beams_ended", False)
    assert (defaults.banned_ids, defaults.never_generated, defaults.softmax_over) == (None, (0, 2), "allowed")


@pytest.mark.parametrize(
    "option", [dict(normalization="lp"), dict(stopping="never"), dict(softmax_over="all"), dict(banned_ids=3)]
)
def test_bad_options_are_value_errors_naming_them(option):
    with pytest.raises(ValueError, match=next(iter(option))):
        decoding.search_for(4, **option)
