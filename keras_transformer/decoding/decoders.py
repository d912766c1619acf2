"""Fast autoregressive decoding over the key/value cache: greedy, beam search, sampling.

The encoder runs once per source, the cross-attention keys/values are
projected once per decoder layer, and every step feeds a single token
through the decoder, appending its keys/values to a fixed-size cache (a keys
and a values tensor `(batch, num_heads, positions, key_dim)` per layer); the
prefix is never re-run. The beams of a source share one cache and attend it
through their ancestry, so beam search never copies the cache to reorder it.
The loops are `keras.ops.while_loop`s over static shapes, run in three
phases whose cache holds a quarter, a half, then all of `max_length`, so a
whole decode compiles into one XLA program and short outputs never touch the
rest of the cache. On TensorFlow, the step is one graph function that all
the loops call (`keras_transformer.decoding.traced_step`: traced once, not once
per loop), and `compile_decoder(..., compact=True)` also drops the sources
that are done from the batch between segments of steps
(`keras_transformer.decoding.compaction`), with the same result.

Every search returns generated ids `(batch, max_length)` int32: the tokens
after START, END included, 0 after END; PAD (0) and START are never
generated. An output that reaches `max_length` without END is cut off: with
`return_finished=True` every search also returns a boolean `finished`, False
for those (the `Translator` turns them into a `TruncatedOutputWarning`).
Two layers of API:

- searches over any `step_fn(tokens, index, state) -> (logits, state)`:
  `greedy_search`, `beam_search`, `sample_search` (testable without a model;
  defined in `keras_transformer.decoding.searches`);
- the same for a model from `build_transformer`: `greedy_decode`,
  `beam_decode`, `sample_decode` over `make_step_fn` (or, given a list of
  models, an ensemble over `make_ensemble_step_fn`), each also as its
  parts, a `Decoder` (`greedy_decoder`, ...), plus
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
from collections.abc import Callable
from typing import NamedTuple

import keras
from keras import ops

from keras_transformer.decoding.searches import (  # noqa: F401  (the searches are part of this module's API)
    END_ID,
    START_ID,
    Search,
    beam,
    beam_rows,
    beam_search,
    check_beam_size,
    filter_logits,
    greedy_choice,
    greedy_search,
    length_penalty,
    run_search,
    sample_search,
    sampling_choice,
    sampling_noise,
    token_rows,
    token_search,
)
from keras_transformer.decoding.searches import allowed as _allowed
from keras_transformer.decoding.traced_step import traced_once
from keras_transformer.layers.masks import padding_mask
from keras_transformer.models import as_transformer

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

    Returns `(step_fn, state)`: `cached_step(model, beam_size)` and
    `initial_state(model, source_ids, max_length, beam_size)`.
    `step_fn(tokens, index, state)` feeds `tokens` `(batch * beam_size,)` at
    position `index` and returns `(logits (batch * beam_size, vocab) float32,
    state)`.
    """
    return cached_step(model, beam_size), initial_state(model, source_ids, max_length, beam_size)


def initial_state(model, source_ids, max_length=None, beam_size=1):
    """The state of `cached_step` before the first token: the encoder run once.

    `(caches, ancestry, memory)`: one self-attention cache `(keys, values)`
    per decoder layer, each `(batch, heads, max_length * beam_size,
    key_dim)`, zeros; the int32 `ancestry` `(batch, beam_size, max_length)`;
    and `memory`, what the step reads of the source: each decoder layer's
    cross-attention `(keys, values)` and the source's padding mask. Every
    tensor has one row per source on axis 0.

    With `beam_size=k` the rows of the step are k beams per source, next to
    each other, and the beams of a source share its cache: beam `j`'s
    keys/values for position `p` sit at `p * k + j`, and `ancestry[:, j, p]`
    names the beam whose entry beam `j` descends from at position `p`. Each
    beam attends only the entries it descends from, so beam search reorders
    the small ancestry (`reorder_beams`), never the cache, and the beams of a
    source meet its encoder output as the queries of one cross-attention.
    """
    model = as_transformer(model)
    max_length = _max_length(model, max_length)
    beams = check_beam_size(beam_size)
    source_ids = _source(source_ids)
    source_mask = padding_mask(source_ids)
    memory = (model.cross_attention_caches(model.encode(source_ids)), source_mask)
    batch = ops.shape(source_mask)[0]
    caches = model.empty_self_attention_caches(batch, max_length * beams)
    return caches, ops.zeros((batch, beams, max_length), "int32"), memory


def cached_step(model, beam_size=1):
    """`step_fn(tokens, index, state) -> (logits, state)`: one decoder step over `initial_state`'s state."""
    model = as_transformer(model)
    beams = check_beam_size(beam_size)

    def step_fn(tokens, index, state):
        caches, ancestry, (cross_caches, source_mask) = state
        # Each beam's own entry at the current position (written for one beam too:
        # a loop variable that never changes breaks TensorFlow's XLA conversion).
        own_beam = ops.broadcast_to(ops.arange(beams, dtype="int32")[None, :, None], (ops.shape(ancestry)[0], beams, 1))
        ancestry = ops.slice_update(ancestry, (0, 0, index), own_beam)
        mask = _ancestry_mask(ancestry, ops.shape(caches[0][0])[2] // beams, beams) if beams > 1 else None
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
        return ops.cast(logits, "float32"), (caches, ancestry, (cross_caches, source_mask))

    return traced_once(step_fn)


def _ancestry_mask(ancestry, positions, beams):
    """`(batch, beams, positions * beams)`: True where beam `j` descends from the cache entry."""
    ancestors = ancestry[:, :, :positions, None]  # (batch, beams, positions, 1)
    mask = ops.equal(ancestors, ops.arange(beams, dtype="int32")[None, None, None])
    return ops.reshape(mask, (-1, beams, positions * beams))


def reorder_beams(state, parents):
    """`initial_state`'s state after beam search picked `parents` `(batch, beams)`.

    Beam `j` continues beam `parents[:, j]`: it takes over that beam's
    ancestry. The cache itself stays where it is.
    """
    caches, ancestry, memory = state
    return caches, ops.take_along_axis(ancestry, parents[:, :, None], axis=1), memory


def resize_cache(state, length):
    """`initial_state`'s state with room for `length` positions: cut, or padded with zeros.

    The searches call it with growing lengths (`resize_state`): the first
    steps then attend a quarter of the cache.
    """
    caches, ancestry, memory = state
    entries = length * ancestry.shape[1]

    def resize(cache):  # (batch, heads, entries, key_dim), position-major
        if cache.shape[2] >= entries:
            return cache[:, :, :entries]
        return ops.pad(cache, ((0, 0), (0, 0), (0, entries - cache.shape[2]), (0, 0)))

    return keras.tree.map_structure(resize, caches), ancestry, memory


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
    states = tuple(initial_state(member, source_ids, max_length, beam_size) for member in members)
    return ensemble_step(members, beam_size), states


def ensemble_step(models, beam_size=1):
    """The step of `make_ensemble_step_fn`, over the tuple of the members' states."""
    steps = [cached_step(member, beam_size) for member in ensemble_members(models)]
    log_count = math.log(len(steps))

    def step_fn(tokens, index, state):
        outputs = [step(tokens, index, member) for step, member in zip(steps, state)]
        log_probs = ops.stack([ops.log_softmax(logits, axis=-1) for logits, _ in outputs])
        return ops.logsumexp(log_probs, axis=0) - log_count, tuple(member for _, member in outputs)

    return step_fn


def per_member(state_fn):
    """`state_fn(state, *args)` (e.g. `resize_cache`) applied to each member of an ensemble's state."""
    return lambda state, *args: tuple(state_fn(member, *args) for member in state)


class Decoder(NamedTuple):
    """A cached search over a model (or an ensemble), in parts.

    `init(source_ids, *inputs) -> (rows, state)` runs the encoder and sets
    up the `search` (a `searches.Search`); the search then runs up to
    `max_length` steps, its state resized by `resize_state` between phases.
    `run_decoder` runs it as one loop (what `greedy_decode` & co. do);
    `keras_transformer.decoding.compaction` runs the same parts but drops the
    sources that are done between phases. Every tensor of the rows and of
    the state has one row per source on axis 0.

    Example:

    >>> parts = greedy_decoder(model, max_length=8)
    >>> ids = run_decoder(parts, [[5, 6, 7]])
    >>> tuple(ids.shape)
    (1, 8)
    """

    search: Search
    init: Callable
    max_length: int
    resize_state: Callable


def run_decoder(decoder, source_ids, *inputs):
    """The outputs of `decoder` (a `Decoder`) for `source_ids`, as one loop of static shapes."""
    rows, state = decoder.init(source_ids, *inputs)
    return run_search(decoder.search, rows, state, decoder.max_length, decoder.resize_state)


def _cached(model, max_length, beam_size=1):
    """`(step_fn, initial, resize_state, reorder_state)` of a model or an ensemble (a list of models)."""
    if isinstance(model, (list, tuple)):
        members = ensemble_members(model)

        def initial(source_ids):
            return tuple(initial_state(member, source_ids, max_length, beam_size) for member in members)

        return ensemble_step(members, beam_size), initial, per_member(resize_cache), per_member(reorder_beams)

    def initial(source_ids):
        return initial_state(model, source_ids, max_length, beam_size)

    return cached_step(model, beam_size), initial, resize_cache, reorder_beams


def greedy_decoder(
    model, max_length=None, start_id=START_ID, end_id=END_ID, return_finished=False, return_scores=False
):
    """The `Decoder` of `greedy_decode` (same arguments); `init(source_ids)`."""
    max_length = resolve_max_length(model, max_length)
    step_fn, initial, resize_state, _ = _cached(model, max_length)
    search = token_search(greedy_choice, step_fn, start_id, end_id, return_finished, return_scores)

    def init(source_ids):
        source_ids = _source(source_ids)
        rows = token_rows(ops.shape(source_ids)[0], max_length, start_id, _empty(source_ids))
        return rows, initial(source_ids)

    return Decoder(search, init, max_length, resize_state)


def sample_decoder(
    model,
    temperature=1.0,
    top_k=0,
    top_p=1.0,
    seed=None,
    max_length=None,
    start_id=START_ID,
    end_id=END_ID,
    return_finished=False,
    return_scores=False,
):
    """The `Decoder` of `sample_decode` (same arguments); `init(source_ids, noise=None)`."""
    max_length = resolve_max_length(model, max_length)
    step_fn, initial, resize_state, _ = _cached(model, max_length)
    choose = sampling_choice(temperature, top_k, top_p)
    search = token_search(choose, step_fn, start_id, end_id, return_finished, return_scores)

    def init(source_ids, noise=None):
        source_ids = _source(source_ids)
        batch = ops.shape(source_ids)[0]
        noise = sampling_noise(batch, max_length, seed, noise)
        return token_rows(batch, max_length, start_id, _empty(source_ids), extras=(noise,)), initial(source_ids)

    return Decoder(search, init, max_length, resize_state)


def beam_decoder(
    model, beam_size=4, alpha=0.6, max_length=None, start_id=START_ID, end_id=END_ID, return_finished=False
):
    """The `Decoder` of `beam_decode` (same arguments); `init(source_ids)`."""
    max_length = resolve_max_length(model, max_length)
    step_fn, initial, resize_state, reorder_state = _cached(model, max_length, check_beam_size(beam_size))
    search = beam(step_fn, beam_size, alpha, end_id, reorder_state, start_id, return_finished)

    def init(source_ids):
        source_ids = _source(source_ids)
        rows = beam_rows(ops.shape(source_ids)[0], max_length, beam_size, start_id, _empty(source_ids))
        return rows, initial(source_ids)

    return Decoder(search, init, max_length, resize_state)


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
    parts = greedy_decoder(model, max_length, start_id, end_id, return_finished, return_scores)
    return run_decoder(parts, source_ids)


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
    parts = beam_decoder(model, beam_size, alpha, max_length, start_id, end_id, return_finished)
    return run_decoder(parts, source_ids)


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
    parts = sample_decoder(
        model, temperature, top_k, top_p, seed, max_length, start_id, end_id, return_finished, return_scores
    )
    return run_decoder(parts, source_ids, noise)


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
    step_fn, state = make_uncached_step_fn(model, source_ids, max_length, check_beam_size(beam_size))
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
    >>> teacher_forced = sequence_scores(model, [[5, 6, 7]], ids)  # the same, from one forward pass
    >>> bool(keras.ops.all(keras.ops.abs(teacher_forced - log_probs) < 1e-4))
    True
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


def compile_decoder(model, method="greedy", jit_compile=True, return_finished=False, compact=False, **options):
    """`decode(source_ids) -> ids (batch, max_length)`, compiled.

    `method` is `"greedy"`, `"beam"` (returns the best beam only),
    `"sample"` (then `decode(source_ids, noise=None)`), `"greedy_uncached"` or
    `"beam_uncached"`;
    `options` go to the matching `*_decode` function. With
    `return_finished=True`, `decode` returns `(ids, finished)`, `finished`
    `(batch,)` False where the output was cut off at `max_length` before END.

    With `compact=True` (greedy, beam and sampling on TensorFlow) the
    decode drops the sources that are done from the batch as it goes
    (`keras_transformer.decoding.compaction`): the same ids, with the encoder and
    each segment of steps an XLA program (`jit_compile=True`) inside a
    `tf.function`. Otherwise the whole decode is one program: a
    `tf.function` (XLA with `jit_compile=True`) on TensorFlow, `jax.jit` on
    JAX. Pad sources to a few bucket lengths: every new shape compiles once.

    Example:

    >>> decode = compile_decoder(model, "beam", beam_size=4, max_length=32)
    >>> ids = decode(keras.ops.convert_to_tensor([[5, 6, 7, 0]]))
    """
    if method not in _METHODS:
        raise ValueError(f"`method` must be one of {_METHODS}. Received: method={method!r}")
    options = dict(options, return_finished=True)
    backend = keras.backend.backend()
    if _compacts(compact, method, backend):
        return _compacting_decoder(model, method, jit_compile, return_finished, options)

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

    if backend == "tensorflow":
        import tensorflow as tf

        # autograph=False: the loops are explicit `while_loop`s, written for JAX too; converting the
        # source first took half of the first call of a compiled beam search.
        return tf.function(decode, jit_compile=jit_compile, reduce_retracing=True, autograph=False)
    if backend == "jax" and jit_compile:
        import jax

        return jax.jit(decode)
    return decode


_DECODERS = {"greedy": greedy_decoder, "beam": beam_decoder, "sample": sample_decoder}


def _compacts(compact, method, backend):
    """Whether `compile_decoder` compacts: `compact`, checked."""
    can = backend == "tensorflow" and method in _DECODERS
    if compact and not can:
        raise ValueError(
            "`compact=True` needs the TensorFlow backend and a cached method "
            f"{tuple(_DECODERS)}. Received: method={method!r} on {backend}"
        )
    return bool(compact)


def _compacting_decoder(model, method, jit_compile, return_finished, options):
    """`compile_decoder`'s `decode` over `compaction.compacting`."""
    import tensorflow as tf

    from keras_transformer.decoding.compaction import compacting

    decode_all = compacting(_DECODERS[method](model, **options), jit_compile)

    def decode(source_ids, noise=None):
        outputs = decode_all(source_ids, noise) if method == "sample" else decode_all(source_ids)
        ids, finished = outputs[0], outputs[-1]
        if method == "beam":
            ids, finished = ids[:, 0], finished[:, 0]  # the best beam
        return (ids, finished) if return_finished else ids

    return tf.function(decode, reduce_retracing=True, autograph=False)
