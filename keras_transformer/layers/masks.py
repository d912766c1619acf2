"""Attention masks as pure functions.

One meaning everywhere, the Keras one: a boolean mask is `True` where attention
is **allowed** and `False` where it is blocked (as in
`keras.layers.MultiHeadAttention`). This is the opposite of the additive masks of
some tutorials (`1 = blocked`, `logits += mask * -1e9`), so every function
and layer of this package that takes a mask rejects a float or int mask with
a `ValueError` (`check_mask`) instead of reading it the wrong way round.
"""

import numbers

import keras
from keras import ops

from keras_transformer.layers.shapes import fits, static_shape


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

    A `length` that is not a positive int, or an `offset` that is not a
    non-negative int, is a `ValueError` naming it (a scalar integer tensor,
    e.g. a traced length, passes unchecked).

    Example:

    >>> ops.convert_to_numpy(causal_mask(3)).astype(int)
    array([[1, 0, 0],
           [1, 1, 0],
           [1, 1, 1]])
    >>> causal_mask(-3)
    Traceback (most recent call last):
    ...
    ValueError: `length` must be a positive int. Received: length=-3
    """
    _check_position_count("length", length, minimum=1)
    _check_position_count("offset", offset, minimum=0)
    query_positions = ops.arange(length)[:, None] + offset
    key_positions = ops.arange(length + offset)[None, :]
    return ops.greater_equal(query_positions, key_positions)


def _check_position_count(name, value, minimum):
    """A `ValueError` for a Python or NumPy int below `minimum`, another number or str, or a non-integer tensor.

    Integer tensors and symbolic sizes (a traced length, JAX's shape
    polymorphism) pass: their values are not known here.
    """
    if isinstance(value, (numbers.Number, str, bytes)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
            kind = "a positive int" if minimum == 1 else "a non-negative int"
            raise ValueError(f"`{name}` must be {kind}. Received: {name}={value!r}")
    elif hasattr(value, "dtype") and "int" not in keras.backend.standardize_dtype(value.dtype):
        raise ValueError(f"`{name}` must be an int. Received: {name} of dtype {value.dtype}")


def check_mask(mask, name="mask"):
    """`mask` as a boolean tensor (`None` stays `None`); a `ValueError` if it is not boolean.

    Only the dtype is checked, so this works on symbolic tensors, inside
    `tf.function`/XLA and under `jax.jit`. A float or int mask is rejected,
    not cast: the additive masks of the TensorFlow tutorials (0 = keep,
    1 or -1e9 = blocked) mean the opposite of this package's `True` = may
    attend, and `0/1` ints are ambiguous between the two.

    Example:

    >>> ops.convert_to_numpy(check_mask([[True, False]]))
    array([[ True, False]])
    >>> tutorial_mask = ops.convert_to_tensor([[0.0, 1.0]])  # 1 = padding
    >>> check_mask(tutorial_mask, "attention_mask")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: `attention_mask` must be a boolean mask, True where attention is allowed ...
    >>> ops.convert_to_numpy(check_mask(ops.equal(tutorial_mask, 0)))
    array([[ True, False]])
    """
    if mask is None:
        return None
    if not hasattr(mask, "dtype"):
        mask = ops.convert_to_tensor(mask)
    dtype = keras.backend.standardize_dtype(mask.dtype)
    if dtype != "bool":
        raise ValueError(
            f"`{name}` must be a boolean mask, True where attention is allowed (for a "
            "padding mask: True at real tokens), as in keras.layers.MultiHeadAttention. "
            f"Received: {name} of dtype {dtype}. Float and int masks are not accepted: "
            "the additive masks of the TensorFlow tutorials (0 = keep, 1 or -1e9 = blocked, "
            "`logits += mask * -1e9`) mean the opposite; convert one with "
            f"`{name} = keras.ops.equal(mask, 0)` (or `tf.equal(mask, 0)`)."
        )
    return mask


def check_mask_shape(mask, name, axes, expected, ranks=None):
    """`mask` as it is if its static shape fits `expected`, else a `ValueError` naming `name`.

    Args:
        mask: a mask (a tensor, array or `None`, which passes).
        name: the argument's name, for the message.
        axes: the names of the expected axes, e.g. `("batch", "length")`.
        expected: their sizes, `None` where unknown.
        ranks: the ranks accepted (default `len(axes)`); a lower rank stands
            for the last axes (it broadcasts over the first ones).

    Each known size must be 1 (it broadcasts) or the expected size; a size
    unknown until run time passes, as does a mask of unknown rank. Static
    shapes only, so it works on `keras.Input`s, in XLA traces and on JAX.

    Example:

    >>> check_mask_shape(ops.ones((2, 5), "bool"), "padding_mask", ("batch", "length"), (2, 4))
    Traceback (most recent call last):
    ...
    ValueError: `padding_mask` must have shape (batch, length)=(2, 4) (a size of 1 broadcasts).
    Received: padding_mask.shape=(2, 5)
    """
    shape = None if mask is None else static_shape(mask)
    expected = tuple(size if isinstance(size, int) else None for size in expected)  # a traced size: unknown
    ranks = (len(axes),) if ranks is None else ranks
    if shape is None or (len(shape) in ranks and fits(shape, expected)):
        return mask
    alternatives = "".join(f" or ({', '.join(axes[len(axes) - rank :])})" for rank in ranks if rank != len(axes))
    raise ValueError(
        f"`{name}` must have shape ({', '.join(axes)})={tuple(expected)}{alternatives} (a size of 1 broadcasts). "
        f"Received: {name}.shape={shape}"
    )


def key_padding_to_attention_mask(key_mask):
    """Turns a boolean `(batch, k_len)` key mask into a `(batch, 1, k_len)` attention mask."""
    key_mask = check_mask(key_mask, "key_mask")
    return None if key_mask is None else ops.expand_dims(key_mask, 1)


def merge_masks(*masks):
    """Logical AND of boolean masks that broadcast together; `None`s are skipped.

    A float or int mask is a `ValueError` (see `check_mask`).

    Example:

    >>> keys = key_padding_to_attention_mask(padding_mask([[4, 2, 0]]))
    >>> ops.convert_to_numpy(merge_masks(keys, causal_mask(3), None)).astype(int)
    array([[[1, 0, 0],
            [1, 1, 0],
            [1, 1, 0]]])
    """
    merged = None
    for index, mask in enumerate(masks):
        if mask is None:
            continue
        mask = check_mask(mask, f"masks[{index}]")
        merged = mask if merged is None else ops.logical_and(merged, mask)
    return merged


def large_negative(dtype):
    """The most negative logit that is safe in `dtype` (no overflow in float16)."""
    dtype = keras.backend.standardize_dtype(dtype)
    if dtype == "float16":
        return -3e4
    return -1e9


def get_keras_mask(tensor):
    """The implicit Keras mask that a previous layer attached to `tensor`, if any.

    Keras 3 reads and writes these masks in `keras.src.backend` only (no
    public API); older Keras kept them as the tensor's `_keras_mask`.
    """
    getter = getattr(keras.src.backend, "get_keras_mask", None)
    if getter is not None:
        return getter(tensor)
    return getattr(tensor, "_keras_mask", None)
