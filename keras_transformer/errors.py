"""Errors that name their remedy as an argument, and one-line summaries of other errors.

The library speaks Python: an error whose remedy is an argument of the call
names it as `overwrite=True`. The command line names the same remedy as its
flag (`--overwrite`) through `ArgumentError.describe`.

Example:

>>> error = ArgumentError("runs/a holds a run. Pass {overwrite=True}, or use {beam_size=1}.")
>>> str(error)
'runs/a holds a run. Pass overwrite=True, or use beam_size=1.'
>>> error.describe(lambda name, value: f"--{name} {value}")
'runs/a holds a run. Pass --overwrite True, or use --beam_size 1.'
>>> first_line(RuntimeError("\\n  truncated file\\n  at offset 12"))
'truncated file'
"""

import re

# `{name=value}` in a template: an argument of the call and the value that would help; `{{` and `}}`
# are literal braces.
PLACEHOLDER = re.compile(r"\{\{|\}\}|\{(\w+)=([^{}]*)\}")


class KerasTransformerWarning(UserWarning):
    """A warning of this package; the command line prints it as one line, `keras-transformer CMD: warning: ...`."""


class ArgumentError(ValueError):
    """A `ValueError` whose message names arguments through `{name=value}` placeholders.

    Args:
        template: the message, with `{name=value}` where it names an argument
            (`{{` and `}}` for literal braces, as in `str.format`).
    """

    def __init__(self, template):
        self.template = template
        super().__init__(self.describe(lambda name, value: f"{name}={value}"))

    def describe(self, name_of):
        """The message with each `{name=value}` replaced by `name_of(name, value)`."""

        def replace(match):
            if match.group(1) is None:
                return match.group(0)[0]  # `{{` or `}}`
            return name_of(match.group(1), match.group(2))

        return PLACEHOLDER.sub(replace, self.template)


def literal(text):
    """`text` with its braces doubled, to stand in an `ArgumentError` template as it is."""
    return str(text).replace("{", "{{").replace("}", "}}")


def first_line(error, limit=200):
    """The first non-blank line of `error`'s message (at most `limit` characters), or its type's name."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0][:limit] if lines else type(error).__name__
