"""Greedy search: the most likely token at every step; and `TokenSearch`, what it shares with sampling.

A token search keeps one hypothesis per source and picks its next token
from the step's logits alone (`TokenSearch.choose`): the most likely one
(`GreedySearch`) or a draw (`keras_transformer.decoding.sampling_search`).
Its rows are `(ids (batch, max_length + 1), log_probs (batch,), finished
(batch,), *extras)`: the ids start with START; `log_probs` sums the model's
log-probability of each chosen token (the distribution of the step's
logits after `Search.processed`, before any sampling filter); `extras` are
per-source inputs of `choose` (sampling's noise).

Example (a step that prefers token 5, then END):

>>> def step_fn(tokens, index, state):
...     favourite = keras.ops.where(index < 2, 5, END_ID)
...     return keras.ops.one_hot(keras.ops.full_like(tokens, favourite), 8) * 10.0, state
>>> result = GreedySearch(alpha=0.0).run(step_fn, (), batch_size=1, max_length=4)
>>> keras.ops.convert_to_numpy(result.ids).tolist(), keras.ops.convert_to_numpy(result.finished).tolist()
([[[5, 5, 3, 0]]], [[True]])
"""

import dataclasses

import keras  # noqa: F401  (the examples)
from keras import ops

from keras_transformer.config import END_ID  # noqa: F401  (the example above)
from keras_transformer.decoding.search import Search, SearchResult, finished_flags, forced_tokens, start_ids


@dataclasses.dataclass(frozen=True)
class TokenSearch(Search):
    """One hypothesis per source, extended by `choose(logits, index, *extras)` at every step.

    A source is done once it has produced END (or was flagged `finished` at
    the start); it then produces PAD. Its score is its log-probability over
    the length penalty of its token count (`Search.normalise`).

    Args: `Search`'s (keyword only).
    """

    def choose(self, logits, index, *extras):
        """The next token of each source, `(batch,)`, from the logits `(batch, vocab)` of step `index`."""
        raise NotImplementedError

    def initial_rows(self, batch_size, max_length, finished=None, *extras, prefix=None):
        """`(ids, log_probs, finished, *extras)`; sources flagged in `finished` produce nothing."""
        finished = finished_flags(batch_size, finished)
        ids = start_ids(batch_size, max_length, self.start_id, self.pad_id, prefix, finished)
        return (ids, ops.zeros((batch_size,), "float32"), finished, *extras)

    def tokens(self, index, rows):
        return ops.take(rows[0], index, axis=1)

    def forced(self, index, rows):
        return forced_tokens(ops.take(rows[0], index + 1, axis=1))

    def update(self, index, rows, logits):
        ids, log_probs, finished, *extras = rows
        tokens = ops.where(finished, self.pad_id, ops.cast(self.choose(logits, index, *extras), "int32"))
        if self.normalized:  # `logits` are log-probabilities already
            token_log_probs = ops.take_along_axis(logits, tokens[:, None], axis=1)[:, 0]
        else:
            token_log_probs = chosen_log_probs(logits, tokens)
        log_probs = log_probs + ops.where(finished, 0.0, token_log_probs)
        ids = ops.slice_update(ids, (0, index + 1), tokens[:, None])
        finished = ops.logical_or(finished, ops.equal(tokens, self.end_id))
        return (ids, log_probs, finished, *extras), None

    def done(self, rows):
        return rows[2]

    def finish(self, index, rows):
        ids, log_probs, finished = rows[:3]
        ids = ids[:, 1:]
        # The tokens up to the first END, END included (PAD may be END's own id: GPT-2 pads with it).
        is_end = ops.cast(ops.equal(ids, self.end_id), "int32")
        before_end = ops.equal(ops.cumsum(is_end, axis=1) - is_end, 0)
        counted = ops.logical_and(before_end, ops.logical_or(ops.not_equal(ids, self.pad_id), is_end > 0))
        length = ops.sum(ops.cast(counted, "int32"), axis=1)
        scores = self.normalise(log_probs, length)
        return SearchResult(ids[:, None], scores[:, None], finished[:, None])


@dataclasses.dataclass(frozen=True)
class GreedySearch(TokenSearch):
    """Greedy search: the most likely token at every step (the first one on a tie).

    Stops once every source has produced END, or after `max_length` tokens.
    A beam search of one beam finds the same ids; `search_for` runs this
    search for `beam_size=1`.

    Args (keyword only, `Search`'s):
        alpha: the length penalty's exponent of the reported scores (0: the
            plain log-probability); it does not change the ids.
        start_id, end_id, pad_id: the START, END and PAD token ids.
        normalization: how the reported scores are normalised (`"gnmt"`,
            `"length"`).
        banned_ids: ids never generated (None: PAD and START).
        force_end: END is the only token allowed at the last step.
        softmax_over: the log-softmax of the reported scores over the
            tokens left after the bans (`"allowed"`) or over the whole
            vocabulary (`"vocabulary"`); the ids are the same.
    """

    def choose(self, logits, index, *extras):
        return first_max_index(logits)


def first_max_index(logits):
    """`argmax` over the last axis (the first maximum on a tie), as two plain reductions.

    XLA:CPU vectorizes a maximum and a minimum, but runs `argmax`'s (value,
    index) reduction one element at a time (docs/performance.md).

    >>> keras.ops.convert_to_numpy(first_max_index(keras.ops.convert_to_tensor([[1.0, 3.0, 3.0, 2.0]]))).tolist()
    [1]
    """
    vocab = ops.shape(logits)[-1]
    top = ops.max(logits, axis=-1, keepdims=True)
    positions = ops.where(ops.equal(logits, top), ops.arange(vocab, dtype="int32")[None], vocab)
    return ops.minimum(ops.min(positions, axis=-1), vocab - 1)


def chosen_log_probs(logits, tokens):
    """`log_softmax(logits)` at `tokens` `(batch,)`, without writing the whole log-softmax.

    >>> logits = keras.ops.convert_to_tensor([[0.0, 0.0]])
    >>> round(float(chosen_log_probs(logits, keras.ops.convert_to_tensor([1]))[0]), 4)
    -0.6931
    """
    top = ops.max(logits, axis=-1, keepdims=True)
    log_norm = ops.log(ops.sum(ops.exp(logits - top), axis=-1))
    chosen = ops.take_along_axis(logits, ops.cast(tokens, "int32")[:, None], axis=1)[:, 0]
    return (chosen - top[:, 0]) - log_norm
