"""The loop every search runs, and what the searches share: the step, the result, the special ids, the scores.

A decoder step is `step_fn(tokens, index, state) -> (logits, state)`: the
searches need nothing else of a model, so they are tested with a constructed
step (`keras_transformer.decoding.cache` gives the cached step of a
Transformer). A `Step` adds the two functions the searches call on its
state: `resize_state(state, length)` and `reorder_state(state, parents)`.

A search is an object, `GreedySearch`, `SamplingSearch` or `BeamSearch`,
that says what its loop carries (`initial_rows`), which tokens the step reads
(`tokens`), what a step's logits do to its rows (`update`), which sources are
done (`done`) and what it returns (`finish`). The base class `Search` owns
the loop: `Search.run` runs one `keras.ops.while_loop` per cache phase
(`phases`), all with static shapes, so a whole search compiles into one XLA
program, and every search returns a `SearchResult` `(ids, scores,
finished)`. The base class also owns what every search does to a step's
logits before choosing (`Search.processed`: the banned ids, the forced END,
the log-softmax) and how it scores a hypothesis (`Search.normalise`). The
loop variables are `(index, rows, state)`: the step index, the search's own
tensors (`rows`, one row per source on axis 0, so that
`keras_transformer.decoding.compaction` may drop the sources that are done)
and the step's `state`.

Example (a step whose next token is always END):

>>> def step_fn(tokens, index, state):
...     logits = keras.ops.one_hot(keras.ops.full_like(tokens, END_ID), 8) * 10.0
...     return logits, state
>>> from keras_transformer.decoding.greedy_search import GreedySearch
>>> result = GreedySearch().run(step_fn, (), batch_size=2, max_length=4)
>>> keras.ops.convert_to_numpy(result.ids).tolist()
[[[3, 0, 0, 0]], [[3, 0, 0, 0]]]
"""

import dataclasses
from collections.abc import Callable
from typing import NamedTuple

import keras
from keras import ops

from keras_transformer.config import END_ID, PAD_ID, START_ID
from keras_transformer.decoding import rules
from keras_transformer.kinds import MAX_BEAM_SIZE, check_choice, check_int_in_range

NEG_INF = rules.NEG_INF


class TruncatedOutputWarning(UserWarning):
    """A decoded output reached `max_length` before END: it is cut off.

    Raised (with `warnings.warn`) by the Python side of the `Translator`; the
    searches report the same thing as `SearchResult.finished` False.

    Example (a server that would rather fail than return a cut-off output):

    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("error", TruncatedOutputWarning)
    ...     try:
    ...         warnings.warn("`sentences[0]` was cut off", TruncatedOutputWarning)
    ...     except TruncatedOutputWarning as error:
    ...         print("refused:", error)
    refused: `sentences[0]` was cut off
    """


class SearchResult(NamedTuple):
    """What every search returns: each source's hypotheses, best first.

    `beams` is the search's `beam_size`: 1 for greedy search and sampling.

    Attributes:
        ids: int32 `(batch, beams, max_length)`: the tokens after START, END
            included, PAD after END; all PAD for an empty source.
        scores: float32 `(batch, beams)`: the log-probability divided by the
            search's length penalty (`Search.normalise`: by default
            `rules.length_penalty(length, alpha)`), length counting END (`alpha=0`:
            the plain log-probability). Beam search ranks by it; greedy
            search and sampling only report it.
        finished: bool `(batch, beams)`: False for a hypothesis cut off at
            `max_length` before END (True for an empty source).

    Example:

    >>> ids, scores = keras.ops.ones((2, 3, 5), "int32"), keras.ops.zeros((2, 3))
    >>> result = SearchResult(ids, scores, finished=keras.ops.ones((2, 3), "bool"))
    >>> tuple(result.best().ids.shape), tuple(result.best().scores.shape)
    ((2, 5), (2,))
    """

    ids: object
    scores: object
    finished: object

    def best(self):
        """The first hypothesis of each source: ids `(batch, max_length)`, scores and finished `(batch,)`."""
        return SearchResult(self.ids[:, 0], self.scores[:, 0], self.finished[:, 0])


class Step(NamedTuple):
    """A decoder step and the functions over its state that the searches call.

    Attributes:
        fn: `fn(tokens, index, state) -> (logits, state)`; `tokens` and the
            logits have one row per hypothesis (`batch * beams`).
        resize_state: `resize_state(state, length)`, the state with room for
            `length` positions (`cache.resize_cache`): the search then runs in
            `phases`. None: one phase, the state as it is.
        reorder_state: `reorder_state(state, parents)`, the state after beam
            search picked `parents` `(batch, beams)` (`cache.reorder_beams`).
            None: every state tensor's rows are gathered from the parents.
    """

    fn: Callable
    resize_state: Callable = None
    reorder_state: Callable = None


def as_step(step):
    """`step` as a `Step`: a bare step function is a `Step` with neither state function."""
    return step if isinstance(step, Step) else Step(step)


def check_beam_size(beam_size):
    """`beam_size`, an int in [1, MAX_BEAM_SIZE], or a `ValueError` naming it."""
    return check_int_in_range("beam_size", beam_size, 1, MAX_BEAM_SIZE)


def phases(max_length, resize_state):
    """The state lengths a search runs through: max_length / 4, / 2, then max_length.

    One phase (`max_length`) without `resize_state`.
    """
    if resize_state is None:
        return [max_length]
    return sorted({-(-max_length // 4), -(-max_length // 2), max_length})


@dataclasses.dataclass(frozen=True, kw_only=True)
class Search:
    """The base of the searches: the loop, the special ids, what a step's logits go through, the scores.

    A subclass defines `initial_rows`, `tokens`, `update`, `done` and
    `finish`; `run` (and `keras_transformer.decoding.compaction`) runs them.
    Searches are frozen dataclasses: `replace(temperature=...)` gives a copy
    with other settings (tensors too, as the `Translator` passes them).

    Every step's logits go through `processed` before the search chooses:
    the `banned_ids` and, with `force_end`, every token but END at the last
    step are set to -inf. With `softmax_over="allowed"` (the default) that
    happens to the logits, and the log-softmax that scores the tokens is
    taken over the tokens left; with `"vocabulary"` the log-softmax is taken
    over the whole vocabulary first and the bans and forcing come after it,
    the order of Hugging Face transformers' beam search (a banned token's
    probability is then lost, not shared out). A forced END scores
    log-probability 0 either way.

    Args (keyword only; the defaults are this package's own models):
        alpha: the exponent of the length penalty that divides the scores
            (`normalise`); beam search also ranks by it.
        start_id: the token the outputs start from (not returned).
        end_id: the token that ends an output.
        pad_id: the token after END in the outputs, and of empty sources.
            The three ids default to None: a search bound to a model
            (`bind`, `compile_search`, the one-call decoders) takes that
            model's (`model.config.special_ids()`), and one run over a bare
            step function the package's (`with_ids`).
        normalization: `"gnmt"`, `log p / ((5 + len) / 6) ** alpha`, or
            `"length"`, `log p / len ** alpha` (transformers'
            `length_penalty`); `len` counts the generated tokens, END
            included.
        banned_ids: the ids never generated (a tuple of ints); None: PAD
            and START (`pad_id`, `start_id`).
        force_end: at the last step (`max_length` tokens), END is the only
            token allowed (transformers' `forced_eos_token_id`), so every
            output ends.
        softmax_over: `"allowed"` or `"vocabulary"`, see above.
        ban_mask: bool `(vocab,)`, True at the ids a call bans besides
            (its banned words, `translators.banned_words`), set to -inf as
            `banned_ids` are (`rules.ban`); a tensor given per call
            (`compile_search`'s settings, `rules.ids_mask`). None: none.
    """

    alpha: float = 0.6
    start_id: int = None
    end_id: int = None
    pad_id: int = None
    normalization: str = "gnmt"
    banned_ids: tuple = None
    force_end: bool = False
    softmax_over: str = "allowed"
    ban_mask: object = None

    beam_size = 1  # hypotheses per source (`BeamSearch` sets it)

    def __post_init__(self):
        check_choice("normalization", self.normalization, rules.NORMALIZATIONS)
        check_choice("softmax_over", self.softmax_over, rules.SOFTMAX_OVER)
        if self.banned_ids is not None:
            if isinstance(self.banned_ids, int) or not all(isinstance(i, int) for i in self.banned_ids):
                raise ValueError(f"`banned_ids` must be a tuple of ints or None. Received: {self.banned_ids!r}")
            object.__setattr__(self, "banned_ids", tuple(self.banned_ids))

    def replace(self, **settings):
        """A copy with `settings` changed."""
        return dataclasses.replace(self, **settings)

    def with_ids(self, start_id=START_ID, end_id=END_ID, pad_id=PAD_ID):
        """A copy whose ids left None take these: a model's (`bind` passes `model.config`'s), else the package's."""
        given = dict(start_id=start_id, end_id=end_id, pad_id=pad_id)
        return self.replace(**{name: value for name, value in given.items() if getattr(self, name) is None})

    @property
    def never_generated(self):
        """The ids set to -inf at every step (`rules.never_generated`: `banned_ids`, START, PAD where allowed)."""
        return rules.never_generated(self.start_id, self.end_id, self.pad_id, self.banned_ids or (), self.softmax_over)

    @property
    def normalized(self):
        """Whether `processed` returns log-probabilities (`softmax_over="vocabulary"`) rather than logits."""
        return self.softmax_over == "vocabulary"

    def processed(self, logits, index=None, max_length=None, forced=None):
        """`logits` `(..., vocab)` as float32, as the search chooses from them.

        The `never_generated` ids and those of `ban_mask` at -inf and, with `force_end` at the last
        step (`index == max_length - 1`; not applied where either is None),
        every token but END at -inf and END at 0. With
        `softmax_over="vocabulary"` these are log-probabilities, taken
        over the whole vocabulary before the bans and the forcing. `forced`
        `(rows,)` (int, -1 where free) names a token a row must take at this
        step, a forced prefix's (`start_ids`): every other token at -inf,
        that one at 0, so that it adds nothing to the score.
        """
        logits = ops.cast(logits, "float32")
        if self.normalized:
            logits = ops.log_softmax(logits, axis=-1)
        vocab_size = ops.shape(logits)[-1]
        if self.never_generated:
            logits = ops.where(rules.banned_mask(vocab_size, self.never_generated, ops), NEG_INF, logits)
        if self.ban_mask is not None:
            logits = rules.ban(logits, self.ban_mask, ops)
        if self.force_end and index is not None and max_length is not None:
            forced_end = rules.forced_end_scores(vocab_size, self.end_id, ops)
            logits = ops.where(rules.is_forced_step(index, max_length), forced_end, logits)
        if forced is not None:
            logits = rules.forced_token_scores(logits, forced, ops)
        return logits

    def forced(self, index, rows):
        """The token each step row must take at step `index` (a forced prefix's), -1 where free; None: none."""
        return None

    def normalise(self, log_probs, length):
        """Scores: `log_probs` over the length penalty of `length` tokens (END included); see `normalization`."""
        return rules.normalise(log_probs, ops.cast(length, "float32"), self.alpha, self.normalization, ops)

    def run(self, step, state, batch_size, max_length, *inputs, finished=None, prefix=None):
        """The search over `step` (a `Step`, or a bare `step_fn`) from its first token; a `SearchResult`.

        Args:
            step: `step_fn(tokens, index, state) -> (logits, state)`, or a
                `Step` with its state functions.
            state: the step's state before the first token.
            batch_size: sources; the step sees `batch_size * beam_size` rows.
            max_length: tokens to generate at most (a Python int).
            *inputs: the search's own inputs (`SamplingSearch`: `noise`).
            finished: boolean `(batch,)`: sources that produce nothing (e.g.
                empty ones); None: none.
            prefix: int `(batch, length)`: the tokens each source's output
                must begin with (-1 where it is free: rows of other
                lengths); None: none. See `start_ids`.

        The loop stops once every source is done, or after `max_length` steps.
        """
        search = self.with_ids()  # a bare step has no model to take ids from: the package's, where not given
        rows = search.initial_rows(batch_size, max_length, finished, *inputs, prefix=prefix)
        return search.loop(as_step(step), rows, state, max_length)

    def loop(self, step, rows, state, max_length):
        """The steps from `rows` and `state` until every source is done or `max_length` steps; the result.

        With `step.resize_state`, one loop per phase of `phases`, each with
        its own static shapes; a phase whose start finds every source done
        runs no step.
        """
        index = ops.convert_to_tensor(0, "int32")
        for length in phases(max_length, step.resize_state):
            if step.resize_state is not None:
                state = step.resize_state(state, length)
            index, rows, state = self.steps(step, index, rows, state, length)
        return self.finish(index, rows)

    def steps(self, step, index, rows, state, stop):
        """One `while_loop` of steps, while `index < stop` (an int or a tensor) and a source is not done."""

        def cond(index, rows, state):
            return ops.logical_and(index < stop, ops.logical_not(ops.all(self.done(rows))))

        return ops.while_loop(cond, self.body(step), (index, rows, state))

    def body(self, step):
        """`body(index, rows, state) -> (index + 1, rows, state)`: one step of the loop."""
        reorder_state = step.reorder_state or reorder_rows

        def body(index, rows, state):
            logits, state = step.fn(self.tokens(index, rows), index, state)
            processed = self.processed(logits, index, self.max_length(rows), self.forced(index, rows))
            rows, parents = self.update(index, rows, processed)
            if parents is not None:  # the hypotheses moved: so does their state
                state = reorder_state(state, parents)
            return index + 1, rows, state

        return body

    @staticmethod
    def max_length(rows):
        """The tokens a search generates at most: its first row holds the ids, START included."""
        return rows[0].shape[-1] - 1

    # What each search defines.

    def initial_rows(self, batch_size, max_length, finished=None, *inputs, prefix=None):
        """The loop's first `rows`: a tuple of tensors with one row per source on axis 0 (`prefix`: see `run`)."""
        raise NotImplementedError

    def tokens(self, index, rows):
        """The tokens the step reads at `index`: `(batch * beam_size,)` int32."""
        raise NotImplementedError

    def update(self, index, rows, logits):
        """`(rows, parents)` after a step whose logits are `logits` (as `processed` gives them).

        `parents` `(batch, beam_size)` names the hypothesis each new one
        continues (the loop reorders the step's state by it), or None where
        every hypothesis continues itself.
        """
        raise NotImplementedError

    def done(self, rows):
        """Boolean `(batch,)`: the sources that need no more steps."""
        raise NotImplementedError

    def finish(self, index, rows):
        """The `SearchResult` of the rows after `index` steps."""
        raise NotImplementedError


def start_ids(batch_size, max_length, start_id, pad_id=PAD_ID, prefix=None, finished=None):
    """`(batch_size, max_length + 1)` int32: START, then PAD; a forced prefix's tokens marked after START.

    `prefix` `(batch_size, length)` (-1 where free) names the first tokens
    each output must take: they are written as `-(token + 1)`, a mark no id
    has, which the search's `forced` reads at each step and `update`
    overwrites with the token. A source `finished` from the start keeps PAD;
    a prefix longer than `max_length` is cut to it.

    Example:

    >>> ids = start_ids(2, 4, start_id=2, pad_id=0, prefix=keras.ops.convert_to_tensor([[7, 8], [9, -1]]))
    >>> keras.ops.convert_to_numpy(ids).tolist()
    [[2, -8, -9, 0, 0], [2, -10, 0, 0, 0]]
    """
    ids = ops.full((batch_size, max_length + 1), pad_id, "int32")
    ids = ops.slice_update(ids, (0, 0), ops.full((batch_size, 1), start_id, "int32"))
    if prefix is None:
        return ids
    prefix = ops.cast(prefix, "int32")[:, :max_length]
    width = prefix.shape[1]
    if width == 0:
        return ids
    marks = ops.where(ops.greater_equal(prefix, 0), -(prefix + 1), pad_id)
    if finished is not None:
        marks = ops.where(ops.cast(finished, "bool")[:, None], pad_id, marks)
    return ops.slice_update(ids, (0, 1), marks)


def forced_tokens(marks):
    """The forced tokens of `marks` (a slice of `start_ids`' ids), -1 where a row is free."""
    return ops.where(ops.less(marks, 0), -marks - 1, -1)


def finished_flags(batch_size, finished=None):
    """`finished` as bool `(batch_size,)`, all False when None."""
    if finished is None:
        return ops.zeros((batch_size,), "bool")
    return ops.cast(finished, "bool")


def reorder_rows(state, parents):
    """Every state tensor's rows `(batch * k, ...)` gathered from the parent beams `(batch, k)`."""
    k = parents.shape[1]
    offsets = ops.arange(ops.shape(parents)[0], dtype="int32")[:, None] * k
    rows = ops.reshape(parents + offsets, (-1,))
    return keras.tree.map_structure(lambda x: ops.take(x, rows, axis=0), state)
