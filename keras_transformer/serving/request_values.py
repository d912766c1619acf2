"""The values of a TF Serving JSON request, checked against their inputs' dtypes; outputs back as JSON.

A string input is a JSON string or TF Serving's `{"b64": ...}` for raw
bytes, and must hold a sentence (`input_rules`: UTF-8, no NUL byte); a
scalar input is a JSON number its dtype holds within its own range
(`SCALAR_RANGES`: the `sample` signature's numbers, as its graph asserts
them). Every problem is a `RequestError` that names the value
(`instances[0].top_p`) and what it must be, before TensorFlow sees it.

Example:

>>> string_value({"b64": "SGk="}, "instances[0]")
b'Hi'
>>> import tensorflow as tf
>>> scalar_value(2, tf.TensorSpec([], tf.float32), "inputs.top_p")
Traceback (most recent call last):
...
keras_transformer.serving.request_values.RequestError: inputs.top_p must be in (0, 1], at least 1.2e-38 (float32). Received: 2
"""  # noqa: E501  (a doctest's output is one line)

import base64
import math

import numpy as np

from keras_transformer.input_rules import sentence_error  # the one rule of every way in


class RequestError(ValueError):
    """A request that cannot be served; `status` is the HTTP status to answer with."""

    def __init__(self, message, status=400):
        super().__init__(message)
        self.status = status


def is_b64(value):
    """Whether `value` is TF Serving's form of raw bytes, `{"b64": ...}`."""
    return isinstance(value, dict) and set(value) == {"b64"}


def string_value(value, where):
    """One string input as UTF-8 `bytes`: a JSON string, or TF Serving's `{"b64": ...}` for raw bytes."""
    if is_b64(value):
        try:
            data = base64.b64decode(value["b64"], validate=True)
        except (ValueError, TypeError):
            raise RequestError(f"{where}: 'b64' is not valid base64. Received: {short(value['b64'])}") from None
        reason = sentence_error(data)
        if reason is not None:
            raise RequestError(f"{where}: the decoded bytes {reason}")
    elif isinstance(value, str):
        reason = sentence_error(value)
        if reason is not None:
            raise RequestError(f"{where} {reason}. Received: {short(value)}")
        data = value.encode("utf-8")
    else:
        raise RequestError(f"{where} must be a string (DT_STRING). Received: {short(value)}")
    return data


# The sampling scalars' own ranges, which the SavedModel's graph asserts: (low, high, low excluded).
# Other scalars, and the bounds these leave open, take their dtype's range.
SCALAR_RANGES = {"temperature": (0, None, False), "top_k": (0, None, False), "top_p": (0, 1, True)}


def scalar_value(value, spec, where):
    """A scalar input as a Python number that its dtype holds and its range allows, or a `RequestError`.

    The error names `where` and the accepted range. Checked in Python before
    any TensorFlow call: a number that the dtype cannot hold (1e39 as float32
    is infinite, 1e-50 is 0) would otherwise fail inside the graph with a
    message that names no input, or overflow while converting. A number the
    dtype holds only as a subnormal counts as 0 (see `_as_float`).
    """
    name, dtype = where.rsplit(".", 1)[-1], spec.dtype
    if not (dtype.is_integer or dtype.is_floating):
        raise RequestError(f"{where}: scalar inputs of dtype {dtype.name} are not supported")
    low, high, low_excluded = _scalar_range(name, dtype)
    if dtype.is_integer:
        held = value if type(value) is int else None  # not bool, not a float, not a long integer's text
    else:
        held = _as_float(value, dtype)
    # The number the dtype holds must be in range, and so must the number sent, below: -1e-50 is no
    # temperature, though float32 holds it as -0.0. Above, rounding to the dtype's largest number is fine.
    allowed = held is not None and _within(held, low, high, low_excluded) and _within(value, low, None, low_excluded)
    if not allowed:
        described = _describe_range(dtype, low, high, low_excluded)
        raise RequestError(f"{where} must be {described}. Received: {short(value)}")
    return value if dtype.is_integer else float(value)


def _within(number, low, high, low_excluded):
    """Whether `number` lies between `low` (excluded if `low_excluded`) and `high` (None: no bound); NaN never."""
    above = number > low if low_excluded else number >= low
    return above and (high is None or number <= high)


def _as_float(value, dtype):
    """`value` as the float `dtype` holds it inside a graph, or None if it is no number.

    Infinite if it overflows; 0 if it underflows, and also if it is subnormal:
    TensorFlow flushes subnormal floats to zero on the CPU (1e-45 reaches the
    graph's `top_p > 0` check as 0).
    """
    if type(value) not in (int, float):
        return None
    try:
        with np.errstate(over="ignore", under="ignore"):
            held = float(np.asarray(value, dtype.as_numpy_dtype))
    except OverflowError:  # an int beyond float64
        return math.copysign(math.inf, value)
    return held if abs(held) >= _float_info(dtype).tiny else 0.0


def _float_info(dtype):
    try:
        return np.finfo(dtype.as_numpy_dtype)
    except ValueError:  # bfloat16 and other types of ml_dtypes
        import ml_dtypes

        return ml_dtypes.finfo(dtype.as_numpy_dtype)


def _scalar_range(name, dtype):
    """(low, high, low excluded) of a scalar input: its own range (`SCALAR_RANGES`) within its dtype's."""
    low, high, low_excluded = SCALAR_RANGES.get(name, (None, None, False))
    low = dtype.min if low is None else max(low, dtype.min)
    high = dtype.max if high is None else min(high, dtype.max)
    return (int(low), int(high), low_excluded) if dtype.is_integer else (float(low), float(high), low_excluded)


def _describe_range(dtype, low, high, low_excluded):
    """E.g. "an integer from 0 to 2147483647 (int32)", "in (0, 1], at least 1.2e-38 (float32)".

    The bounds are the dtype's: a number it rounds past them is refused.
    """
    if dtype.is_integer:
        return f"an integer from {low} to {high} ({dtype.name})"
    if low_excluded:
        smallest = max(low, float(_float_info(dtype).tiny))
        return f"in ({low:g}, {high:g}], at least {smallest:.2g} ({dtype.name})"
    return f"a finite number from {low:g} to {dtype.as_numpy_dtype(high)!s} ({dtype.name})"


def json_value(array):
    """A numpy value as JSON: strings decoded as UTF-8, numbers as Python numbers."""
    if isinstance(array, np.ndarray):
        return [json_value(item) for item in array]
    if isinstance(array, bytes):
        return array.decode("utf-8", errors="replace")
    if isinstance(array, np.generic):
        return array.item()
    return array


def short(value, limit=60):
    if type(value) is int and len(str(value)) > limit:
        return f"an integer of {len(str(abs(value)))} digits"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
