"""What a setting may be: each kind with its check and the words its errors say, the one vocabulary of ranges.

A check returns the value (as a Python int or float, so that configs stay
JSON) or raises a `ValueError` that names the argument, what was expected and
what was received: "`num_heads` must be a positive int. Received:
num_heads=0". A zero or negative size would otherwise surface later as a
`ZeroDivisionError` or a shape error deep inside Keras, far from its cause.

A `Kind` joins a check to its words, and to the type a command-line string
is read as: the configuration dataclasses (`keras_transformer.config`) give
each field one, and a run's `config.json`, a LiteRT export's `litert.json`
and the command line's flags are all read against it.

Example:

>>> BEAM_SIZE.words
'an int in [1, 128]'
>>> BEAM_SIZE.check("beam_size", 0)
Traceback (most recent call last):
...
ValueError: `beam_size` must be an int in [1, 128]. Received: beam_size=0
"""

import dataclasses
import math
import numbers
from collections.abc import Callable

MAX_LENGTH = 65536  # positions a model may have (the importable families have 512-1024)
MAX_BEAM_SIZE = 128  # far above what beam search gains from (4-12); small enough for its cache to fit


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


def check_int_in_range(name, value, low, high):
    """`value` as an int if it is an integer in `[low, high]` (not a bool), else a `ValueError` naming `name`.

    Example:

    >>> check_int_in_range("beam_size", "4", 1, 128)
    Traceback (most recent call last):
    ...
    ValueError: `beam_size` must be an int in [1, 128]. Received: beam_size='4'
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not low <= value <= high:
        raise ValueError(f"`{name}` must be an int in [{low}, {high}]. Received: {name}={_short(value)}")
    return int(value)


def check_finite_number(name, value, low=-math.inf):
    """`value` as a float if it is a finite number >= `low` (not a bool or a string), else a `ValueError`."""
    try:
        valid = not isinstance(value, bool) and isinstance(value, numbers.Real) and math.isfinite(value)
    except OverflowError:  # an int past the float range
        valid = False
    if not valid or value < low:
        bound = f" >= {low:g}" if low > -math.inf else ""
        raise ValueError(f"`{name}` must be a finite number{bound}. Received: {name}={_short(value)}")
    return float(value)


def check_bool(name, value):
    """`value` if it is True or False (a JSON boolean: not "false", not 0), else a `ValueError` naming `name`."""
    if not isinstance(value, bool):
        raise ValueError(f"`{name}` must be true or false. Received: {name}={_short(value)}")
    return value


def check_choice(name, value, choices):
    """`value` if it is one of `choices`, else a `ValueError` naming `name` and the choices."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"`{name}` must be one of {choices}. Received: {name}={_short(value)}")
    return value


def check_ids(name, ids, vocab_size=None):
    """`ids` if it is a sequence of token ids (ints in [0, `vocab_size`) where given), else a `ValueError`."""
    if isinstance(ids, (str, bytes)) or not isinstance(ids, (list, tuple)):
        raise ValueError(f"`{name}` must be a list of token ids. Received: {name}={_short(ids)}")
    high = vocab_size if vocab_size is not None else 2**31
    for index in ids:
        if isinstance(index, bool) or not isinstance(index, numbers.Integral) or not 0 <= index < high:
            raise ValueError(f"`{name}` must hold ids in [0, {high}). Received: {_short(index)} in {name}")
    return ids


def _short(value, limit=80):
    """`repr(value)`, cut to `limit` characters; a huge int described by its digits, never printed whole."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**limit:
        return f"an int of about {int(value.bit_length() * math.log10(2)) + 1} digits"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclasses.dataclass(frozen=True)
class Kind:
    """A kind of setting: `words` say what it must be, `check(name, value)` checks it, `parse` reads a flag.

    `parse` is the type a command-line string is read as (`int`, `float`),
    None for a setting no flag takes.
    """

    words: str
    check: Callable
    parse: Callable = None

    def accepts(self, value):
        """Whether `check` takes `value`."""
        try:
            self.check("value", value)
        except ValueError:
            return False
        return True


def int_range(low, high):
    """The kind of an int in `[low, high]`."""
    return Kind(f"an int in [{low}, {high}]", lambda name, value: check_int_in_range(name, value, low, high), int)


def choice(options):
    """The kind of one of the strings `options`."""
    return Kind(f"one of {tuple(options)}", lambda name, value: check_choice(name, value, tuple(options)))


POSITIVE_INT = Kind("a positive int", check_positive_int, int)
NON_NEGATIVE_INT = int_range(0, 2**63 - 1)
UNIT = Kind("a number in [0, 1]", lambda name, value: _in_unit(name, value), float)
POSITIVE_INTS = Kind("a list of positive ints", lambda name, value: _positive_ints(name, value))
RATE = Kind("a number in [0, 1)", check_rate, float)
POSITIVE_NUMBER = Kind("a positive number", check_positive_number, float)
NON_NEGATIVE_NUMBER = Kind("a finite number >= 0", lambda name, value: check_finite_number(name, value, low=0), float)
BOOL = Kind("true or false", check_bool)
IDS = Kind("a list of token ids", check_ids)
TEXT = Kind("a string", lambda name, value: value if isinstance(value, str) else _not_text(name, value))
LENGTH = int_range(1, MAX_LENGTH)
BEAM_SIZE = int_range(1, MAX_BEAM_SIZE)


def _not_text(name, value):
    raise ValueError(f"`{name}` must be a string. Received: {name}={_short(value)}")


def _in_unit(name, value):
    if check_finite_number(name, value, low=0) > 1:
        raise ValueError(f"`{name}` must be a number in [0, 1]. Received: {name}={_short(value)}")
    return value


def _positive_ints(name, values):
    if not isinstance(values, (list, tuple)) or not values:
        raise ValueError(f"`{name}` must be a list of positive ints. Received: {name}={_short(values)}")
    for value in values:
        check_positive_int(name, value)
    return values


def close_matches(word, choices, count=3):
    """Up to `count` of `choices` nearest to `word`, nearest first: same but for case, then sharing its
    beginning, then by spelling (`difflib`).

    >>> close_matches("eng", ["de", "en", "eng_Latn", "fra_Latn"])
    ['en', 'eng_Latn']
    >>> close_matches("deu_Latm", ["deu_Latn", "dan_Latn", "zul_Latn"])
    ['deu_Latn', 'zul_Latn', 'dan_Latn']
    """
    import difflib

    word, lowered = str(word).lower(), {choice.lower(): choice for choice in choices}
    shared = [c for c in lowered if c == word or c.startswith(word) or (word.startswith(c) and len(c) >= 2)]
    shared.sort(key=lambda c: (c != word, abs(len(c) - len(word))))
    spelled = difflib.get_close_matches(word, list(lowered), n=count, cutoff=0.5)
    ordered = list(dict.fromkeys(shared + spelled))
    return [lowered[c] for c in ordered[:count]]
