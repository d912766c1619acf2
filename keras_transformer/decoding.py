"""Fast autoregressive decoding over the key/value cache: greedy, beam search, sampling.

The encoder runs once per source, the cross-attention keys/values are
projected once per decoder layer, and every step feeds a single token
through the decoder, appending its keys/values to a fixed-size cache (a keys
and a values tensor `(batch, num_heads, positions, key_dim)` per layer); the
prefix is never re-run. The beams of a source share one cache and attend it
through their ancestry, so beam search never copies the cache to reorder it.
The loops are `keras.ops.while_loop`s over static shapes, run in three
phases whose cache holds a quarter, a half, then all of `max_length`, so a
whole decode compiles into one XLA program (`compile_decoder`) and short
outputs never touch the rest of the cache.

Every search returns generated ids `(batch, max_length)` int32: the tokens
after START, END included, 0 after END; PAD (0) and START are never
generated. An output that reaches `max_length` without END is cut off: with
`return_finished=True` every search also returns a boolean `finished`, False
for those (the `Translator` turns them into a `TruncatedOutputWarning`).
Two layers of API:

- searches over any `step_fn(tokens, index, state) -> (logits, state)`:
  `greedy_search`, `beam_search`, `sample_search` (testable without a model);
- the same for a model from `build_transformer`: `greedy_decode`,
  `beam_decode`, `sample_decode` over `make_step_fn` (or, given a list of
  models, an ensemble over `make_ensemble_step_fn`), plus
  `greedy_decode_uncached` over `make_uncached_step_fn` (re-runs the whole
  model at every step: the reference and the benchmark baseline) and
  `sequence_scores` (teacher-forced log-probabilities).

Example:

>>> from keras_transformer import build_transformer
>>> model = build_transformer(300, 300, num_layers=1, d_model=32, num_heads=4,
...                           d_ff=64, max_length=16)
>>> source = keras.ops.convert_to_tensor([[5, 6, 7, 0]])
>>> tuple(greedy_decode(model, source, max_length=8).shape)
(1, 8)
>>> ids, scores = beam_decode(model, source, beam_size=4, max_length=8)
>>> decode = compile_decoder(model, "beam", beam_size=4, max_length=8)
>>> bool(keras.ops.all(decode(source) == ids[:, 0]))
True

References:
    Wu et al., "Google's Neural Machine Translation System", 2016 (length
    penalty); Holtzman et al., "The Curious Case of Neural Text
    Degeneration", 2019 (top-p).
"""

import math

import keras
from keras import ops

from keras_transformer.layers.masks import padding_mask
from keras_transformer.models import as_transformer

START_ID = 2
END_ID = 3
_METHODS = ("greedy", "beam", "sample", "greedy_uncached", "beam_uncached")


class TruncatedOutputWarning(UserWarning):
    """A decoded output reached `max_length` before END: it is cut off.

    Raised (with `warnings.warn`) by the Python side of the `Translator`; the
    decoding functions report the same thing as `finished=False`
    (`return_finished=True`).

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


def length_penalty(length, alpha=0.6):
    """GNMT length penalty `((5 + length) / 6) ** alpha`; scores are `log p / lp`."""
    return ops.power((5.0 + ops.cast(length, "float32")) / 6.0, alpha)


def _source(source_ids):
    source_ids = ops.convert_to_tensor(source_ids)
    if "int" not in keras.backend.standardize_dtype(source_ids.dtype) or len(source_ids.shape) != 2:
        raise ValueError(
            "`source_ids` must be integer ids of shape (batch, length), 0 = padding. "
            f"Received: dtype={source_ids.dtype}, shape={tuple(source_ids.shape)}"
        )
    return ops.cast(source_ids, "int32")


def _max_length(model, max_length):
    max_length = model.max_length if max_length is None else max_length
    if not isinstance(max_length, int) or not 1 <= max_length <= model.max_length:
        raise ValueError(
            f"`max_length` must be an int in [1, {model.max_length}] (the model's max_length). "
            f"Received: max_length={max_length!r}"
        )
    return max_length


def _empty(source_ids):
    """Rows with no real token: they decode to nothing (all zeros)."""
    return ops.logical_not(ops.any(ops.not_equal(source_ids, 0), axis=1))


def resolve_max_length(model, max_length=None):
    """The number of tokens to generate: `max_length`, checked, or the model's `max_length`.

    `model` may be an ensemble (a list of models), whose members share it.
    """
    return _max_length(ensemble_members(model)[0], max_length)


def ensemble_members(models):
    """The models of `models` (one model, or a list of them), checked to fit together.

    The members of an ensemble must share their source and target
    vocabularies and their `max_length`: they decode one token sequence
    together. Anything else is a `ValueError` naming the member. Returns
    the members as `TransformerModel`s (see `as_transformer`).
    """
    members = list(models) if isinstance(models, (list, tuple)) else [models]
    if not members:
        raise ValueError("An ensemble needs at least one model. Received: models=[]")
    members = [as_transformer(member) for member in members]

    def shape(model):
        return (model.source_vocab_size, model.target_vocab_size, model.max_length)

    first = shape(members[0])
    for index, member in enumerate(members[1:], start=1):
        if shape(member) != first:
            raise ValueError(
                "The models of an ensemble must share (source vocab, target vocab, max_length). "
                f"Received: {first} for model 0 and {shape(member)} for model {index}"
            )
    return members


def make_step_fn(model, source_ids, max_length=None, beam_size=1):
    """The cached decoder step of `model` for `source_ids`, and its initial state.

    Returns `(step_fn, state)`. `step_fn(tokens, index, state)` feeds `tokens`
    `(batch * beam_size,)` at position `index` and returns `(logits
    (batch * beam_size, vocab) float32, state)`. `state` is `(caches,
    ancestry)`: one self-attention cache `(keys, values)` per decoder layer,
    each `(batch, heads, max_length * beam_size, key_dim)`, and the int32
    `ancestry` `(batch, beam_size, max_length)`.

    With `beam_size=k` the rows are k beams per source, next to each other,
    and the beams of a source share its cache: beam `j`'s keys/values for
    position `p` sit at `p * k + j`, and `ancestry[:, j, p]` names the beam
    whose entry beam `j` descends from at position `p`. Each beam attends
    only the entries it descends from, so beam search reorders the small
    ancestry (`reorder_beams`), never the cache, and the beams of a source
    meet its encoder output as the queries of one cross-attention.
    """
    model = as_transformer(model)
    max_length = _max_length(model, max_length)
    beams = _check_beam_size(beam_size)
    source_ids = _source(source_ids)
    source_mask = padding_mask(source_ids)
    cross_caches = model.cross_attention_caches(model.encode(source_ids))
    batch = ops.shape(source_mask)[0]
    caches = model.empty_self_attention_caches(batch, max_length * beams)
    # Each beam's own entry at the current position (written for one beam too:
    # a loop variable that never changes breaks TensorFlow's XLA conversion).
    own_beam = ops.broadcast_to(ops.arange(beams, dtype="int32")[None, :, None], (batch, beams, 1))

    def step_fn(tokens, index, state):
        caches, ancestry = state
        ancestry = ops.slice_update(ancestry, (0, 0, index), own_beam)
        mask = _ancestry_mask(ancestry, caches[0][0].shape[2] // beams) if beams > 1 else None
        logits, caches = model.decoder_step(
            ops.reshape(tokens, (-1, beams)),
            index,
            caches,
            cross_caches,
            source_mask,
            cache_update_index=index * beams,
            attention_mask=mask,
        )
        logits = ops.reshape(logits, (-1, ops.shape(logits)[-1]))
        return ops.cast(logits, "float32"), (caches, ancestry)

    return step_fn, (caches, ops.zeros((batch, beams, max_length), "int32"))


def _ancestry_mask(ancestry, positions):
    """`(batch, beams, positions * beams)`: True where beam `j` descends from the cache entry."""
    beams = ancestry.shape[1]
    ancestors = ancestry[:, :, :positions, None]  # (batch, beams, positions, 1)
    mask = ops.equal(ancestors, ops.arange(beams, dtype="int32")[None, None, None])
    return ops.reshape(mask, (-1, beams, positions * beams))


def reorder_beams(state, parents):
    """`make_step_fn`'s state after beam search picked `parents` `(batch, beams)`.

    Beam `j` continues beam `parents[:, j]`: it takes over that beam's
    ancestry. The cache itself stays where it is.
    """
    caches, ancestry = state
    return caches, ops.take_along_axis(ancestry, parents[:, :, None], axis=1)


def make_ensemble_step_fn(models, source_ids, max_length=None, beam_size=1):
    """`make_step_fn` for an ensemble: the mean of the members' next-token distributions.

    Each member runs its own cached step; `step_fn` returns the log of the
    mean of their probabilities (`log (1/n) sum_i softmax(logits_i)`), which
    the searches use as logits. The state is the tuple of the members'
    states; `per_member(resize_cache)` and `per_member(reorder_beams)`
    resize and reorder it. One model in a list decodes as that model does.

    Example:

    >>> step_fn, state = make_ensemble_step_fn([model, model], [[5, 6, 7]], max_length=8)
    >>> logits, state = step_fn(keras.ops.convert_to_tensor([START_ID]), 0, state)
    >>> tuple(logits.shape)
    (1, 300)
    """
    members = ensemble_members(models)
    steps, states = zip(*(make_step_fn(model, source_ids, max_length, beam_size) for model in members))
    log_count = math.log(len(members))

    def step_fn(tokens, index, state):
        outputs = [step(tokens, index, member) for step, member in zip(steps, state)]
        log_probs = ops.stack([ops.log_softmax(logits, axis=-1) for logits, _ in outputs])
        return ops.logsumexp(log_probs, axis=0) - log_count, tuple(member for _, member in outputs)

    return step_fn, tuple(states)


def per_member(state_fn):
    """`state_fn(state, *args)` (e.g. `resize_cache`) applied to each member of an ensemble's state."""
    return lambda state, *args: tuple(state_fn(member, *args) for member in state)


def _cached(model, source_ids, max_length, beam_size=1):
    """`(step_fn, state, max_length, resize_state, reorder_state)` of a model or an ensemble."""
    if isinstance(model, (list, tuple)):
        step_fn, state = make_ensemble_step_fn(model, source_ids, max_length, beam_size)
        return step_fn, state, state[0][1].shape[2], per_member(resize_cache), per_member(reorder_beams)
    step_fn, state = make_step_fn(model, source_ids, max_length, beam_size)
    return step_fn, state, state[1].shape[2], resize_cache, reorder_beams


def _allowed(logits, start_id):
    """Logits with PAD (0) and START set to -inf: they are never generated."""
    vocab = ops.arange(ops.shape(logits)[-1])
    banned = ops.logical_or(ops.equal(vocab, 0), ops.equal(vocab, start_id))
    return ops.where(banned[None], float("-inf"), ops.cast(logits, "float32"))


def _start(batch_size, max_length, start_id):
    ids = ops.zeros((batch_size, max_length + 1), "int32")
    return ops.slice_update(ids, (0, 0), ops.full((batch_size, 1), start_id, "int32"))


def _finished(batch_size, finished):
    if finished is None:
        return ops.zeros((batch_size,), "bool")
    return ops.cast(finished, "bool")


def resize_cache(state, length):
    """`make_step_fn`'s state with room for `length` positions: cut, or padded with zeros.

    The searches call it with growing lengths (`resize_state`): the first
    steps then attend a quarter of the cache.
    """
    caches, ancestry = state
    entries = length * ancestry.shape[1]

    def resize(cache):  # (batch, heads, entries, key_dim), position-major
        if cache.shape[2] >= entries:
            return cache[:, :, :entries]
        return ops.pad(cache, ((0, 0), (0, 0), (0, entries - cache.shape[2]), (0, 0)))

    return keras.tree.map_structure(resize, caches), ancestry


def _phases(max_length, resize_state):
    """The state lengths the loop runs through: max_length / 4, / 2, then max_length."""
    if resize_state is None:
        return [max_length]
    return sorted({-(-max_length // 4), -(-max_length // 2), max_length})


def _phased_loop(body, done, loop_vars, max_length, resize_state):
    """`while index < max_length and not done(loop_vars)`, with the state resized between phases.

    `loop_vars` is `(index, ..., state)`. Each phase is its own loop with
    static shapes; a phase whose start finds the loop over runs no step.
    """
    for length in _phases(max_length, resize_state):
        if resize_state is not None:
            loop_vars = (*loop_vars[:-1], resize_state(loop_vars[-1], length))

        def cond(*loop_vars, length=length):
            return ops.logical_and(loop_vars[0] < length, ops.logical_not(done(*loop_vars)))

        loop_vars = ops.while_loop(cond, body, loop_vars)
    return loop_vars


def _token_search(
    choose,
    step_fn,
    state,
    batch_size,
    max_length,
    start_id,
    end_id,
    finished,
    resize_state=None,
    return_finished=False,
    return_scores=False,
):
    """The loop shared by greedy and sampling: `choose(logits, index) -> tokens`.

    Also sums, per row, the model's log-probability of each chosen token (the
    distribution of `step_fn`'s logits, START excluded, before any sampling
    filter).
    """

    def body(index, ids, log_probs, finished, state):
        logits, state = step_fn(ops.take(ids, index, axis=1), index, state)
        logits = _allowed(logits, start_id)
        tokens = ops.where(finished, 0, ops.cast(choose(logits, index), "int32"))
        token_log_probs = ops.take_along_axis(ops.log_softmax(logits, axis=-1), tokens[:, None], axis=1)[:, 0]
        log_probs = log_probs + ops.where(finished, 0.0, token_log_probs)
        ids = ops.slice_update(ids, (0, index + 1), tokens[:, None])
        return index + 1, ids, log_probs, ops.logical_or(finished, ops.equal(tokens, end_id)), state

    loop_vars = (
        ops.convert_to_tensor(0, "int32"),
        _start(batch_size, max_length, start_id),
        ops.zeros((batch_size,), "float32"),
        _finished(batch_size, finished),
        state,
    )
    _, ids, log_probs, finished, _ = _phased_loop(
        body, lambda *loop_vars: ops.all(loop_vars[3]), loop_vars, max_length, resize_state
    )
    return _outputs(ids[:, 1:], log_probs if return_scores else None, finished if return_finished else None)


def _outputs(ids, scores=None, finished=None):
    """`ids`, or the tuple `(ids, scores, finished)` of those asked for (not None)."""
    extra = tuple(x for x in (scores, finished) if x is not None)
    return (ids, *extra) if extra else ids


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
    return _token_search(
        lambda logits, index: ops.argmax(logits, axis=-1),
        step_fn,
        state,
        batch_size,
        max_length,
        start_id,
        end_id,
        finished,
        resize_state,
        return_finished,
        return_scores,
    )


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
    return ops.where(logits >= threshold, logits, float("-inf"))


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
    if noise is None:
        noise = keras.random.uniform((batch_size, max_length), seed=seed)
    noise = ops.cast(noise, "float32")
    temperature = ops.cast(temperature, "float32")

    def choose(logits, index):
        greedy = ops.cast(ops.argmax(logits, axis=-1), "int32")
        filtered = filter_logits(logits, ops.maximum(temperature, 1e-6), top_k, top_p)
        cdf = ops.cumsum(ops.softmax(filtered, axis=-1), axis=-1)
        u = ops.take(noise, index, axis=1)[:, None] * cdf[:, -1:]
        sampled = ops.sum(ops.cast(cdf <= u, "int32"), axis=-1)
        sampled = ops.minimum(sampled, ops.shape(logits)[-1] - 1)
        return ops.where(temperature > 0, sampled, greedy)

    return _token_search(
        choose,
        step_fn,
        state,
        batch_size,
        max_length,
        start_id,
        end_id,
        finished,
        resize_state,
        return_finished,
        return_scores,
    )


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
    k = _check_beam_size(beam_size)
    ninf = float("-inf")
    seqs = ops.reshape(ops.repeat(_start(batch_size, max_length, start_id), k, axis=0), (batch_size, k, max_length + 1))
    # Only the first beam is live at first, so the first step does not pick duplicates.
    log_probs = ops.tile(ops.convert_to_tensor([[0.0] + [ninf] * (k - 1)]), (batch_size, 1))
    fin_seqs = ops.zeros_like(seqs)
    fin_scores = ops.where(_finished(batch_size, finished)[:, None], 0.0, ops.full((batch_size, k), ninf))
    if reorder_state is None:
        offsets = ops.arange(batch_size, dtype="int32")[:, None] * k

        def reorder_state(state, parents):
            rows = ops.reshape(parents + offsets, (-1,))
            return keras.tree.map_structure(lambda x: ops.take(x, rows, axis=0), state)

    top_rank = ops.arange(2 * k, dtype="int32")[None]

    def done(fin_scores):
        return fin_scores[:, -1] > ninf  # the k-th best finished hypothesis exists

    def body(index, seqs, log_probs, fin_seqs, fin_scores, state):
        tokens = ops.reshape(ops.take(seqs, index, axis=2), (-1,))
        logits, state = step_fn(tokens, index, state)
        logits = _allowed(logits, start_id)
        vocab = ops.shape(logits)[-1]
        step_log_probs = ops.reshape(ops.log_softmax(logits, axis=-1), (batch_size, k, vocab))
        candidates = ops.reshape(log_probs[:, :, None] + step_log_probs, (batch_size, k * vocab))
        top_scores, top_index = ops.top_k(candidates, 2 * k)  # (batch, 2k)
        parent, token = top_index // vocab, ops.cast(top_index % vocab, "int32")
        cand_seqs = ops.take_along_axis(seqs, parent[:, :, None], axis=1)
        cand_seqs = ops.slice_update(cand_seqs, (0, 0, index + 1), token[:, :, None])
        ended = ops.equal(token, end_id)

        # The k best candidates that did not end stay alive; reorder the caches.
        alive_scores, alive = ops.top_k(ops.where(ended, ninf, top_scores), k)
        seqs = ops.take_along_axis(cand_seqs, alive[:, :, None], axis=1)
        state = reorder_state(state, ops.cast(ops.take_along_axis(parent, alive, axis=1), "int32"))

        # Ended candidates among the k best join the finished list (frozen once
        # a source is done); lower-ranked endings are dropped, as in fairseq.
        accept = ops.logical_and(ended, top_rank < k)
        accept = ops.logical_and(accept, ops.logical_not(done(fin_scores))[:, None])
        new_scores = ops.where(accept, top_scores / length_penalty(index + 1, alpha), ninf)
        fin_scores, fin_seqs = _merge(fin_scores, fin_seqs, new_scores, cand_seqs, k)
        return index + 1, seqs, alive_scores, fin_seqs, fin_scores, state

    loop_vars = (ops.convert_to_tensor(0, "int32"), seqs, log_probs, fin_seqs, fin_scores, state)
    index, seqs, log_probs, fin_seqs, fin_scores, _ = _phased_loop(
        body, lambda *loop_vars: ops.all(done(loop_vars[4])), loop_vars, max_length, resize_state
    )
    # Sources cut off by max_length: their live beams (best first) take the
    # places that no ended hypothesis holds, after the ended ones.
    num_finished = ops.sum(ops.cast(fin_scores > ninf, "int32"), axis=1, keepdims=True)  # (batch, 1)
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


def _check_beam_size(beam_size):
    if not isinstance(beam_size, int) or beam_size < 1:
        raise ValueError(f"`beam_size` must be a positive int. Received: beam_size={beam_size!r}")
    return beam_size


def _merge(scores, seqs, new_scores, new_seqs, k):
    """The k best of two scored lists of hypotheses, best first."""
    scores, index = ops.top_k(ops.concatenate([scores, new_scores], axis=1), k)
    seqs = ops.take_along_axis(ops.concatenate([seqs, new_seqs], axis=1), index[:, :, None], axis=1)
    return scores, seqs


def greedy_decode(
    model, source_ids, max_length=None, start_id=START_ID, end_id=END_ID, return_finished=False, return_scores=False
):
    """Cached greedy decoding of `model` (from `build_transformer`).

    An empty source row (all padding) decodes to all zeros (and counts as
    finished).

    Args:
        model: the Transformer, or a list of them: an ensemble, decoded by
            the mean of their distributions (`make_ensemble_step_fn`).
        source_ids: int `(batch, src_len)`, 0 = padding.
        max_length: tokens to generate at most (END included); default and at
            most the model's `max_length`. A Python int: shapes stay static.
        start_id, end_id: the START and END token ids.
        return_finished: also return the boolean `finished` `(batch,)`,
            False where the output was cut off at `max_length` before END.
        return_scores: also return the float32 log-probability `(batch,)`
            of each output (its tokens' sum, END included).

    Returns:
        int32 ids `(batch, max_length)`, 0 after END; `(ids, finished)` with
        `return_finished=True`, `(ids, scores)` with `return_scores=True`,
        `(ids, scores, finished)` with both.

    Example:

    >>> ids = greedy_decode(model, [[5, 6, 7]], max_length=8)
    >>> ids, finished = greedy_decode(model, [[5, 6, 7]], max_length=8, return_finished=True)
    >>> ids, scores, finished = greedy_decode(model, [[5, 6, 7]], return_finished=True, return_scores=True)
    """
    source_ids = _source(source_ids)
    step_fn, state, max_length, resize_state, _ = _cached(model, source_ids, max_length)
    return greedy_search(
        step_fn,
        state,
        ops.shape(source_ids)[0],
        max_length,
        start_id,
        end_id,
        _empty(source_ids),
        resize_state,
        return_finished,
        return_scores,
    )


def beam_decode(
    model, source_ids, beam_size=4, alpha=0.6, max_length=None, start_id=START_ID, end_id=END_ID, return_finished=False
):
    """Cached beam search of `model` (or an ensemble, a list of models); see `beam_search`.

    Returns `(ids (batch, beam_size, max_length), scores (batch, beam_size))`,
    best first (ended hypotheses before cut-off ones); `ids[:, 0]` is the
    translation. `beam_size=1` is greedy. With `return_finished=True`, also
    the boolean `finished` `(batch, beam_size)`: False for the hypotheses cut
    off at `max_length` before END.

    Example:

    >>> ids, scores = beam_decode(model, [[5, 6, 7]], beam_size=4, alpha=0.6)
    >>> ids, scores, finished = beam_decode(model, [[5, 6, 7]], return_finished=True)
    """
    source_ids = _source(source_ids)
    step_fn, state, max_length, resize_state, reorder_state = _cached(
        model, source_ids, max_length, _check_beam_size(beam_size)
    )
    return beam_search(
        step_fn,
        state,
        ops.shape(source_ids)[0],
        max_length,
        beam_size,
        alpha,
        start_id,
        end_id,
        _empty(source_ids),
        resize_state,
        reorder_state,
        return_finished,
    )


def sample_decode(
    model,
    source_ids,
    temperature=1.0,
    top_k=0,
    top_p=1.0,
    seed=None,
    noise=None,
    max_length=None,
    start_id=START_ID,
    end_id=END_ID,
    return_finished=False,
    return_scores=False,
):
    """Cached sampling of `model` (or an ensemble); see `sample_search` and `filter_logits`.

    `return_finished` and `return_scores` as in `greedy_decode`.

    Example:

    >>> ids = sample_decode(model, [[5, 6, 7]], temperature=0.8, top_p=0.9, seed=1)
    """
    source_ids = _source(source_ids)
    step_fn, state, max_length, resize_state, _ = _cached(model, source_ids, max_length)
    return sample_search(
        step_fn,
        state,
        ops.shape(source_ids)[0],
        max_length,
        temperature,
        top_k,
        top_p,
        seed,
        noise,
        start_id,
        end_id,
        _empty(source_ids),
        resize_state,
        return_finished,
        return_scores,
    )


def make_uncached_step_fn(model, source_ids, max_length=None, repeat=1):
    """Like `make_step_fn`, but every step calls the whole model (encoder too).

    The state is the decoder input buffer `(batch * repeat, max_length)`; the
    step writes `tokens` at `index` and reads the logits there. The buffer has
    a fixed length, so the loop still compiles, but every step recomputes
    every position (as the TensorFlow tutorial's decoder does): the
    reference for the cached step and the benchmark's baseline.
    """
    source_ids = _source(source_ids)
    max_length = _max_length(as_transformer(model), max_length)
    if repeat > 1:
        source_ids = ops.repeat(source_ids, repeat, axis=0)

    def step_fn(tokens, index, state):
        (ids,) = state
        ids = ops.slice_update(ids, (0, index), tokens[:, None])
        logits = model({"encoder_inputs": source_ids, "decoder_inputs": ids}, training=False)
        return ops.cast(ops.take(logits, index, axis=1), "float32"), (ids,)

    return step_fn, (ops.zeros((ops.shape(source_ids)[0], max_length), "int32"),)


def greedy_decode_uncached(model, source_ids, max_length=None, start_id=START_ID, end_id=END_ID, return_finished=False):
    """Greedy decoding that calls the whole model at every step (`make_uncached_step_fn`).

    Must equal `greedy_decode` token for token; it is only slower.
    """
    source_ids = _source(source_ids)
    step_fn, state = make_uncached_step_fn(model, source_ids, max_length)
    return greedy_search(
        step_fn,
        state,
        ops.shape(source_ids)[0],
        state[0].shape[1],
        start_id,
        end_id,
        _empty(source_ids),
        return_finished=return_finished,
    )


def beam_decode_uncached(
    model, source_ids, beam_size=4, alpha=0.6, max_length=None, start_id=START_ID, end_id=END_ID, return_finished=False
):
    """`beam_decode` over `make_uncached_step_fn`: the same result, the benchmark's baseline."""
    source_ids = _source(source_ids)
    step_fn, state = make_uncached_step_fn(model, source_ids, max_length, _check_beam_size(beam_size))
    return beam_search(
        step_fn,
        state,
        ops.shape(source_ids)[0],
        state[0].shape[1],
        beam_size,
        alpha,
        start_id,
        end_id,
        _empty(source_ids),
        return_finished=return_finished,
    )


def sequence_scores(model, source_ids, output_ids, alpha=0.0, start_id=START_ID, end_id=END_ID):
    """Teacher-forced score of decoded `output_ids` `(batch, length)` (0 after END).

    The sum of the log-probabilities of the tokens up to and including END,
    divided by the length penalty of their count (`alpha=0`: the plain
    log-probability), under the decoding distribution (PAD and START
    excluded; for an ensemble, the mean of its members' distributions).
    Comparable with `beam_decode`'s scores and with the log-probabilities
    that `greedy_decode(..., return_scores=True)` sums.

    Example:

    >>> ids, log_probs = greedy_decode(model, [[5, 6, 7]], max_length=8, return_scores=True)
    >>> sequence_scores(model, [[5, 6, 7]], ids)  # the same log-probabilities, teacher-forced
    """
    source_ids, output_ids = _source(source_ids), _source(output_ids)
    decoder_inputs = ops.concatenate(
        [ops.full((ops.shape(output_ids)[0], 1), start_id, "int32"), output_ids[:, :-1]], axis=1
    )
    members = ensemble_members(model)
    inputs = {"encoder_inputs": source_ids, "decoder_inputs": decoder_inputs}
    member_log_probs = [
        ops.log_softmax(_allowed(member(inputs, training=False), start_id), axis=-1) for member in members
    ]
    log_probs = ops.logsumexp(ops.stack(member_log_probs), axis=0) - math.log(len(members))
    token_log_probs = ops.squeeze(ops.take_along_axis(log_probs, output_ids[:, :, None], axis=2), -1)
    real = ops.not_equal(output_ids, 0)
    total = ops.sum(ops.where(real, token_log_probs, 0.0), axis=1)
    return total / length_penalty(ops.sum(ops.cast(real, "int32"), axis=1), alpha)


def compile_decoder(model, method="greedy", jit_compile=True, return_finished=False, **options):
    """`decode(source_ids) -> ids (batch, max_length)` compiled as one program.

    `method` is `"greedy"`, `"beam"` (returns the best beam only),
    `"sample"` (then `decode(source_ids, noise=None)`), `"greedy_uncached"` or
    `"beam_uncached"`;
    `options` go to the matching `*_decode` function. With
    `return_finished=True`, `decode` returns `(ids, finished)`, `finished`
    `(batch,)` False where the output was cut off at `max_length` before END.
    On TensorFlow this is a `tf.function` (XLA with `jit_compile=True`); on
    JAX, `jax.jit`. Pad sources to a few bucket lengths: every new shape
    compiles once.

    Example:

    >>> decode = compile_decoder(model, "beam", beam_size=4, max_length=32)
    >>> ids = decode(keras.ops.convert_to_tensor([[5, 6, 7, 0]]))
    """
    if method not in _METHODS:
        raise ValueError(f"`method` must be one of {_METHODS}. Received: method={method!r}")
    options = dict(options, return_finished=True)

    def run(source_ids, noise):
        if method == "greedy":
            return greedy_decode(model, source_ids, **options)
        if method == "sample":
            return sample_decode(model, source_ids, noise=noise, **options)
        if method == "greedy_uncached":
            return greedy_decode_uncached(model, source_ids, **options)
        beam = beam_decode if method == "beam" else beam_decode_uncached
        ids, _, finished = beam(model, source_ids, **options)
        return ids[:, 0], finished[:, 0]  # the best beam

    def decode(source_ids, noise=None):
        ids, finished = run(source_ids, noise)
        return (ids, finished) if return_finished else ids

    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.function(decode, jit_compile=jit_compile, reduce_retracing=True)
    if backend == "jax" and jit_compile:
        import jax

        return jax.jit(decode)
    return decode
