"""The `keras-transformer` command: one sub-command per job.

Each sub-command lives in `keras_transformer/commands/<name>.py` and exposes
`add_parser(subparsers)` and `run(args)`; this file only dispatches.
"""

import argparse
import importlib
import os
import sys

COMMANDS = ("train", "translate", "chat", "evaluate", "export", "plot")


def _load(name):
    return importlib.import_module(f"keras_transformer.commands.{name}")


def build_parser():
    parser = argparse.ArgumentParser(
        prog="keras-transformer",
        description="Train, run, score, export and plot Transformer models.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for name in COMMANDS:
        try:
            module = _load(name)
        except ModuleNotFoundError as error:
            if error.name != f"keras_transformer.commands.{name}":
                raise
            continue
        module.add_parser(subparsers)
    return parser


def main(argv=None):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    args = build_parser().parse_args(argv)
    try:
        return args.run(args) or 0
    except KeyboardInterrupt:
        print("\nInterrupted.", file=sys.stderr)
        return 130
    except (ValueError, FileNotFoundError, OSError) as error:
        print(f"keras-transformer {args.command}: error: {_in_flags(error)}", file=sys.stderr)
        return 2


def _in_flags(error):
    """The error's message, naming the command line's flags where it names Python arguments."""
    if hasattr(error, "describe"):  # destinations.DestinationInUseError
        return error.describe(lambda argument: "--" + argument.replace("_", "-"))
    return error


if __name__ == "__main__":
    sys.exit(main())
