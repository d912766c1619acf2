"""Continuing prompts with a decoder-only model: the cached step every search runs over a language model.

A decoder-only model (`build_decoder_only`) has no source: its "source" is
the prompt, and the searches continue it. `bind` (and so `decode`,
`compile_search` and the one-call decoders) gives a `DecoderOnlyModel`
this module's step in place of the encoder-decoder's:

- the prompts come right-padded, `(batch, width)` with the model's padding
  id after each prompt (an empty prompt decodes to nothing; but where the
  padding id is also the start id, as GPT-2's `<|endoftext|>` is all three,
  a row of it is the prompt of that one token, GPT-2's empty text,
  `starts_from_padding`). Each row is
  moved to the right end of its width (left padding), so that every row's
  last prompt token sits at the same cache position;
- all but the last column run through the decoder in one pass
  (`DecoderOnlyModel.prompt_caches`), their keys/values written to the
  cache, the padding in front of a row hidden from every query, and each
  row's positions counted from its own first token, so a prompt gives the
  logits it gives alone;
- the search's first step feeds each row's last prompt token (in place of
  START), and every step after it the token the search chose, as for an
  encoder-decoder. The beams of a prompt share its cache and attend it
  through their ancestry (`cache.reorder_beams`), the cache grows in phases
  (`resize_prompt_cache`).

The search's ids are the continuation alone (END included, PAD after it).
The prompt's width is a static shape: pad prompts to a few widths, each
compiles once.

Example:

>>> from keras_transformer.decoding import GreedySearch, decode
>>> from keras_transformer.models import build_decoder_only
>>> model = build_decoder_only(60, num_layers=1, d_model=16, num_heads=2, d_ff=32, max_length=16)
>>> result = decode(model, [[5, 6, 7], [8, 0, 0]], GreedySearch(alpha=0.0), max_length=4)
>>> tuple(result.ids.shape)
(2, 1, 4)
"""

import keras
from keras import ops

from keras_transformer.decoding.cache import _ancestry_mask, reorder_beams
from keras_transformer.decoding.search import Step, check_beam_size
from keras_transformer.decoding.traced_step import traced_once


def starts_from_padding(model):
    """Whether `model`'s padding id is its start id (GPT-2): then a row of padding is the prompt `[start]`."""
    config = model.config
    return config.target_pad == config.start_id


def left_aligned(prompt_ids, pad_id, min_length=0):
    """`(ids, offsets)`: right-padded `prompt_ids` `(batch, width)` moved to the right end of their width.

    `offsets` `(batch,)` is the padding in front of each row now: its
    prompt's first token sits at column `offsets[row]`. A prompt's length
    runs to its last token that is not `pad_id`, and is at least `min_length`.

    Example:

    >>> ids, offsets = left_aligned(keras.ops.convert_to_tensor([[5, 6, 0], [7, 0, 0]]), 0)
    >>> keras.ops.convert_to_numpy(ids).tolist(), keras.ops.convert_to_numpy(offsets).tolist()
    ([[0, 5, 6], [0, 0, 7]], [1, 2])
    """
    width = ops.shape(prompt_ids)[1]
    columns = ops.arange(width, dtype="int32")[None]
    lengths = ops.maximum(ops.max(ops.where(ops.not_equal(prompt_ids, pad_id), columns + 1, 0), axis=1), min_length)
    offsets = width - lengths
    source = columns - offsets[:, None]
    moved = ops.take_along_axis(prompt_ids, ops.clip(source, 0, width - 1), axis=1)
    return ops.where(source >= 0, moved, pad_id), offsets


def check_prompt_length(model, width, max_length):
    """A `ValueError` unless a prompt `width` wide and `max_length` new tokens fit the model's positions."""
    if isinstance(width, int) and width - 1 + max_length > model.max_length:
        raise ValueError(
            f"A prompt of {width} tokens continued by max_length={max_length} tokens needs "
            f"{width - 1 + max_length} positions; the model has max_length={model.max_length}"
        )


def prompt_state(model, prompt_ids, max_length, beam_size=1):
    """The state of `prompt_step` before the first generated token: the prompt (but its last token) cached.

    `(caches, ancestry, prompt)`: each decoder layer's `(keys, values)`
    `(batch, heads, prefix * beam_size, key_dim)` holding the prompt's
    first `prefix = width - 1` columns, the same for every beam; the int32
    `ancestry` `(batch, beam_size, prefix + max_length)`; and `prompt`:
    `(visible (batch, prefix) bool, last token (batch,), offsets (batch,))`.
    """
    beams = check_beam_size(beam_size)
    ids, offsets = left_aligned(prompt_ids, model.config.target_pad, min_length=int(starts_from_padding(model)))
    width = ids.shape[1]
    check_prompt_length(model, width, max_length)
    prefix = width - 1
    batch = ops.shape(ids)[0]
    visible = ops.arange(prefix, dtype="int32")[None] >= offsets[:, None]
    caches = model.empty_self_attention_caches(batch, prefix)
    if prefix:
        caches = model.prompt_caches(ids[:, :prefix], -offsets, caches, attention_mask=visible[:, None, :])
    caches = keras.tree.map_structure(lambda cache: ops.repeat(cache, beams, axis=2), caches)
    ancestry = ops.broadcast_to(ops.arange(beams, dtype="int32")[None, :, None], (batch, beams, prefix + max_length))
    return caches, ancestry, (visible, ids[:, -1], offsets)


def prompt_step(model, beam_size=1):
    """The `Step` over `prompt_state`'s state: `step_fn` with `resize_prompt_cache` and `cache.reorder_beams`."""
    beams = check_beam_size(beam_size)

    def step_fn(tokens, index, state):
        caches, ancestry, (visible, last, offsets) = state
        # Sizes from `ops.shape`: the step is traced once with its batch and cache sizes open (`traced_once`).
        batch, prefix = ops.shape(visible)[0], ops.shape(visible)[1]
        position = index + prefix  # the cache position of this step's token
        tokens = ops.where(index == 0, ops.repeat(last, beams), tokens)  # the first step feeds the prompt's last
        own_beam = ops.broadcast_to(ops.arange(beams, dtype="int32")[None, :, None], (batch, beams, 1))
        ancestry = ops.slice_update(ancestry, (0, 0, position), own_beam)
        positions = ops.shape(caches[0][0])[2] // beams
        shown = ops.concatenate([visible, ops.ones((batch, positions - prefix), "bool")], axis=1)
        mask = ops.repeat(shown, beams, axis=1)[:, None]  # (batch, 1, entries): not the padding before a prompt
        if beams > 1:
            mask = ops.logical_and(_ancestry_mask(ancestry, positions, beams), mask)
        logits, caches = model.decoder_step(
            ops.reshape(tokens, (-1, beams)),
            position - offsets,
            caches,
            cache_update_index=position * beams,
            attention_mask=mask,
        )
        logits = ops.reshape(logits, (-1, ops.shape(logits)[-1]))
        return ops.cast(logits, "float32"), (caches, ancestry, (visible, last, offsets))

    return Step(traced_once(step_fn), resize_prompt_cache, reorder_beams)


def resize_prompt_cache(state, length):
    """`prompt_state`'s state with room for the prompt and `length` generated positions: cut, or zero-padded."""
    caches, ancestry, prompt = state
    beams, prefix = ancestry.shape[1], prompt[0].shape[1]
    entries = (prefix + length) * beams

    def resize(cache):
        if cache.shape[2] >= entries:
            return cache[:, :, :entries]
        return ops.pad(cache, ((0, 0), (0, 0), (0, entries - cache.shape[2]), (0, 0)))

    return keras.tree.map_structure(resize, caches), ancestry, prompt
