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
import contextlib
import math
import re

from keras_transformer.errors import ArgumentError
from keras_transformer.input_rules import sentence_error
from keras_transformer.opener import engine_names
from keras_transformer.translators.controls import prefix_error
from keras_transformer.translators.precision import PRECISIONS

SEED_MAX = 2**32 - 1  # NumPy's seeds, which `keras.utils.set_random_seed` sets, stop there
INT32_MAX = 2**31 - 1
# In the --help of the commands that load a model.
TRUST = "Only load models you trust: a SavedModel is a program, and TensorFlow runs whatever graph it holds."
# A code of each family of multilingual models, in the --help of the language flags.
SOURCE_EXAMPLE, TARGET_EXAMPLE = "eng_Latn (NLLB-200) or en (M2M100)", "fra_Latn (NLLB-200) or fr (M2M100)"
LANGUAGE_FLAGS = {"source_lang": "--source-lang", "target_lang": "--target-lang"}


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
    """`--engine`: what decodes `--model` (the folder's default when not given), and `--precision`: in what."""
    parser.add_argument(
        "--engine",
        choices=engine_names(),  # the registry's (`engines.ENGINES`), read when the parser is built
        default=None,
        help="the decoder: xla (the default for runs and SavedModels), ctranslate2 (a run directory, converted "
        "once and cached; needs the ctranslate2 extra) or litert (a LiteRT export's own, its default)",
    )
    parser.add_argument(
        "--precision",
        choices=PRECISIONS,
        default=None,
        help="the weights' precision: float32 (the default), or int8 or bfloat16 where the CPU has the units and the "
        "engine decodes them faster (today int8 with --engine ctranslate2, on a CPU with VNNI, for models of "
        "d_model 512 or more); else float32, with a one-line warning",
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
    """`--workers`: batches decoded side by side (`workers_of` gives the default)."""
    parser.add_argument(
        "--workers",
        type=positive_int,
        default=None,
        help="batches decoded side by side, each on its own thread (default 2 with the xla engine on a CPU of two "
        "cores or more, else 1)",
    )


def workers_of(args):
    """`--workers`, or the engine's default for `--model` (`opener.default_workers`)."""
    from keras_transformer.opener import default_workers

    return args.workers if args.workers is not None else default_workers(args.model, args.engine)


def language_code(text):
    """A language code as a multilingual model names it (`fra_Latn`, `fr`): one word; the model checks the rest."""
    if not text or text.split() != [text]:
        _refuse(f"a language code such as {TARGET_EXAMPLE}", text)
    return text


def prefix_text(text):
    """`--prefix`: text that is not empty or blank, and that a model may read (UTF-8, no NUL)."""
    text = non_empty(text)
    reason = sentence_error(text)
    if reason is not None:
        raise argparse.ArgumentTypeError(reason)
    return text


def add_language_arguments(parser, served=False):
    """`--source-lang` and `--target-lang`: a multilingual model's default languages (for `serve`, its requests')."""
    source = "the default source language of requests that name none" if served else "the source language"
    target = "the default language of requests that name none" if served else "the language to translate into"
    parser.add_argument(
        "--source-lang",
        type=language_code,
        default=None,
        metavar="CODE",
        help=f"{source}, for a multilingual model: one of its own codes, e.g. {SOURCE_EXAMPLE} "
        "(default: the model's own). A model of one language pair takes none",
    )
    parser.add_argument(
        "--target-lang",
        type=language_code,
        default=None,
        metavar="CODE",
        help=f"{target}, for a multilingual model: one of its own codes, e.g. {TARGET_EXAMPLE} "
        + (
            "(default: the model's own; without one, each request names its own"
            if served
            else "(needed unless the model has a default"
        )
        + "). A model of one language pair takes none",
    )


def add_prefix_argument(parser):
    """`--prefix`: the forced beginning of every output."""
    parser.add_argument(
        "--prefix",
        type=prefix_text,
        default=None,
        metavar="TEXT",
        help='the forced beginning of every translation, e.g. --prefix "Der Hund" (terminology, interactive '
        "translation): decoding continues after its tokens, in the --target-lang of a multilingual model",
    )


@contextlib.contextmanager
def languages_as_flags():
    """Reports a library `ValueError` about `source_lang` or `target_lang` with their flags' names.

    A library error names the Python argument (`` `target_lang` 'xx' is not a
    language of this model``); given by `--target-lang`, the line names the flag:

    >>> with languages_as_flags():
    ...     raise ValueError("`target_lang` 'xx' is not a language of this model. Received: target_lang='xx'")
    Traceback (most recent call last):
    ...
    ValueError: --target-lang 'xx' is not a language of this model. Received: --target-lang 'xx'
    """
    try:
        yield
    except ArgumentError:
        raise
    except ValueError as error:
        message = _PYTHON_NAMES.sub(lambda match: LANGUAGE_FLAGS[match[1] or match[2]] + " ", str(error))
        if message == str(error):
            raise
        raise ValueError(message.replace("  ", " ")) from None


_PYTHON_NAMES = re.compile(r"`(source_lang|target_lang)`|\b(source_lang|target_lang)=")


def open_model(args, **options):
    """The translator of `--model` by `--engine`, with `--source-lang` and `--target-lang` as its defaults.

    `options` go to `keras_transformer.open_translator`. Without a target
    language for a multilingual model, or with a `--prefix` that holds one
    of its special tokens (`controls.prefix_error`), a `ValueError` that
    says so, before any sentence is translated.
    """
    from keras_transformer.opener import open_translator

    with languages_as_flags():
        translator = open_translator(
            args.model,
            args.engine,
            source_lang=args.source_lang,
            target_lang=args.target_lang,
            precision=args.precision,
            **options,
        )
    for name, flag in LANGUAGE_FLAGS.items():  # an engine that takes no languages may not say so itself
        if getattr(args, name) is not None and not translator.languages.codes:
            raise ValueError(f"{flag} applies to multilingual models; {args.model} takes no language codes")
    translator.languages.require_target("choose one with --target-lang", args.model)
    prefix = getattr(args, "prefix", None)  # checked against the model's special tokens before any sentence
    reason = None if prefix is None else prefix_error(prefix, translator.special_tokens)
    if reason is not None:
        raise ValueError(f"--prefix {reason}")
    return translator
