"""The `keras-transformer` command: one sub-command per job.

Each sub-command lives in `keras_transformer/commands/<name>.py` and exposes
`add_parser(subparsers)` and `run(args)`; this file only dispatches.

Errors. A command that fails prints one line, `keras-transformer CMD: error:
...`, and exits with status 2; never a traceback:

- Nonsense arguments (`--epochs 0`, `--alpha nan`, `--output ""`) are
  refused by argparse while parsing, naming the flag, before anything is
  loaded or written (the types of `keras_transformer.commands.arguments`);
  argparse's usage block is left out of the message (`--help` shows it).
  An unknown option is named by the command it was given to, with that
  command's nearest flag (`--beam-size`: did you mean `--beam`?).
- `ValueError` and `OSError` are how the library says that an input is
  wrong (a file missing, corrupt or of the wrong shape): their message,
  which names the file or the argument, is the line.
- Any other `Exception` (a `KeyError` or `TypeError` from a config.json of
  an unforeseen shape, a TensorFlow error) is input that the library did not
  check or a bug: the line names the exception's type, its message, and how
  to see the traceback. These are caught too because a user cannot act on a
  traceback either; they are reported by type so that they can be told
  apart from the checked errors.

Warnings of this package (`errors.KerasTransformerWarning`) are one line
too, `keras-transformer CMD: warning: ...`, and the command goes on.

Every command keeps the XLA programs it compiles in the user's cache
folder and loads those an earlier run compiled, each checked first, at
most `$KERAS_TRANSFORMER_XLA_CACHE_MB` megabytes (`compile_cache`;
`KERAS_TRANSFORMER_XLA_CACHE=off` turns that off; `--help` says so).

`--traceback` (before or after the command's name) or
`KERAS_TRANSFORMER_DEBUG=1` lets every error through with its traceback
instead.

Example::

    $ keras-transformer train --epochs 0
    keras-transformer train: error: argument --epochs: must be a positive integer, got '0'
"""

import argparse
import difflib
import importlib
import os
import sys
import warnings

from keras_transformer import compile_cache
from keras_transformer.errors import ArgumentError, KerasTransformerWarning, first_line
from keras_transformer.files.user_cache import cache_root

COMMANDS = (
    "train",
    "import",
    "translate",
    "generate",
    "embed",
    "classify",
    "fill-mask",
    "score",
    "chat",
    "evaluate",
    "export",
    "serve",
    "plot",
)
MODULES = {"import": "import_checkpoint", "fill-mask": "fill_mask"}  # commands whose module is not named as they are
FLAGS = {"beam_size": "--beam"}  # Python arguments whose flag is not `--` + the name in kebab case
NEGATED = {"jit_compile": "--no-xla"}  # Python arguments that a flag turns off
DEBUG_ENV = "KERAS_TRANSFORMER_DEBUG"
EXPECTED_ERRORS = (ValueError, OSError)  # the library's "this input is wrong"
XLA_CACHE_HELP = (
    f"Every command keeps the XLA programs it compiles in {cache_root() / 'xla'}/ and loads them in "
    f"later runs, each checked first (a damaged one is compiled again), at most ${compile_cache.SIZE_ENV} megabytes "
    f"(default {compile_cache.DEFAULT_MB}; the least recently used go first); {compile_cache.CACHE_ENV}=off turns "
    "the cache off, another value names its folder."
)


def _load(name):
    return importlib.import_module(f"keras_transformer.commands.{MODULES.get(name, name)}")


class OneLineErrorParser(argparse.ArgumentParser):
    """An `ArgumentParser` that reports a bad command line in one line (`--help` shows the usage).

    An option that no parser knows is reported by the (sub-)command it was
    given to, with that command's nearest flag:

    >>> parser = OneLineErrorParser(prog="tool")
    >>> _ = parser.add_argument("--beam")
    >>> parser.unknown_options_message(["--beam-size", "4"])
    'unrecognized arguments: --beam-size 4 (did you mean --beam?)'
    """

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")

    def parse_known_args(self, args=None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        if not hasattr(namespace, "command_parser"):  # the innermost sub-command's parser returns first
            namespace.command_parser = self
        return namespace, extras

    def unknown_options_message(self, unknown):
        flags = [flag for flag in self._option_string_actions if flag.startswith("--")]
        words = [word.split("=", 1)[0] for word in unknown if word.startswith("--")]
        nearest = [flag for flag in (_nearest_flag(word, flags) for word in words) if flag]
        hint = f" (did you mean {' or '.join(dict.fromkeys(nearest))}?)" if nearest else ""
        return f"unrecognized arguments: {' '.join(unknown)}{hint}"


def _nearest_flag(word, flags):
    """The flag `word` starts with (`--beam` for `--beam-size`), else the closest spelling, else None."""
    prefixes = [flag for flag in flags if word.startswith(flag)]
    if prefixes:
        return max(prefixes, key=len)
    return next(iter(difflib.get_close_matches(word, flags, n=1)), None)


def build_parser():
    parser = OneLineErrorParser(
        prog="keras-transformer",
        description="Train, run, score, export and plot Transformer models.",
        epilog=XLA_CACHE_HELP,
    )
    _add_general_options(parser, default=False)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for name in COMMANDS:
        try:
            module = _load(name)
        except ModuleNotFoundError as error:
            if error.name != f"keras_transformer.commands.{MODULES.get(name, name)}":
                raise
            continue
        module.add_parser(subparsers)
    for command_parser in subparsers.choices.values():  # `translate --traceback` as `--traceback translate`
        _add_general_options(command_parser, default=argparse.SUPPRESS)
        command_parser.epilog = command_parser.epilog or XLA_CACHE_HELP  # `translate --help` names the cache too
    return parser


def _add_general_options(parser, default):
    """`--verbose` and `--traceback`, taken before the command and after it (`default` SUPPRESS: keep the first)."""
    parser.add_argument(
        "--verbose",
        action="store_true",
        default=default,
        help="show TensorFlow's start-up log lines (the console script hides them)",
    )
    parser.add_argument(
        "--traceback",
        action="store_true",
        default=default,
        help=f"show an error's Python traceback instead of one line (or set {DEBUG_ENV}=1)",
    )


def flag(argument, value):
    """How the command line says `argument=value`: `--overwrite` for True, else `--beam 1`.

    Example:

    >>> flag("overwrite", "True"), flag("beam_size", "1"), flag("data_dir", "x"), flag("jit_compile", "False")
    ('--overwrite', '--beam 1', '--data-dir x', '--no-xla')
    """
    if argument in NEGATED and value == "False":
        return NEGATED[argument]
    name = FLAGS.get(argument, "--" + argument.replace("_", "-"))
    return name if value == "True" else f"{name} {value}"


def error_line(error):
    """The one line that reports `error` (see the module docstring).

    Example:

    >>> error_line(ValueError("data.csv, line 3: empty line."))
    'data.csv, line 3: empty line.'
    >>> error_line(KeyError("model"))[:46]
    "KeyError: 'model' (unexpected: not a checked e"
    """
    if isinstance(error, ArgumentError):  # name the flags, not the Python arguments
        return error.describe(flag)
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if isinstance(error, EXPECTED_ERRORS):
        return " ".join(lines) or type(error).__name__
    what = f"{type(error).__name__}: {first_line(error, limit=300)}" if lines else type(error).__name__
    return (
        f"{what} (unexpected: not a checked error of this command; "
        f"--traceback or {DEBUG_ENV}=1 shows where it came from)"
    )


def _one_line_warnings(command, show_default):
    """A `warnings.showwarning` that prints this package's warnings as `keras-transformer CMD: warning: ...`."""

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, KerasTransformerWarning):
            print(f"keras-transformer {command}: warning: {message}", file=sys.stderr)
        else:
            show_default(message, category, filename, lineno, file, line)

    return show


def main(argv=None):
    args, unknown = build_parser().parse_known_args(argv)
    if unknown:
        args.command_parser.error(args.command_parser.unknown_options_message(unknown))
    debug = args.traceback or os.environ.get(DEBUG_ENV, "") not in ("", "0")
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _one_line_warnings(args.command, warnings.showwarning)
            compile_cache.enable()  # before the first XLA compilation: a second run loads the programs
            return args.run(args) or 0
    except KeyboardInterrupt:
        print("\nInterrupted.", file=sys.stderr)
        return 130
    except Exception as error:  # noqa: BLE001  (one line for every failure: see the module docstring)
        if debug:
            raise
        print(f"keras-transformer {args.command}: error: {error_line(error)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
