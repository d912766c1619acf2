"""Argument types shared by the sub-commands: nonsense is refused while parsing.

Each function here is an argparse `type=`: it turns the text of one
command-line value into a number or a path, or raises
`argparse.ArgumentTypeError`, which argparse reports as one line naming the
flag, e.g. `keras-transformer train: error: argument --epochs: must be a
positive integer, got '0'`, with exit status 2, before anything is loaded
or written.

Example:

>>> import argparse
>>> parser = argparse.ArgumentParser(prog="demo")
>>> _ = parser.add_argument("--epochs", type=positive_int)
>>> parser.parse_args(["--epochs", "3"]).epochs
3
>>> probability("0.9"), non_negative_finite_float("0")
(0.9, 0.0)
>>> positive_finite_float("nan")
Traceback (most recent call last):
...
argparse.ArgumentTypeError: must be a positive finite number, got 'nan'
"""

import argparse
import math

from keras_transformer.opener import ENGINES

SEED_MAX = 2**32 - 1  # NumPy's seeds, which `keras.utils.set_random_seed` sets, stop there
INT32_MAX = 2**31 - 1
# In the --help of the commands that load a model.
TRUST = "Only load models you trust: a SavedModel is a program, and TensorFlow runs whatever graph it holds."


def _refuse(what, text):
    raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")


def _int(text, what):
    try:
        return int(text)
    except ValueError:
        _refuse(what, text)


def _float(text, what):
    try:
        value = float(text)
    except ValueError:
        _refuse(what, text)
    if not math.isfinite(value):  # nan, inf, and overflows such as 1e999
        _refuse(what, text)
    return value


def int_in_range(low, high, what=None):
    """An argparse type for integers in `[low, high]`, e.g. `int_in_range(-1, SEED_MAX)`."""
    what = what or f"an integer from {low} to {high}"

    def parse(text):
        value = _int(text, what)
        if not low <= value <= high:
            _refuse(what, text)
        return value

    parse.__name__ = f"int_in_range_{low}_{high}"
    return parse


def setting_type(part, name):
    """The argparse type of the configuration field `name` of `part` (e.g. `DecodingConfig`): its kind's check.

    The flag takes what the field takes, in the field's words: the table of
    `keras_transformer.config` is the one place a setting's range is written.

    Example:

    >>> from keras_transformer.config import DecodingConfig
    >>> setting_type(DecodingConfig, "beam_size")("4")
    4
    >>> setting_type(DecodingConfig, "beam_size")("500")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be an int in [1, 128], got '500'
    """
    kind = part.field(name).metadata["kind"]

    def parse(text):
        value = _int(text, kind.words) if kind.parse is int else _float(text, kind.words)
        if not kind.accepts(value):
            _refuse(kind.words, text)
        return value

    parse.__name__ = name
    return parse


def positive_int(text):
    """An integer >= 1: epochs, beams, batch sizes, lengths, devices."""
    value = _int(text, "a positive integer")
    if value < 1:
        _refuse("a positive integer", text)
    return value


def non_negative_int(text):
    """An integer >= 0 that fits in 32 bits: `--top-k` (0 = off)."""
    return int_in_range(0, INT32_MAX, "an integer >= 0 (and < 2**31)")(text)


def positive_finite_float(text):
    """A number > 0, not NaN or infinite: `--minutes`, `--scale`."""
    value = _float(text, "a positive finite number")
    if value <= 0:
        _refuse("a positive finite number", text)
    return value


def non_negative_finite_float(text):
    """A number >= 0, not NaN or infinite: `--temperature` (0 = greedy), `--alpha`."""
    value = _float(text, "a finite number >= 0")
    if value < 0:
        _refuse("a finite number >= 0", text)
    return value


def probability(text):
    """A number in (0, 1]: `--top-p` (1 = off)."""
    value = _float(text, "a number in (0, 1]")
    if not 0 < value <= 1:
        _refuse("a number in (0, 1]", text)
    return value


def non_empty(text):
    """A path or text that is not empty or blank: an empty `--output` would mean the current folder."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"must not be empty or blank, got {text!r}")
    return text


def add_loadable_model_argument(parser):
    """`--model`: a run directory, an exported SavedModel or a LiteRT export, as `export.load` takes."""
    parser.add_argument(
        "--model",
        required=True,
        type=non_empty,
        help="a training run directory, an exported SavedModel or a LiteRT export (one you trust)",
    )


def add_engine_argument(parser):
    """`--engine`: what decodes `--model` (`keras_transformer.opener`: the folder's default when not given)."""
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        default=None,
        help="the decoder: xla (the default for runs and SavedModels), ctranslate2 (a run directory, converted "
        "once and cached; needs the ctranslate2 extra) or litert (a LiteRT export's own, its default)",
    )


def add_ban_argument(parser):
    """`--ban WORD`, repeatable: words no output may hold (`translators.banned_words`)."""
    parser.add_argument(
        "--ban",
        metavar="WORD",
        action="append",
        type=non_empty,
        default=None,
        help="a word no output may hold (repeatable): the ids of its pieces are never produced, so those pieces "
        "are banned inside other words too (docs/translating.md)",
    )


def add_workers_argument(parser):
    """`--workers`: batches decoded side by side."""
    parser.add_argument(
        "--workers",
        type=positive_int,
        default=1,
        help="batches decoded side by side, each on its own thread (default 1; 2 is faster on a 2-core CPU)",
    )
