"""Inputs of a translator, checked in Python before any TensorFlow call.

A `tf.function` whose input signature rejects a call keeps its lock (a
TensorFlow bug, TF 2.21), so every later call from another thread would
hang: the `Translator` and `LoadedTranslator` methods check here first, and
a bad input is a one-line `ValueError` naming the argument.

Example:

>>> sentences(["A dog runs."])  # a 1-D tf.string tensor
>>> sentences("A dog runs.")  # ValueError: ... Received: a str 'A dog runs.' (wrap a single sentence in a list)
>>> sentences([b"caf\\xe9 au lait"])  # ValueError: `sentences[0]` is not valid UTF-8 text (invalid ...
"""

import math

import numpy as np
import tensorflow as tf

from keras_transformer.input_rules import sentence_error


def sentences(sentences, name="sentences"):
    """`sentences` as a 1-D `tf.string` tensor, checked in Python before any TensorFlow call.

    Takes a 1-D string tensor, a list (or tuple, or 1-D numpy array) of str or
    bytes. Anything else, or a sentence that breaks the input rule
    (`keras_transformer.input_rules`: UTF-8, no NUL byte) is a one-line
    `ValueError` naming the argument (`name`). A symbolic tensor (inside a
    `tf.function`) is checked for dtype and rank only.
    """
    if isinstance(sentences, np.ndarray) and sentences.ndim == 1 and sentences.dtype.kind in "USO":
        sentences = sentences.tolist()
    if isinstance(sentences, (list, tuple)):
        for index, sentence in enumerate(sentences):
            if not isinstance(sentence, (str, bytes)):
                kind = type(sentences).__name__
                _reject(name, f"a {kind} holding {_describe(sentence)} at index {index}")
        _check_texts(sentences, name)
        return tf.constant(list(sentences), tf.string) if sentences else tf.zeros([0], tf.string)
    if (
        not tf.is_tensor(sentences)
        or isinstance(sentences, (tf.RaggedTensor, tf.SparseTensor))
        or sentences.dtype != tf.string
        or sentences.shape.rank != 1
    ):
        _reject(name, _describe(sentences))
    if tf.executing_eagerly():
        _check_texts(sentences.numpy(), name)
    return sentences


def pairs(sources, targets):
    """`sources` and `targets` checked as by `sentences`, and of the same length."""
    sources, targets = sentences(sources, "sources"), sentences(targets, "targets")
    if sources.shape[0] is not None and targets.shape[0] is not None and sources.shape[0] != targets.shape[0]:
        raise ValueError(
            "`sources` and `targets` must hold as many sentences. "
            f"Received: {sources.shape[0]} sources and {targets.shape[0]} targets"
        )
    return sources, targets


def _reject(name, received):
    raise ValueError(f"`{name}` must be a 1-D string tensor or a list of str. Received: {received}")


def _check_texts(sentences, name):
    """A sentence that breaks the input rule (`input_rules.sentence_error`) is a `ValueError` naming it."""
    for index, sentence in enumerate(sentences):
        reason = sentence_error(sentence)
        if reason is not None:
            raise ValueError(f"`{name}[{index}]` {reason}. Received: {name}[{index}]={_short(sentence)}")


def _describe(value):
    """A one-line description of a rejected input: its kind, dtype and shape, or a short repr."""
    if isinstance(value, (tf.RaggedTensor, tf.SparseTensor)):
        return f"a {type(value).__name__} of dtype {value.dtype.name}, shape {value.shape}"
    if tf.is_tensor(value) or isinstance(value, np.ndarray):
        dtype = value.dtype.name if tf.is_tensor(value) else str(value.dtype)
        kind = "tensor" if tf.is_tensor(value) else "numpy array"
        rank = value.shape.rank if tf.is_tensor(value) else value.ndim
        if rank is None:
            return f"a {dtype} {kind} of unknown rank"
        if rank == 0:
            return f"a scalar {dtype} {kind}"
        return f"a {rank}-D {dtype} {kind} of shape {tuple(value.shape)}"
    if isinstance(value, str):
        return f"a str {_short(value)} (wrap a single sentence in a list)"
    return f"{type(value).__name__} {_short(value)}"


def _short(value, limit=60):
    """`repr(value)` cut to `limit` characters; an int too long to print in full is described."""
    if isinstance(value, int) and value.bit_length() > 4 * limit:
        return f"{'a negative' if value < 0 else 'an'} int of about {round(value.bit_length() * math.log10(2))} digits"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def sampling(temperature, top_k, top_p, seed):
    """`sample`'s numbers as the SavedModel's scalar tensors, checked in Python first."""
    return (
        _number(
            "temperature",
            temperature,
            tf.float32,
            "a finite number >= 0 (0 = greedy)",
            lambda t: math.isfinite(t) and t >= 0,
        ),
        _number("top_k", top_k, tf.int32, "an int >= 0 (0 = off)", lambda k: 0 <= k < 2**31),
        _number("top_p", top_p, tf.float32, "a number in (0, 1] (1 = off)", lambda p: 0 < p <= 1),
        _number("seed", seed, tf.int64, "an int (-1 = random)", lambda s: -(2**63) <= s < 2**63),
    )


def _number(name, value, dtype, expected, valid):
    """`value` (a number, or a scalar tensor or array) as a scalar `dtype` tensor.

    A value of the wrong kind, or one that `valid` refuses, is a `ValueError` naming `name`.
    """
    received = value
    if tf.is_tensor(value) and not tf.executing_eagerly():  # symbolic: its value is checked in the graph
        if value.shape.rank == 0 and (value.dtype.is_integer or (value.dtype.is_floating and dtype.is_floating)):
            return tf.cast(value, dtype)
        value = None
    elif tf.is_tensor(value) or isinstance(value, (np.ndarray, np.generic)):
        value = value.numpy() if tf.is_tensor(value) else value
        value = value.item() if np.ndim(value) == 0 else None
    integer = isinstance(value, int) and not isinstance(value, bool)
    number = integer or (isinstance(value, float) and dtype.is_floating)
    if number and dtype.is_floating:
        value = _as_float32(value)  # checked as the SavedModel will see it
    if not number or not valid(value):
        raise ValueError(f"`{name}` must be {expected}. Received: {name}={_short(received)}")
    return tf.constant(value, dtype)


def _as_float32(value):
    """`value` (an int or float) rounded to float32: too large a magnitude is +-inf, too small is 0."""
    try:
        value = float(value)
    except OverflowError:  # an int past the float range, e.g. 10**400
        return math.inf if value > 0 else -math.inf
    with np.errstate(over="ignore"):
        return float(np.float32(value))
