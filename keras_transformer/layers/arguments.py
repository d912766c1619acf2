"""Checks of constructor arguments: a `ValueError` that names the argument.

A zero or negative size would otherwise surface later as a
`ZeroDivisionError` or a shape error deep inside Keras, far from its cause.
"""

import numbers


def check_positive_int(name, value):
    """`value` as a Python int if it is a positive integer, else a `ValueError`.

    NumPy integers are accepted (and returned as `int`, so configs stay
    JSON-serializable); bools, floats and strings are not.

    Example:

    >>> check_positive_int("num_heads", 8)
    8
    >>> check_positive_int("num_heads", 0)
    Traceback (most recent call last):
    ...
    ValueError: `num_heads` must be a positive int. Received: num_heads=0
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"`{name}` must be a positive int. Received: {name}={value!r}")
    return int(value)


def check_rate(name, value):
    """`value` if it is a number in `[0, 1)` (a dropout rate), else a `ValueError`.

    Example:

    >>> check_rate("dropout", 0.1)
    0.1
    >>> check_rate("dropout", 1.0)
    Traceback (most recent call last):
    ...
    ValueError: `dropout` must be a number in [0, 1). Received: dropout=1.0
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 <= value < 1:
        raise ValueError(f"`{name}` must be a number in [0, 1). Received: {name}={value!r}")
    return value


def check_positive_number(name, value):
    """`value` if it is a number > 0 (e.g. an epsilon), else a `ValueError`.

    Example:

    >>> check_positive_number("layer_norm_epsilon", -1e-6)
    Traceback (most recent call last):
    ...
    ValueError: `layer_norm_epsilon` must be a positive number. Received: layer_norm_epsilon=-1e-06
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value > 0:
        raise ValueError(f"`{name}` must be a positive number. Received: {name}={value!r}")
    return value
