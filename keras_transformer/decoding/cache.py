"""The cached decoder step of a model from `build_transformer`, and the uncached step it must equal.

The encoder runs once per source, the cross-attention keys/values are
projected once per decoder layer, and every step feeds a single token
through the decoder, appending its keys/values to a fixed-size cache (a keys
and a values tensor `(batch, num_heads, positions, key_dim)` per layer); the
prefix is never re-run. The beams of a source share one cache and attend it
through their ancestry, so beam search never copies the cache to reorder it
(`reorder_beams`), and the searches of more than 64 tokens grow the cache in
phases (`resize_cache`), so the first steps attend a quarter of it. On TensorFlow
the step is one graph function that every loop calls
(`keras_transformer.decoding.traced_step`). `uncached_step` re-runs the
whole model at every step: the reference and the benchmarks' baseline.

Example:

>>> step_fn, state = make_step_fn(model, [[5, 6, 7]], max_length=8)
>>> logits, state = step_fn(keras.ops.convert_to_tensor([START_ID]), 0, state)
>>> tuple(logits.shape)
(1, 300)
"""

import keras
from keras import ops

from keras_transformer.config import START_ID  # noqa: F401  (the example above)
from keras_transformer.decoding.search import Step, check_beam_size
from keras_transformer.decoding.traced_step import traced_once
from keras_transformer.models import as_transformer


def check_source_ids(ids, argument="source_ids"):
    """`ids` as int32 `(batch, length)`, or a `ValueError` naming `argument`."""
    ids = ops.convert_to_tensor(ids)
    if "int" not in keras.backend.standardize_dtype(ids.dtype) or len(ids.shape) != 2:
        raise ValueError(
            f"`{argument}` must be integer ids of shape (batch, length), 0 = padding. "
            f"Received: dtype={ids.dtype}, shape={tuple(ids.shape)}"
        )
    return ops.cast(ids, "int32")


def check_max_length(model, max_length):
    """`max_length`, checked against `model` (a `TransformerModel`), or the model's `max_length` for None."""
    max_length = model.max_length if max_length is None else max_length
    if not isinstance(max_length, int) or not 1 <= max_length <= model.max_length:
        raise ValueError(
            f"`max_length` must be an int in [1, {model.max_length}] (the model's max_length). "
            f"Received: max_length={max_length!r}"
        )
    return max_length


def model_step(model, beam_size=1):
    """The `Step` of `model`'s cache: `cached_step` with `resize_cache` and `reorder_beams`."""
    return Step(cached_step(model, beam_size), resize_cache, reorder_beams)


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
    max_length = check_max_length(model, max_length)
    beams = check_beam_size(beam_size)
    ids = check_source_ids(source_ids)
    source_mask = model.source_padding_mask(ids)  # the model's own padding id
    memory = (model.cross_attention_caches(model.encode(ids)), source_mask)
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

    The searches call it with growing lengths (`search.phases`): the first
    steps then attend a quarter of the cache.
    """
    caches, ancestry, memory = state
    entries = length * ancestry.shape[1]

    def resize(cache):  # (batch, heads, entries, key_dim), position-major
        if cache.shape[2] >= entries:
            return cache[:, :, :entries]
        return ops.pad(cache, ((0, 0), (0, 0), (0, entries - cache.shape[2]), (0, 0)))

    return keras.tree.map_structure(resize, caches), ancestry, memory


def uncached_step(model):
    """The `Step` that calls the whole model (encoder too) at every step; its state is `uncached_state`'s.

    The state holds the decoder input buffer `(rows, max_length)` and the
    source of each row; the step writes `tokens` at `index` and reads the
    logits there. The buffer has a fixed length, so the loop still compiles,
    but every step recomputes every position (as the TensorFlow tutorial's
    decoder does). Beam search gathers both by rows (the default reorder).
    """

    def step_fn(tokens, index, state):
        ids, source = state
        ids = ops.slice_update(ids, (0, index), tokens[:, None])
        logits = model({"encoder_inputs": source, "decoder_inputs": ids}, training=False)
        return ops.cast(ops.take(logits, index, axis=1), "float32"), (ids, source)

    return Step(step_fn)


def uncached_state(model, source_ids, max_length=None, beam_size=1):
    """The state of `uncached_step` before the first token: an empty buffer, each source once per beam."""
    ids = check_source_ids(source_ids)
    max_length = check_max_length(as_transformer(model), max_length)
    if beam_size > 1:
        ids = ops.repeat(ids, beam_size, axis=0)
    return ops.zeros((ops.shape(ids)[0], max_length), "int32"), ids
