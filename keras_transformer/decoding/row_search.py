"""A search's step with a step index per row: each source at its own position, as in-flight batching needs.

`Search.body` runs every row of a batch at the same step `index`. A pool of
rows that sources join and leave between steps (`row_pool.RowPool`) holds
each source at its own position instead: `positions`, int `(rows,)`, the
tokens each row has generated. `RowSearch` wraps a `GreedySearch`,
`SamplingSearch` or `BeamSearch` and gives the same rows, tokens and
updates as the search's own `tokens`, `forced`, `update` and `finish`, each
row read and written at its own position, so that a source decoded in a
pool gets the ids and scores it gets alone. It reuses the search's
`processed`, `choose`, `normalise`, `stops` and `finish`; only the column
each row reads and writes moves.

A row is `active` while it is not done and has generated fewer than
`max_length` tokens; the others are left as they are (their results are
read once, when they leave the pool).

Example (two rows, one three tokens further on):

>>> rows = RowSearch(GreedySearch(alpha=0.0).with_ids(), max_length=4)
>>> initial = rows.initial_rows(2)
>>> positions = keras.ops.convert_to_tensor([0, 3])
>>> keras.ops.convert_to_numpy(rows.tokens(positions, initial)).tolist()  # START, and PAD where nothing was written
[2, 0]
"""

import keras  # noqa: F401  (the example)
from keras import ops

from keras_transformer.decoding.beam_search import BeamSearch, _merge, best_candidates
from keras_transformer.decoding.greedy_search import GreedySearch, TokenSearch, chosen_log_probs  # noqa: F401
from keras_transformer.decoding.search import NEG_INF, forced_tokens


class RowSearch:
    """`search` (a `TokenSearch` or `BeamSearch` with its ids set) with a position per row.

    Args:
        search: the search, its `start_id`, `end_id` and `pad_id` set (`Search.with_ids`).
        max_length: tokens a row generates at most.
    """

    def __init__(self, search, max_length):
        if not isinstance(search, (TokenSearch, BeamSearch)):
            raise ValueError(f"`search` must be a token search or a beam search. Received: search={search!r}")
        self.search, self.max_length = search, max_length
        self.beams = search.beam_size

    def replace(self, **settings):
        """A `RowSearch` of the search with `settings` changed (scalar tensors: sampling's numbers)."""
        return RowSearch(self.search.replace(**settings), self.max_length)

    def initial_rows(self, count, finished=None, *inputs, prefix=None):
        """The search's first rows for `count` sources (`finished`: those that produce nothing)."""
        if finished is None:
            finished = ops.zeros((count,), "bool")
        return self.search.initial_rows(count, self.max_length, finished, *inputs, prefix=prefix)

    def done(self, positions, rows):
        """Boolean `(rows,)`: done by the search's rule, or `max_length` tokens long."""
        return ops.logical_or(self.search.done(rows), ops.greater_equal(positions, self.max_length))

    def tokens(self, positions, rows):
        """The tokens the step reads, `(rows * beams,)`: each row's at its own position."""
        return self._column(rows[0], positions)

    def forced(self, positions, rows):
        """The token each step row must take next (a forced prefix's), -1 where free."""
        return forced_tokens(self._column(rows[0], ops.minimum(positions + 1, self.max_length)))

    def step_positions(self, positions):
        """`positions` once per step row `(rows * beams,)`: the beams of a row sit at its position."""
        return ops.repeat(positions, self.beams, axis=0) if self.beams > 1 else positions

    def update(self, positions, rows, logits, active):
        """`(rows, parents)` after a step whose logits (`processed`) are `logits`; inactive rows unchanged.

        `parents` `(rows, beams)` is None for a token search.
        """
        if isinstance(self.search, BeamSearch):
            new, parents = self._beam_update(positions, rows, logits)
            parents = ops.where(active[:, None], parents, ops.arange(self.beams, dtype="int32")[None])
        else:
            new, parents = self._token_update(positions, rows, logits), None
        kept = tuple(_where_rows(active, n, o) for n, o in zip(new, rows))
        return kept, parents

    def finish(self, positions, rows):
        """The `SearchResult` of `rows` whose positions are `positions` (rows leaving the pool)."""
        return self.search.finish(positions[:, None], rows)

    def _column(self, ids, positions):
        """`ids[..., position]` of each row: `(rows,)` for `(rows, length)`, `(rows * beams,)` for beams."""
        if len(ids.shape) == 2:
            return ops.take_along_axis(ids, positions[:, None], axis=1)[:, 0]
        index = ops.broadcast_to(positions[:, None, None], (ops.shape(ids)[0], ids.shape[1], 1))
        return ops.reshape(ops.take_along_axis(ids, index, axis=2), (-1,))

    def _token_update(self, positions, rows, logits):
        """`TokenSearch.update`, each row at its position (sampling's noise read there)."""
        search = self.search
        ids, log_probs, finished, *extras = rows
        at = ops.minimum(positions, self.max_length - 1)[:, None]
        noise = [ops.take_along_axis(extra, at, axis=1) for extra in extras]  # (rows, 1): `choose` reads column 0
        tokens = ops.where(finished, search.pad_id, ops.cast(search.choose(logits, 0, *noise), "int32"))
        if search.normalized:
            token_log_probs = ops.take_along_axis(logits, tokens[:, None], axis=1)[:, 0]
        else:
            token_log_probs = chosen_log_probs(logits, tokens)
        log_probs = log_probs + ops.where(finished, 0.0, token_log_probs)
        ids = _write_column(ids, positions + 1, tokens[:, None])
        finished = ops.logical_or(finished, ops.equal(tokens, search.end_id))
        return (ids, log_probs, finished, *extras)

    def _beam_update(self, positions, rows, logits):
        """`BeamSearch.update`, each row's lengths (its penalty, its stopping rule) its own."""
        search, k = self.search, self.beams
        seqs, log_probs, fin_seqs, fin_scores, done = rows
        vocab = ops.shape(logits)[-1]
        top_scores, top_index = best_candidates(logits, log_probs, 2 * k, normalize=not search.normalized)
        parent, token = top_index // vocab, ops.cast(top_index % vocab, "int32")
        cand_seqs = ops.take_along_axis(seqs, parent[:, :, None], axis=1)
        cand_seqs = _write_column(cand_seqs, (positions + 1)[:, None], token[:, :, None])
        ended = ops.equal(token, search.end_id)
        alive_scores, alive = ops.top_k(ops.where(ended, NEG_INF, top_scores), k)
        seqs = ops.take_along_axis(cand_seqs, alive[:, :, None], axis=1)
        parents = ops.cast(ops.take_along_axis(parent, alive, axis=1), "int32")
        accept = ops.logical_and(ended, ops.arange(2 * k, dtype="int32")[None] < k)
        accept = ops.logical_and(accept, ops.logical_not(done)[:, None])
        lengths = positions + 1
        new_scores = ops.where(accept, search.normalise(top_scores, lengths[:, None]), NEG_INF)
        fin_scores, fin_seqs = _merge(fin_scores, fin_seqs, new_scores, cand_seqs, k)
        done = ops.logical_or(done, search.stops(alive_scores, fin_scores, lengths))
        return (seqs, alive_scores, fin_seqs, fin_scores, done), parents


def _write_column(ids, columns, values):
    """`ids` `(rows, ..., length)` with `values` written at each row's column (`columns` broadcast like `values`)."""
    width = ids.shape[-1]
    here = ops.equal(ops.arange(width, dtype="int32"), ops.expand_dims(columns, -1))
    return ops.where(here, values, ids)


def _where_rows(active, new, old):
    """`new` where a row is `active`, else `old` (any rank, rows on axis 0)."""
    return ops.where(ops.reshape(active, (-1,) + (1,) * (len(new.shape) - 1)), new, old)
