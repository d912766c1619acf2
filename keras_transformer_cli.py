"""The `keras-transformer` console script: TensorFlow's start-up log hidden, then `keras_transformer.commands.cli`.

Importing `keras_transformer` imports TensorFlow, which writes its C++ start-up
lines (oneDNN, CUDA, CPU features) to stderr before any of its settings can
hide them (`TF_CPP_MIN_LOG_LEVEL` no longer covers those). This module lives
outside the package so that it can run first: unless the user passed
`--verbose` (before or after the command) or set `TF_CPP_MIN_LOG_LEVEL=0`, it imports
the package with stderr pointed at `/dev/null`, and sets
`TF_CPP_MIN_LOG_LEVEL=3` where the user set no level (a level of theirs is
kept: 1 or 2 asks for fewer lines, which those start-up lines ignore).
Python errors raised by the import still reach the user.

Example::

    keras-transformer translate --help            # no TensorFlow log lines
    keras-transformer --verbose translate --help  # TensorFlow's lines too
"""

import contextlib
import os
import sys


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if os.environ.get("TF_CPP_MIN_LOG_LEVEL") != "0" and "--verbose" not in _options(argv):
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # also its errors at device start (cuInit on a CPU)
        with _stderr_to_devnull():
            import keras_transformer.commands.cli  # noqa: F401  (imports TensorFlow)
    from keras_transformer.commands.cli import main as run

    return run(argv)


def _options(argv):
    """The arguments before a `--` (after it, a sentence may read `--verbose`)."""
    return argv[: argv.index("--")] if "--" in argv else argv


@contextlib.contextmanager
def _stderr_to_devnull():
    """Points file descriptor 2 at /dev/null (C++ writes there directly), then restores it."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


if __name__ == "__main__":
    sys.exit(main())
