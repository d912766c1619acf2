"""The LiteRT host searches (NumPy) rank, stop and score as the package's `BeamSearch` and `GreedySearch` do.

A step with no model: each source has its own random table of next-token
log-probabilities given the previous token, so hypotheses end at different
lengths, and both searches run over it with the same options.
"""

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.decoding import BeamSearch, GreedySearch
from keras_transformer.litert import search

START, END, PAD, VOCAB, BATCH, K, LENGTH = 2, 3, 0, 9, 6, 3, 7
ALPHA = 3.0  # the two stopping rules give different hypotheses on every table below


def tables(seed, end_bonus=1.0):
    """Log-probabilities `(batch, vocab, vocab)`: source, previous token -> next token; END made likelier."""
    logits = np.random.default_rng(seed).normal(size=(BATCH, VOCAB, VOCAB)).astype(np.float32)
    logits[:, :, END] += end_bonus
    return logits - np.log(np.exp(logits).sum(-1, keepdims=True))


class Session:
    """`search`'s session over `tables` (`beams` rows per source); the banned ids at -inf."""

    def __init__(self, table, beams, banned):
        self.table, self.beams, self.banned = table, beams, list(banned)

    def step(self, tokens, index):
        log_probs = self.table[np.arange(len(tokens)) // self.beams, tokens].copy()
        log_probs[:, self.banned] = -np.inf
        return log_probs

    def reorder(self, rows):  # the table holds no per-row state
        pass


def package_result(table, options, beams):
    def step_fn(tokens, index, state):
        rows = tf.range(tf.shape(tokens)[0]) // beams
        return tf.gather_nd(tf.constant(table), tf.stack([rows, tokens], axis=1)), state

    searcher = BeamSearch(beam_size=beams, **options) if beams > 1 else GreedySearch(**options)
    result = searcher.run(step_fn, tf.zeros((BATCH * beams, 1)), BATCH, LENGTH)
    return result.ids.numpy(), result.scores.numpy(), result.finished.numpy()


@pytest.mark.parametrize("stopping", ["beams_ended", "cannot_improve"])
@pytest.mark.parametrize("normalization", ["gnmt", "length"])
@pytest.mark.parametrize("force_end", [False, True])
def test_beam_equals_the_package_beam_search(stopping, normalization, force_end):
    table = tables(seed=len(stopping) + len(normalization) + force_end)
    banned = (PAD, START)
    options = dict(start_id=START, end_id=END, pad_id=PAD, alpha=ALPHA, banned_ids=banned, softmax_over="vocabulary")
    options.update(normalization=normalization, force_end=force_end)
    ids, scores, finished = package_result(table, dict(options, stopping=stopping), K)

    def host(rule):
        session, done = Session(table, K, banned), np.zeros(BATCH, bool)
        return search.beam(session, done, K, LENGTH, START, END, ALPHA, normalization, force_end, rule)

    ours = host(stopping)
    # Ids equal but for ties: a bigram table gives two orders of the same transitions the same score.
    assert (ours[0] == ids).all(axis=-1).mean() >= 0.9
    np.testing.assert_allclose(ours[1], scores, atol=1e-5)
    np.testing.assert_array_equal(ours[2], finished)
    # The rules give different hypotheses here (a large alpha favours longer ones), so each one was followed.
    other = host("beams_ended" if stopping == "cannot_improve" else "cannot_improve")
    assert not np.array_equal(other[0], ours[0])


def test_greedy_with_force_end_scores_the_forced_end_zero():
    table = tables(seed=3, end_bonus=-2.0)  # some outputs reach the last step, where END is forced
    options = dict(start_id=START, end_id=END, pad_id=PAD, banned_ids=(PAD, START), softmax_over="vocabulary")
    ids, scores, finished = package_result(table, dict(options, force_end=True, alpha=0.0), 1)
    outputs, log_probs, ours = search.greedy(Session(table, 1, (PAD, START)), np.zeros(BATCH, bool), LENGTH, START,
                                             END, force_end=True)  # fmt: skip
    assert [row + [PAD] * (LENGTH - len(row)) for row in outputs] == ids[:, 0].tolist()
    np.testing.assert_allclose(log_probs, scores[:, 0], atol=1e-5)
    assert ours.all() and finished.all() and any(len(row) == LENGTH for row in outputs)


@pytest.mark.parametrize("beams", [1, K])
def test_a_forced_prefix_is_taken_as_the_package_searches_take_it(beams):
    """Each row's first tokens forced (a language token, a target prefix's pieces), scored 0; then searched on."""
    table = tables(seed=5)
    prefix = np.array([[4, 5], [6, -1], [-1, -1], [7, 8], [8, 8], [5, -1]])  # -1: free
    banned = (PAD, START)
    options = dict(start_id=START, end_id=END, pad_id=PAD, banned_ids=banned, softmax_over="vocabulary")
    options.update(alpha=1.0, normalization="length")
    if beams > 1:
        searcher = BeamSearch(beam_size=beams, stopping="cannot_improve", **options)
    else:
        searcher = GreedySearch(**options)

    def step_fn(tokens, index, state):
        rows = tf.range(tf.shape(tokens)[0]) // beams
        return tf.gather_nd(tf.constant(table), tf.stack([rows, tokens], axis=1)), state

    expected = searcher.run(step_fn, tf.zeros((BATCH * beams, 1)), BATCH, LENGTH, prefix=tf.constant(prefix))
    session, done = Session(table, beams, banned), np.zeros(BATCH, bool)
    if beams == 1:
        outputs, log_probs, _ = search.greedy(session, done, LENGTH, START, END, prefix=prefix)
        best = np.array([row + [PAD] * (LENGTH - len(row)) for row in outputs])
        scores = log_probs / np.array([len(row) for row in outputs])  # alpha 1, "length"
        np.testing.assert_array_equal(best, expected.ids.numpy()[:, 0])
    else:
        ids, scores, _ = search.beam(
            session, done, beams, LENGTH, START, END, 1.0, "length", False, "cannot_improve", prefix=prefix
        )
        assert (ids == expected.ids.numpy()).all(axis=-1).mean() >= 0.9  # ties, as above
        best, scores = ids[:, 0], scores[:, 0]
    np.testing.assert_allclose(scores, expected.scores.numpy()[:, 0], atol=1e-5)
    for row, forced in zip(best, prefix):
        kept = forced[forced >= 0]
        assert row[: len(kept)].tolist() == kept.tolist()  # every output begins with its prefix
