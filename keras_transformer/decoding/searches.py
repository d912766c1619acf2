"""The searches over any decoder step: greedy, sampling and beam search.

A step is `step_fn(tokens, index, state) -> (logits, state)`; the searches
need nothing else of a model, so they are testable with a constructed step
(`keras_transformer.decoding` gives the cached step of a Transformer).

Each search is a `Search`: the body of one step, the test of which sources
are done, and the finish that turns the loop's variables into outputs. The
loop variables are `(index, rows, state)`: the step index, the search's own
tensors (`rows`, one row per source on axis 0) and the step's `state`.
`run_search` runs it as one loop, or as phases whose state grows
(`resize_state`), all with static shapes, so a whole search compiles into
one XLA program; `keras_transformer.decoding.compaction` runs the same phases but
drops the sources that are done between them.

Example (a step whose next token is always END):

>>> def step_fn(tokens, index, state):
...     logits = keras.ops.one_hot(keras.ops.full_like(tokens, END_ID), 8) * 10.0
...     return logits, state
>>> ids = greedy_search(step_fn, (), batch_size=2, max_length=4)
>>> keras.ops.convert_to_numpy(ids).tolist()
[[3, 0, 0, 0], [3, 0, 0, 0]]

References:
    Wu et al., "Google's Neural Machine Translation System", 2016 (length
    penalty); Holtzman et al., "The Curious Case of Neural Text
    Degeneration", 2019 (top-p).
"""

from collections.abc import Callable
from typing import NamedTuple

import keras
from keras import ops

from keras_transformer.config import END_ID, START_ID

_NINF = float("-inf")


class Search(NamedTuple):
    """A search as the parts of its loop.

    `body(index, rows, state) -> (index, rows, state)` runs one step;
    `done(rows)` is boolean `(batch,)`, True for the sources that need no
    more steps; `finish(index, rows)` gives the search's outputs. Every
    tensor of `rows` has one row per source on axis 0, so sources may be
    dropped or reordered between steps (`keras_transformer.decoding.compaction`).
    """

    body: Callable
    done: Callable
    finish: Callable


def length_penalty(length, alpha=0.6):
    """GNMT length penalty `((5 + length) / 6) ** alpha`; scores are `log p / lp`."""
    return ops.power((5.0 + ops.cast(length, "float32")) / 6.0, alpha)


def phases(max_length, resize_state):
    """The state lengths a search runs through: max_length / 4, / 2, then max_length.

    One phase (`max_length`) without `resize_state`.
    """
    if resize_state is None:
        return [max_length]
    return sorted({-(-max_length // 4), -(-max_length // 2), max_length})


def run_phase(search, index, rows, state, length, resize_state=None, stop=None):
    """Steps of `search` with the state resized to `length`, while `index < stop` and a source is not done.

    `stop` (default `length`) may be a tensor. Returns `(index, rows, state)`.
    """
    if resize_state is not None:
        state = resize_state(state, length)
    stop = length if stop is None else stop

    def cond(index, rows, state):
        return ops.logical_and(index < stop, ops.logical_not(ops.all(search.done(rows))))

    return ops.while_loop(cond, search.body, (index, rows, state))


def run_search(search, rows, state, max_length, resize_state=None):
    """`search` from its first step until every source is done or `max_length` steps; its outputs.

    With `resize_state(state, length)` it runs in `phases`: each is its own
    loop with static shapes, and a phase whose start finds every source done
    runs no step.
    """
    index = ops.convert_to_tensor(0, "int32")
    for length in phases(max_length, resize_state):
        index, rows, state = run_phase(search, index, rows, state, length, resize_state)
    return search.finish(index, rows)


def allowed(logits, start_id):
    """Logits with PAD (0) and START set to -inf: they are never generated."""
    vocab = ops.arange(ops.shape(logits)[-1])
    banned = ops.logical_or(ops.equal(vocab, 0), ops.equal(vocab, start_id))
    return ops.where(banned[None], _NINF, ops.cast(logits, "float32"))


def _start(batch_size, max_length, start_id):
    ids = ops.zeros((batch_size, max_length + 1), "int32")
    return ops.slice_update(ids, (0, 0), ops.full((batch_size, 1), start_id, "int32"))


def _finished(batch_size, finished):
    if finished is None:
        return ops.zeros((batch_size,), "bool")
    return ops.cast(finished, "bool")


def outputs(ids, scores=None, finished=None):
    """`ids`, or the tuple `(ids, scores, finished)` of those asked for (not None)."""
    extra = tuple(x for x in (scores, finished) if x is not None)
    return (ids, *extra) if extra else ids


def token_search(choose, step_fn, start_id=START_ID, end_id=END_ID, return_finished=False, return_scores=False):
    """The `Search` of greedy decoding and sampling: `choose(logits, index, *extras) -> tokens`.

    Its rows (`token_rows`) are `(ids (batch, max_length + 1), log_probs,
    finished, *extras)`: the ids start with START; `log_probs` sums, per
    row, the model's log-probability of each chosen token (the distribution
    of `step_fn`'s logits, START excluded, before any sampling filter);
    `extras` are per-row inputs of `choose` (sampling's noise).
    """

    def body(index, rows, state):
        ids, log_probs, finished, *extras = rows
        logits, state = step_fn(ops.take(ids, index, axis=1), index, state)
        logits = allowed(logits, start_id)
        tokens = ops.where(finished, 0, ops.cast(choose(logits, index, *extras), "int32"))
        token_log_probs = chosen_log_probs(logits, tokens)
        log_probs = log_probs + ops.where(finished, 0.0, token_log_probs)
        ids = ops.slice_update(ids, (0, index + 1), tokens[:, None])
        finished = ops.logical_or(finished, ops.equal(tokens, end_id))
        return index + 1, (ids, log_probs, finished, *extras), state

    def finish(index, rows):
        ids, log_probs, finished = rows[:3]
        return outputs(ids[:, 1:], log_probs if return_scores else None, finished if return_finished else None)

    return Search(body, lambda rows: rows[2], finish)


def token_rows(batch_size, max_length, start_id=START_ID, finished=None, extras=()):
    """The first rows of `token_search`; rows flagged in `finished` produce nothing."""
    return (
        _start(batch_size, max_length, start_id),
        ops.zeros((batch_size,), "float32"),
        _finished(batch_size, finished),
        *extras,
    )


def greedy_search(
    step_fn,
    state,
    batch_size,
    max_length,
    start_id=START_ID,
    end_id=END_ID,
    finished=None,
    resize_state=None,
    return_finished=False,
    return_scores=False,
):
    """Greedy search over `step_fn(tokens, index, state) -> (logits, state)`.

    Returns ids `(batch, max_length)`: the argmax token at every step, END
    included, 0 after END. Rows flagged in `finished` (boolean `(batch,)`,
    e.g. empty sources) produce nothing. Stops early once every row has
    produced END. With `resize_state(state, length)` (e.g. `resize_cache`)
    the loop runs in phases whose state holds max_length / 4, / 2, then
    max_length positions. With `return_finished=True`, returns `(ids,
    finished)`: `finished` `(batch,)` is False for the rows cut off at
    `max_length` before END (True for the rows flagged on input). With
    `return_scores=True`, the float32 `scores` `(batch,)` come after the ids:
    each row's log-probability, the sum over its tokens, END included (0 for
    rows flagged on input). Both: `(ids, scores, finished)`.
    """
    search = token_search(greedy_choice, step_fn, start_id, end_id, return_finished, return_scores)
    rows = token_rows(batch_size, max_length, start_id, finished)
    return run_search(search, rows, state, max_length, resize_state)


def greedy_choice(logits, index):
    """The most likely token of each row (the first one on a tie)."""
    return first_max_index(logits)


def first_max_index(logits):
    """`argmax` over the last axis as two plain reductions, which XLA:CPU vectorizes.

    XLA:CPU runs `argmax`'s (value, index) reduction one element at a time;
    a maximum and then a minimum over the positions that reach it took
    about a quarter less (1.71 -> 1.32 ms at 100 rows of 12,000 tokens).

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


BLOCK = 128


def _block_size(vocab, largest):
    """A divisor of `vocab` from `largest / 2` to `largest`, else `largest`: padding is a copy."""
    divisors = [size for size in range(largest, (largest - 1) // 2, -1) if vocab % size == 0]
    return divisors[0] if divisors else largest


def best_candidates(logits, log_probs, count):
    """The `count` best continuations of each source's beams: beam search's top-k.

    A continuation's score is its beam's log-probability plus the token's
    `log_softmax(logits)`; its index is `beam * vocabulary + token`.

    Args:
        logits: `(batch * beams, vocabulary)`, the beams of a source next to
            each other.
        log_probs: `(batch, beams)`.
        count: how many continuations to keep.

    Returns:
        `(scores, index)`, each `(batch, count)`, best first, equal scores in
        index order: what `ops.top_k` of all `beams * vocabulary` scores
        gives, without writing them. Each beam's tokens are cut into blocks
        (of about `BLOCK`, fewer for a small vocabulary); the `count` blocks with
        the best maxima hold the `count` best scores, so only they are
        searched, and the log-softmax is one more pass over the logits.
        XLA:CPU's top-k over all 48,000 scores of 100 sources (4 beams,
        12,000 tokens) took 16 ms; blocks alone took it to 3.4 ms. (When
        fewer than `count` scores are finite, the `-inf` ones may name any
        token.)

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
    padded = ops.pad(logits, ((0, 0), (0, 0), (0, num_blocks * size - vocab)), constant_values=_NINF)
    blocks = ops.reshape(padded, (-1, beams * num_blocks, size))
    block_max = ops.reshape(ops.max(blocks, axis=-1), (-1, beams, num_blocks))
    top = ops.max(block_max, axis=-1, keepdims=True)  # (batch, beams, 1)
    log_norm = ops.log(ops.sum(ops.exp(logits - top), axis=-1, keepdims=True))
    shift = log_probs[:, :, None] - (top + log_norm)  # score = logit + shift
    best = ops.top_k(ops.reshape(block_max + shift, (-1, beams * num_blocks)), count)[1]
    best = ops.sort(best, axis=-1)  # in index order, so that equal scores keep it
    shift = ops.take_along_axis(ops.reshape(shift, (-1, beams)), best // num_blocks, axis=1)
    candidates = ops.take_along_axis(blocks, best[:, :, None], axis=1) + shift[:, :, None]
    scores, index = ops.top_k(ops.reshape(candidates, (-1, count * size)), count)
    block = ops.take_along_axis(best, index // size, axis=1)
    token = (block % num_blocks) * size + index % size
    return scores, (block // num_blocks) * vocab + ops.minimum(token, vocab - 1)


def filter_logits(logits, temperature=1.0, top_k=0, top_p=1.0):
    """Temperature, then top-k and top-p (nucleus) filtering of `(batch, vocab)` logits.

    Filtered-out tokens get `-inf`. `top_k=0` and `top_p=1.0` switch the
    filters off; all three may be Python numbers or scalar tensors. The most
    likely token is always kept. `temperature` must be > 0 here (see
    `sample_search` for 0 = greedy).
    """
    logits = ops.cast(logits, "float32") / ops.cast(temperature, "float32")
    static_off = isinstance(top_k, int) and top_k == 0 and isinstance(top_p, (int, float)) and top_p >= 1.0
    if static_off:
        return logits
    vocab = ops.shape(logits)[-1]
    ordered = ops.flip(ops.sort(logits, axis=-1), axis=-1)  # descending
    k = ops.cast(top_k, "int32")
    k = ops.where(k > 0, ops.minimum(k, vocab), vocab)
    probs = ops.softmax(ordered, axis=-1)
    before = ops.cumsum(probs, axis=-1) - probs  # probability mass above each token
    nucleus = ops.sum(ops.cast(before < ops.cast(top_p, "float32"), "int32"), axis=-1)
    keep = ops.maximum(ops.minimum(nucleus, k), 1)  # (batch,)
    threshold = ops.take_along_axis(ordered, (keep - 1)[:, None], axis=-1)
    return ops.where(logits >= threshold, logits, _NINF)


def sampling_choice(temperature=1.0, top_k=0, top_p=1.0):
    """`choose(logits, index, noise)` of sampling: inverts the filtered CDF at the row's noise.

    `noise` `(batch, max_length)` holds one uniform number in [0, 1) per row
    and step. `temperature=0` is greedy.
    """
    temperature = ops.cast(temperature, "float32")

    def choose(logits, index, noise):
        greedy = first_max_index(logits)
        filtered = filter_logits(logits, ops.maximum(temperature, 1e-6), top_k, top_p)
        cdf = ops.cumsum(ops.softmax(filtered, axis=-1), axis=-1)
        u = ops.take(ops.cast(noise, "float32"), index, axis=1)[:, None] * cdf[:, -1:]
        sampled = ops.sum(ops.cast(cdf <= u, "int32"), axis=-1)
        sampled = ops.minimum(sampled, ops.shape(logits)[-1] - 1)
        return ops.where(temperature > 0, sampled, greedy)

    return choose


def sample_search(
    step_fn,
    state,
    batch_size,
    max_length,
    temperature=1.0,
    top_k=0,
    top_p=1.0,
    seed=None,
    noise=None,
    start_id=START_ID,
    end_id=END_ID,
    finished=None,
    resize_state=None,
    return_finished=False,
    return_scores=False,
):
    """Sampling with temperature, top-k and top-p over `step_fn`.

    Randomness is one uniform number per row and step, drawn up front
    (`noise`, shape `(batch, max_length)`, values in [0, 1)) from `seed` (int
    or `keras.random.SeedGenerator`) unless given; the token is found by
    inverting the filtered distribution's CDF, so the loop itself is
    stateless and XLA-friendly. `temperature=0` is greedy. `finished`,
    `resize_state`, `return_finished` and `return_scores` as in
    `greedy_search` (the scores are the model's log-probabilities of the
    sampled tokens, before temperature and filters).
    """
    noise = sampling_noise(batch_size, max_length, seed, noise)
    choose = sampling_choice(temperature, top_k, top_p)
    search = token_search(choose, step_fn, start_id, end_id, return_finished, return_scores)
    rows = token_rows(batch_size, max_length, start_id, finished, extras=(noise,))
    return run_search(search, rows, state, max_length, resize_state)


def sampling_noise(batch_size, max_length, seed=None, noise=None):
    """`noise` as float32, or uniform noise `(batch_size, max_length)` drawn from `seed`."""
    if noise is None:
        noise = keras.random.uniform((batch_size, max_length), seed=seed)
    return ops.cast(noise, "float32")


def beam(step_fn, beam_size, alpha=0.6, end_id=END_ID, reorder_state=None, start_id=START_ID, return_finished=False):
    """The `Search` of beam search (see `beam_search`); its first rows are `beam_rows`.

    Its rows are `(seqs, log_probs, fin_seqs, fin_scores)`: the live beams
    `(batch, beam_size, max_length + 1)` and their log-probabilities, and
    the ended hypotheses with their length-normalised scores, best first.
    """
    k = check_beam_size(beam_size)
    if reorder_state is None:
        reorder_state = _reorder_rows
    top_rank = ops.arange(2 * k, dtype="int32")[None]

    def done(rows):
        return rows[3][:, -1] > _NINF  # the k-th best finished hypothesis exists

    def body(index, rows, state):
        seqs, log_probs, fin_seqs, fin_scores = rows
        tokens = ops.reshape(ops.take(seqs, index, axis=2), (-1,))
        logits, state = step_fn(tokens, index, state)
        logits = allowed(logits, start_id)
        vocab = ops.shape(logits)[-1]
        top_scores, top_index = best_candidates(logits, log_probs, 2 * k)  # (batch, 2k)
        parent, token = top_index // vocab, ops.cast(top_index % vocab, "int32")
        cand_seqs = ops.take_along_axis(seqs, parent[:, :, None], axis=1)
        cand_seqs = ops.slice_update(cand_seqs, (0, 0, index + 1), token[:, :, None])
        ended = ops.equal(token, end_id)

        # The k best candidates that did not end stay alive; reorder the caches.
        alive_scores, alive = ops.top_k(ops.where(ended, _NINF, top_scores), k)
        seqs = ops.take_along_axis(cand_seqs, alive[:, :, None], axis=1)
        state = reorder_state(state, ops.cast(ops.take_along_axis(parent, alive, axis=1), "int32"))

        # Ended candidates among the k best join the finished list (frozen once
        # a source is done); lower-ranked endings are dropped, as in fairseq.
        accept = ops.logical_and(ended, top_rank < k)
        accept = ops.logical_and(accept, ops.logical_not(done(rows))[:, None])
        new_scores = ops.where(accept, top_scores / length_penalty(index + 1, alpha), _NINF)
        fin_scores, fin_seqs = _merge(fin_scores, fin_seqs, new_scores, cand_seqs, k)
        return index + 1, (seqs, alive_scores, fin_seqs, fin_scores), state

    def finish(index, rows):
        # Sources cut off by max_length: their live beams (best first) take the
        # places that no ended hypothesis holds, after the ended ones.
        seqs, log_probs, fin_seqs, fin_scores = rows
        num_finished = ops.sum(ops.cast(fin_scores > _NINF, "int32"), axis=1, keepdims=True)  # (batch, 1)
        place = ops.arange(k, dtype="int32")[None]  # (1, k)
        is_finished = place < num_finished  # (batch, k)
        pick = ops.where(is_finished, place, k + place - num_finished)  # into [finished, unfinished]
        scores = ops.take_along_axis(
            ops.concatenate([fin_scores, log_probs / length_penalty(index, alpha)], axis=1), pick, axis=1
        )
        ids = ops.take_along_axis(ops.concatenate([fin_seqs, seqs], axis=1), pick[:, :, None], axis=1)
        if return_finished:
            return ids[:, :, 1:], scores, is_finished
        return ids[:, :, 1:], scores

    return Search(body, done, finish)


def beam_rows(batch_size, max_length, beam_size, start_id=START_ID, finished=None):
    """The first rows of the `beam` search; sources flagged in `finished` are done, with empty hypotheses."""
    k = check_beam_size(beam_size)
    seqs = ops.reshape(ops.repeat(_start(batch_size, max_length, start_id), k, axis=0), (batch_size, k, max_length + 1))
    # Only the first beam is live at first, so the first step does not pick duplicates.
    log_probs = ops.tile(ops.convert_to_tensor([[0.0] + [_NINF] * (k - 1)]), (batch_size, 1))
    fin_scores = ops.where(_finished(batch_size, finished)[:, None], 0.0, ops.full((batch_size, k), _NINF))
    return seqs, log_probs, ops.zeros_like(seqs), fin_scores


def _reorder_rows(state, parents):
    """Every state tensor's rows `(batch * k, ...)` gathered from the parent beams."""
    k = parents.shape[1]
    offsets = ops.arange(ops.shape(parents)[0], dtype="int32")[:, None] * k
    rows = ops.reshape(parents + offsets, (-1,))
    return keras.tree.map_structure(lambda x: ops.take(x, rows, axis=0), state)


def beam_search(
    step_fn,
    state,
    batch_size,
    max_length,
    beam_size=4,
    alpha=0.6,
    start_id=START_ID,
    end_id=END_ID,
    finished=None,
    resize_state=None,
    reorder_state=None,
    return_finished=False,
):
    """Beam search with the GNMT length penalty over `step_fn`.

    `state` (and `step_fn`'s tokens and logits) hold `batch_size * beam_size`
    rows, the beams of one source next to each other. Each step extends every
    live beam, keeps the `2 * beam_size` best candidates, moves those among
    the `beam_size` best that end with END to the finished list, scored
    `log p / ((5 + len) / 6) ** alpha` (len counts END), and keeps the
    `beam_size` best others alive. A source
    is done once `beam_size` hypotheses have ended (fairseq's rule); the loop
    stops when every source is done or after `max_length` tokens. A source
    cut off by `max_length` with fewer than `beam_size` ended hypotheses
    fills the remaining places with its live beams, scored as they are
    (`log p / lp(max_length)`), but after the ended ones: a finished
    hypothesis always outranks an unfinished one, whatever their scores, so
    a cut-off output wins only where nothing ended. Sources flagged in
    `finished` (boolean `(batch,)`) are done from the start with empty
    hypotheses. `resize_state` as in `greedy_search`. `reorder_state(state,
    parents)` gives the state of the new beams, `parents` `(batch,
    beam_size)` naming each one's parent beam (e.g. `reorder_beams`); by
    default every state tensor's rows are gathered.

    Returns `(ids (batch, beam_size, max_length), scores (batch, beam_size))`,
    best first: the finished hypotheses by score, then the unfinished ones by
    score. With `return_finished=True`, returns `(ids, scores, finished)`:
    `finished` `(batch, beam_size)` is False for the hypotheses cut off at
    `max_length` before END.
    """
    search = beam(step_fn, beam_size, alpha, end_id, reorder_state, start_id, return_finished)
    rows = beam_rows(batch_size, max_length, beam_size, start_id, finished)
    return run_search(search, rows, state, max_length, resize_state)


def check_beam_size(beam_size):
    """`beam_size`, a positive int, or a `ValueError` naming it."""
    if not isinstance(beam_size, int) or beam_size < 1:
        raise ValueError(f"`beam_size` must be a positive int. Received: beam_size={beam_size!r}")
    return beam_size


def _merge(scores, seqs, new_scores, new_seqs, k):
    """The k best of two scored lists of hypotheses, best first."""
    scores, index = ops.top_k(ops.concatenate([scores, new_scores], axis=1), k)
    seqs = ops.take_along_axis(ops.concatenate([seqs, new_seqs], axis=1), index[:, :, None], axis=1)
    return scores, seqs
