"""Attention masks as pure functions.

One meaning everywhere, the Keras one: a boolean mask is `True` where attention
is **allowed** and `False` where it is blocked (as in
`keras.layers.MultiHeadAttention`). This is the opposite of the additive masks of
some tutorials (`1 = blocked`, `logits += mask * -1e9`).
"""

import keras
from keras import ops


def padding_mask(token_ids, pad_id=0):
    """Marks real tokens: `True` where `token_ids != pad_id`.

    Args:
        token_ids: integer tensor of shape `(batch, length)`.
        pad_id: the padding token id (0 by convention).

    Returns:
        A boolean tensor of shape `(batch, length)`.

    Example:

    >>> ops.convert_to_numpy(padding_mask([[5, 7, 0, 0]]))
    array([[ True,  True, False, False]])
    """
    return ops.not_equal(ops.convert_to_tensor(token_ids), pad_id)


def causal_mask(length, offset=0):
    """The look-ahead mask: query `i` may attend key `j` only if `j <= i + offset`.

    Args:
        length: number of queries (and keys when `offset` is 0).
        offset: position of the first query among the keys; a decoding cache
            with `offset` earlier positions uses `length + offset` keys.

    Returns:
        A boolean tensor of shape `(length, length + offset)`, `True` on and below
        the diagonal.

    Example:

    >>> ops.convert_to_numpy(causal_mask(3)).astype(int)
    array([[1, 0, 0],
           [1, 1, 0],
           [1, 1, 1]])
    """
    query_positions = ops.arange(length)[:, None] + offset
    key_positions = ops.arange(length + offset)[None, :]
    return ops.greater_equal(query_positions, key_positions)


def key_padding_to_attention_mask(key_mask):
    """Turns a `(batch, k_len)` key mask into a `(batch, 1, k_len)` attention mask."""
    return None if key_mask is None else ops.expand_dims(ops.cast(key_mask, "bool"), 1)


def merge_masks(*masks):
    """Logical AND of boolean masks that broadcast together; `None`s are skipped.

    Example:

    >>> keys = key_padding_to_attention_mask(padding_mask([[4, 2, 0]]))
    >>> ops.convert_to_numpy(merge_masks(keys, causal_mask(3), None)).astype(int)
    array([[[1, 0, 0],
            [1, 1, 0],
            [1, 1, 0]]])
    """
    merged = None
    for mask in masks:
        if mask is None:
            continue
        mask = ops.cast(mask, "bool")
        merged = mask if merged is None else ops.logical_and(merged, mask)
    return merged


def large_negative(dtype):
    """The most negative logit that is safe in `dtype` (no overflow in float16)."""
    dtype = keras.backend.standardize_dtype(dtype)
    if dtype == "float16":
        return -3e4
    return -1e9


def get_keras_mask(tensor):
    """The implicit Keras mask that a previous layer attached to `tensor`, if any."""
    getter = getattr(keras.src.backend, "get_keras_mask", None)
    if getter is not None:
        return getter(tensor)
    return getattr(tensor, "_keras_mask", None)
