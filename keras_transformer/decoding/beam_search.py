"""Beam search with a length penalty, and its top-k over the beams' continuations.

Example (tokens 0-3 are reserved, 3 = END, 4 = "a"; the first step prefers
"a" and the second END, so [a, END] wins over [END]):

>>> def step_fn(tokens, index, state):
...     probs = keras.ops.where(index < 1, [0.0, 0.0, 0.0, 0.4, 0.6], [0.0, 0.0, 0.0, 0.9, 0.1])
...     return keras.ops.tile(keras.ops.log(probs + 1e-9)[None], (keras.ops.shape(tokens)[0], 1)), state
>>> result = BeamSearch(2, alpha=0.0).run(step_fn, (), batch_size=1, max_length=3)
>>> keras.ops.convert_to_numpy(result.ids[0]).tolist()
[[4, 3, 0], [3, 0, 0]]

References:
    Wu et al., "Google's Neural Machine Translation System", 2016 (length
    penalty). Hugging Face transformers' `generate` (`_beam_search`, read at
    commit 000034a4) for `normalization="length"`, `stopping="cannot_improve"`,
    `force_end` and `softmax_over="vocabulary"`.
"""

import dataclasses

import keras  # noqa: F401  (the examples)
from keras import ops

from keras_transformer.decoding import rules
from keras_transformer.decoding.search import (
    NEG_INF,
    Search,
    SearchResult,
    check_beam_size,
    check_choice,
    finished_flags,
    start_ids,
)

BLOCK = 128


@dataclasses.dataclass(frozen=True)
class BeamSearch(Search):
    """Beam search: the `beam_size` best hypotheses of each source, scored with a length penalty.

    The step sees `batch * beam_size` rows, the beams of a source next to
    each other. Each step extends every live beam, keeps the `2 * beam_size`
    best candidates (by log-probability, the step's logits as
    `Search.processed` gives them), moves those among the `beam_size` best
    that end with END to the finished list, scored `normalise(log p, len)`
    (by default `log p / ((5 + len) / 6) ** alpha`; len counts END), keeping
    the `beam_size` best finished ones, and keeps the `beam_size` best
    others alive. When a source is done (`stopping`), its finished list is
    frozen. A source cut off by `max_length` with fewer ended hypotheses
    fills the remaining places with its live beams, scored as they are
    (`normalise(log p, max_length)`), but after the ended ones: a finished
    hypothesis always outranks an unfinished one, whatever their scores, so
    a cut-off output wins only where nothing ended (with `force_end` every
    hypothesis ends).

    Its rows are `(seqs, log_probs, fin_seqs, fin_scores, done)`: the live
    beams `(batch, beam_size, max_length + 1)` and their log-probabilities
    (best first), the ended hypotheses with their scores (best first), and
    which sources are done. The step's state is reordered after each step
    (`Step.reorder_state`).

    Args:
        beam_size: beams per source (a positive int).
        stopping: when a source is done. `"beams_ended"`: once `beam_size`
            hypotheses have ended (fairseq's rule). `"cannot_improve"`:
            once `beam_size` hypotheses have ended and the best live beam,
            scored at its current length (`normalise(log p, len)`), does not
            beat the worst of them (transformers' `early_stopping=False`: a
            heuristic where a longer hypothesis may score higher).
        alpha, start_id, end_id, pad_id, normalization, banned_ids,
            force_end, softmax_over: `Search`'s (keyword only).
    """

    beam_size: int = 4
    stopping: str = "beams_ended"

    def __post_init__(self):
        super().__post_init__()
        check_beam_size(self.beam_size)
        check_choice("stopping", self.stopping, rules.STOPPING_RULES)

    def initial_rows(self, batch_size, max_length, finished=None):
        """Sources flagged in `finished` are done from the start, with empty hypotheses."""
        k = self.beam_size
        starts = ops.repeat(start_ids(batch_size, max_length, self.start_id, self.pad_id), k, axis=0)
        seqs = ops.reshape(starts, (batch_size, k, max_length + 1))
        # Only the first beam is live at first, so the first step does not pick duplicates.
        log_probs = ops.tile(ops.convert_to_tensor([[0.0] + [NEG_INF] * (k - 1)]), (batch_size, 1))
        done = finished_flags(batch_size, finished)
        fin_scores = ops.where(done[:, None], 0.0, ops.full((batch_size, k), NEG_INF))
        return seqs, log_probs, ops.full_like(seqs, self.pad_id), fin_scores, done

    def tokens(self, index, rows):
        return ops.reshape(ops.take(rows[0], index, axis=2), (-1,))

    def done(self, rows):
        return rows[4]

    def stops(self, log_probs, fin_scores, length):
        """Boolean `(batch,)`: the sources that `stopping` ends, live beams `length` tokens long."""
        penalty = rules.length_penalty(ops.cast(length, "float32"), self.alpha, self.normalization, ops)
        return rules.stops(self.stopping, log_probs[:, 0], fin_scores[:, -1], penalty, ops)

    def update(self, index, rows, logits):
        k = self.beam_size
        seqs, log_probs, fin_seqs, fin_scores, done = rows
        vocab = ops.shape(logits)[-1]
        top_scores, top_index = best_candidates(logits, log_probs, 2 * k, normalize=not self.normalized)  # (batch, 2k)
        parent, token = top_index // vocab, ops.cast(top_index % vocab, "int32")
        cand_seqs = ops.take_along_axis(seqs, parent[:, :, None], axis=1)
        cand_seqs = ops.slice_update(cand_seqs, (0, 0, index + 1), token[:, :, None])
        ended = ops.equal(token, self.end_id)

        # The k best candidates that did not end stay alive; the loop reorders the state.
        alive_scores, alive = ops.top_k(ops.where(ended, NEG_INF, top_scores), k)
        seqs = ops.take_along_axis(cand_seqs, alive[:, :, None], axis=1)
        parents = ops.cast(ops.take_along_axis(parent, alive, axis=1), "int32")

        # Ended candidates among the k best join the finished list (frozen once
        # a source is done); lower-ranked endings are dropped, as in fairseq.
        accept = ops.logical_and(ended, ops.arange(2 * k, dtype="int32")[None] < k)
        accept = ops.logical_and(accept, ops.logical_not(done)[:, None])
        new_scores = ops.where(accept, self.normalise(top_scores, index + 1), NEG_INF)
        fin_scores, fin_seqs = _merge(fin_scores, fin_seqs, new_scores, cand_seqs, k)
        done = ops.logical_or(done, self.stops(alive_scores, fin_scores, index + 1))
        return (seqs, alive_scores, fin_seqs, fin_scores, done), parents

    def finish(self, index, rows):
        # Sources cut off by max_length: their live beams (best first) take the
        # places that no ended hypothesis holds, after the ended ones.
        k = self.beam_size
        seqs, log_probs, fin_seqs, fin_scores, _ = rows
        num_finished = ops.sum(ops.cast(fin_scores > NEG_INF, "int32"), axis=1, keepdims=True)  # (batch, 1)
        place = ops.arange(k, dtype="int32")[None]  # (1, k)
        is_finished = place < num_finished  # (batch, k)
        pick = ops.where(is_finished, place, k + place - num_finished)  # into [finished, unfinished]
        all_scores = ops.concatenate([fin_scores, self.normalise(log_probs, index)], axis=1)
        scores = ops.take_along_axis(all_scores, pick, axis=1)
        ids = ops.take_along_axis(ops.concatenate([fin_seqs, seqs], axis=1), pick[:, :, None], axis=1)
        return SearchResult(ids[:, :, 1:], scores, is_finished)


def _merge(scores, seqs, new_scores, new_seqs, k):
    """The k best of two scored lists of hypotheses, best first."""
    scores, index = ops.top_k(ops.concatenate([scores, new_scores], axis=1), k)
    seqs = ops.take_along_axis(ops.concatenate([seqs, new_seqs], axis=1), index[:, :, None], axis=1)
    return scores, seqs


def _block_size(vocab, largest):
    """A divisor of `vocab` from `largest / 2` to `largest`, else `largest`: padding is a copy."""
    divisors = [size for size in range(largest, (largest - 1) // 2, -1) if vocab % size == 0]
    return divisors[0] if divisors else largest


def best_candidates(logits, log_probs, count, normalize=True):
    """The `count` best continuations of each source's beams: beam search's top-k.

    A continuation's score is its beam's log-probability plus the token's
    `log_softmax(logits)` (with `normalize=False`, `logits` are taken as
    log-probabilities as they are); its index is `beam * vocabulary + token`.

    Args:
        logits: `(batch * beams, vocabulary)`, the beams of a source next to
            each other.
        log_probs: `(batch, beams)`.
        count: how many continuations to keep.

    Returns:
        `(scores, index)`, each `(batch, count)`, best first, equal scores in
        index order: what `ops.top_k` of all `beams * vocabulary` scores
        gives, without writing them. Each beam's tokens are cut into blocks
        (of about `BLOCK`, fewer for a small vocabulary); the `count` blocks
        with the best maxima hold the `count` best scores, so only they are
        searched, and the log-softmax is one more pass over the logits
        (docs/performance.md has the timings). When fewer than `count` scores
        are finite, the `-inf` ones may name any token.

    Example:

    >>> logits = keras.ops.convert_to_tensor([[0.0] * 1000 + [5.0, 1.0, 5.0]] * 2)
    >>> scores, index = best_candidates(logits, keras.ops.convert_to_tensor([[0.0, -9.0]]), 3)
    >>> keras.ops.convert_to_numpy(index).tolist()
    [[1000, 1002, 1001]]
    """
    beams = log_probs.shape[1]
    vocab = logits.shape[-1]
    logits = ops.reshape(logits, (-1, beams, vocab))
    size = _block_size(vocab, min(BLOCK, max(1, beams * vocab // (4 * count))))  # >= 4 * count blocks
    num_blocks = -(-vocab // size)
    padded = ops.pad(logits, ((0, 0), (0, 0), (0, num_blocks * size - vocab)), constant_values=NEG_INF)
    blocks = ops.reshape(padded, (-1, beams * num_blocks, size))
    block_max = ops.reshape(ops.max(blocks, axis=-1), (-1, beams, num_blocks))
    if normalize:
        top = ops.max(block_max, axis=-1, keepdims=True)  # (batch, beams, 1)
        log_norm = ops.log(ops.sum(ops.exp(logits - top), axis=-1, keepdims=True))
        shift = log_probs[:, :, None] - (top + log_norm)  # score = logit + shift
    else:
        shift = log_probs[:, :, None]
    best = ops.top_k(ops.reshape(block_max + shift, (-1, beams * num_blocks)), count)[1]
    best = ops.sort(best, axis=-1)  # in index order, so that equal scores keep it
    shift = ops.take_along_axis(ops.reshape(shift, (-1, beams)), best // num_blocks, axis=1)
    candidates = ops.take_along_axis(blocks, best[:, :, None], axis=1) + shift[:, :, None]
    scores, index = ops.top_k(ops.reshape(candidates, (-1, count * size)), count)
    block = ops.take_along_axis(best, index // size, axis=1)
    token = (block % num_blocks) * size + index % size
    return scores, (block // num_blocks) * vocab + ops.minimum(token, vocab - 1)
