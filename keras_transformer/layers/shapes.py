"""Static shape checks of the layers' call arguments: a `ValueError` that names the argument.

Only sizes known when a graph is built or traced are checked (a `keras.Input`,
a `tf.function` or `jax.jit` trace, an eager tensor); a size that is unknown
until run time (`None`) always passes. A wrong rank would otherwise surface
as an `IndexError` or a broadcast error deep inside the attention.

Example:

>>> check_sequence((2, 7, 32), "inputs", d_model=32)
>>> check_sequence((2, 32), "inputs", d_model=32)
Traceback (most recent call last):
...
ValueError: `inputs` must have shape (batch, length, d_model=32). Received: inputs.shape=(2, 32)
"""

import numbers


def static_shape(value):
    """The static shape of `value` (a tensor, or a shape) as a tuple of ints and `None`s; `None` if its rank is unknown.

    Example:

    >>> static_shape((2, None, 4))
    (2, None, 4)
    """
    shape = getattr(value, "shape", value)
    try:
        sizes = tuple(shape)
    except (TypeError, ValueError):  # a TensorShape of unknown rank, or no shape at all
        return None
    if shape is value and any(isinstance(size, (bool, float, str, list, tuple)) for size in sizes):
        return None  # values (nested lists, say), not a shape
    # A size that is no int (None, a symbolic size of JAX's shape polymorphism) is unknown.
    return tuple(int(size) if isinstance(size, numbers.Integral) else None for size in sizes)


def fits(shape, expected):
    """Whether each known size of `shape` is 1 or equals the known size of `expected` (same rank, right-aligned).

    Example:

    >>> fits((2, 1, 5), (2, 4, 5)), fits((2, 3, 5), (None, 3, None)), fits((2, 3, 5), (2, 4, 5))
    (True, True, False)
    """
    return all(
        got is None or want is None or got in (1, want) for got, want in zip(reversed(shape), reversed(expected))
    )


def check_sequence(value, name, d_model=None):
    """Raises a `ValueError` unless `value` (a tensor or a shape) is `(batch, length, d_model)`.

    The rank must be 3; the last size, when known, must equal `d_model`
    (when given). A shape of unknown rank passes.
    """
    shape = static_shape(value)
    if shape is None:
        return
    last = shape[-1] if shape else None
    if len(shape) != 3 or (d_model is not None and last is not None and last != d_model):
        expected = "d_model" if d_model is None else f"d_model={d_model}"
        raise ValueError(f"`{name}` must have shape (batch, length, {expected}). Received: {name}.shape={shape}")
