"""Greedy and beam search on the host, in NumPy, over a decoder step: the LiteRT export's loop.

A `session` has `step(tokens, index) -> log_probs (rows, vocab)` (the
banned ids at `-inf`) and `reorder(rows)` (the self-attention cache of each
new row taken from row `rows[i]`). The searches rank as the package's
(`keras_transformer.decoding`) do, by the same rules (`keras_transformer.decoding.rules`: the length
penalty, the forced END, the stopping rule): greedy takes the first most
likely token; beam search keeps the `2k` best continuations (equal scores in
index order), moves those among the `k` best that end to the finished list,
scored `log p / penalty(len)` with `len` counting END, keeps the `k` best
others alive, and a source is done once `k` hypotheses ended
(`stopping="beams_ended"`), or once, besides, the best live beam scored at
its current length does not beat the worst of them
(`stopping="cannot_improve"`, transformers' rule, which imported runs
use); a source cut off at `max_length` fills its places with its live
beams, after the ended ones (or among them by score: `cut_off="by_score"`,
transformers'). A forced beginning (`prefix`: a multilingual model's
target language token, a target prefix's pieces) is taken at the first
steps as the package's searches take it (`Search.processed`): the forced
token at log-probability 0, every other at -inf.

Example (a step whose next token is always END, id 3):

>>> class Always:
...     def step(self, tokens, index):
...         log_probs = np.full((len(tokens), 5), -9.0); log_probs[:, 3] = 0.0; return log_probs
...     def reorder(self, rows): pass
>>> greedy(Always(), np.zeros(2, bool), max_length=4, start_id=2, end_id=3)[0]
[[3], [3]]
>>> greedy(Always(), np.zeros(2, bool), max_length=4, start_id=2, end_id=3, prefix=np.array([[4, 1], [4, -1]]))[0]
[[4, 1, 3], [4, 3]]
"""

import numpy as np

from keras_transformer.decoding import rules
from keras_transformer.kinds import check_choice

_NINF = rules.NEG_INF


def _penalty(length, alpha, normalization):
    """`rules.length_penalty` of `length` tokens, as float32."""
    return np.float32(rules.length_penalty(np.float32(length), np.float32(alpha), normalization))


def _forced(log_probs, index, max_length, end_id, force_end, tokens=None):
    """`log_probs` as the search chooses from them at step `index`.

    With `force_end`, END is the only token at the last step, at
    log-probability 0; a row whose `tokens` (`(rows,)`, -1 where free) names
    a forced token takes it, at 0, every other token at -inf (a forced
    beginning: `rules.forced_token_scores`, as `Search.processed` takes it and transformers' forced BOS).
    """
    if force_end and rules.is_forced_step(index, max_length):
        forced = rules.forced_end_scores(log_probs.shape[1], end_id).astype(log_probs.dtype)
        log_probs = np.broadcast_to(forced, log_probs.shape).copy()
    if tokens is not None:
        log_probs = rules.forced_token_scores(log_probs, tokens).astype(log_probs.dtype)
    return log_probs


def _prefix_tokens(prefix, index, beams=1):
    """The forced tokens of step `index` (`(rows * beams,)`, -1 where free), or None past the prefixes."""
    if prefix is None or index >= prefix.shape[1]:
        return None
    return np.repeat(np.asarray(prefix[:, index], np.int64), beams)


def greedy(session, done, max_length, start_id, end_id, force_end=False, prefix=None):
    """Greedy search: `(outputs, log_probs, finished)`, one per row.

    `outputs[i]` lists the generated ids, END included where it came;
    `log_probs[i]` sums their log-probabilities; `finished[i]` is False for
    a row cut off at `max_length` before END. Rows flagged in `done` (empty
    sources) produce nothing and count as finished. `prefix` (int `(rows,
    width)`, -1 where a row's prefix has ended, or None) names the tokens
    each output begins with: a language token, a target prefix's pieces.
    """
    rows = len(done)
    finished = np.array(done, bool)
    outputs = [[] for _ in range(rows)]
    scores = np.zeros(rows, np.float32)
    tokens = np.full(rows, start_id, np.int32)
    for index in range(max_length):
        if finished.all():
            break
        log_probs = session.step(tokens, index)
        log_probs = _forced(log_probs, index, max_length, end_id, force_end, _prefix_tokens(prefix, index))
        choice = log_probs.argmax(axis=1).astype(np.int32)  # the first most likely token
        active = ~finished
        for row in np.flatnonzero(active):
            outputs[row].append(int(choice[row]))
        scores += np.where(active, log_probs[np.arange(rows), choice], 0.0).astype(np.float32)
        finished |= active & (choice == end_id)
        tokens = choice
    return outputs, scores, finished


def beam(
    session,
    done,
    beam_size,
    max_length,
    start_id,
    end_id,
    alpha,
    normalization="gnmt",
    force_end=False,
    stopping="beams_ended",
    cut_off="after_ended",
    prefix=None,
):
    """Beam search over `session`, whose rows are `beam_size` beams per source, next to each other.

    Returns `(ids (batch, k, max_length), scores (batch, k), finished (batch,
    k))`, best first: ended hypotheses by score, then cut-off ones (or
    among them by score, `cut_off="by_score"`). `ids` are the generated
    ids, 0 after END. `stopping`: `"beams_ended"` or `"cannot_improve"`
    (see the module's docstring). `prefix` (int `(batch, width)`, -1 where
    free, or None): the tokens each source's outputs begin with, as `greedy`'s.
    """
    check_choice("stopping", stopping, rules.STOPPING_RULES)
    check_choice("cut_off", cut_off, rules.CUT_OFF_RULES)
    batch, k = len(done), beam_size
    seqs = np.zeros((batch, k, max_length + 1), np.int32)
    seqs[:, :, 0] = start_id
    log_probs = np.tile(np.array([[0.0] + [_NINF] * (k - 1)], np.float32), (batch, 1))
    fin_seqs = np.zeros_like(seqs)
    source_done = np.array(done, bool)
    fin_scores = np.where(source_done[:, None], np.float32(0), np.float32(_NINF)) * np.ones((1, k))
    fin_scores = fin_scores.astype(np.float32)
    sources = np.arange(batch)[:, None]
    index = 0
    while index < max_length and not source_done.all():
        step = session.step(seqs[:, :, index].reshape(-1), index)
        step = _forced(step, index, max_length, end_id, force_end, _prefix_tokens(prefix, index, k))
        vocab = step.shape[1]
        candidates = (log_probs[:, :, None] + step.reshape(batch, k, vocab)).reshape(batch, k * vocab)
        top = _best(candidates, 2 * k)
        top_scores = np.take_along_axis(candidates, top, axis=1)
        parent, token = top // vocab, (top % vocab).astype(np.int32)
        cand_seqs = seqs[sources, parent]  # (batch, 2k, max_length + 1)
        cand_seqs[:, :, index + 1] = token
        ended = token == end_id

        alive_scores = np.where(ended, _NINF, top_scores).astype(np.float32)
        alive = _best(alive_scores, k)
        seqs = np.take_along_axis(cand_seqs, alive[:, :, None], axis=1)
        log_probs = np.take_along_axis(alive_scores, alive, axis=1)
        session.reorder((np.take_along_axis(parent, alive, axis=1) + sources * k).reshape(-1))

        accept = ended & (np.arange(2 * k) < k)[None] & ~source_done[:, None]
        penalty = _penalty(index + 1, alpha, normalization)
        new_scores = np.where(accept, top_scores / penalty, _NINF).astype(np.float32)
        merged = np.concatenate([fin_scores, new_scores], axis=1)
        order = _best(merged, k)
        fin_scores = np.take_along_axis(merged, order, axis=1)
        fin_seqs = np.take_along_axis(np.concatenate([fin_seqs, cand_seqs], axis=1), order[:, :, None], axis=1)
        source_done |= _stops(stopping, log_probs, fin_scores, _penalty(index + 1, alpha, normalization))
        index += 1
    live_scores = np.where(source_done[:, None], _NINF, log_probs / _penalty(index, alpha, normalization))
    return _finish(seqs, live_scores.astype(np.float32), fin_seqs, fin_scores, cut_off)


def _stops(stopping, log_probs, fin_scores, penalty):
    """The sources that `stopping` ends, given the live beams' `log_probs` and their length's `penalty`."""
    return rules.stops(stopping, log_probs[:, 0], fin_scores[:, -1], penalty)


def _best(scores, count):
    """Indices of the `count` best `scores` per row, best first, equal scores in index order (as `top_k`)."""
    return np.argsort(-scores, axis=1, kind="stable")[:, :count]


def _finish(seqs, live_scores, fin_seqs, fin_scores, cut_off):
    k = fin_scores.shape[1]
    pick = rules.final_pick(cut_off, fin_scores, live_scores)
    scores = np.take_along_axis(np.concatenate([fin_scores, live_scores], axis=1), pick, axis=1)
    ids = np.take_along_axis(np.concatenate([fin_seqs, seqs], axis=1), pick[:, :, None], axis=1)
    return ids[:, :, 1:], scores.astype(np.float32), pick < k
