"""`ExportFormat`: what the export registry knows of a format; `Option`: one setting a format takes."""

import dataclasses
from collections.abc import Callable


@dataclasses.dataclass(frozen=True)
class Option:
    """One keyword option of export formats, and the flag of `keras-transformer export` that gives it.

    The flag reads its value by the first of these that is set: `setting`
    (the kind of a configuration field checks it), `choices`, `switch` (a
    flag without a value that passes `switch`); else any non-empty text.
    Left out, an option is None: the format's own default, which `help` says.

    Attributes:
        name: the keyword of `write` and `export_run` (`beam_size`).
        help: the flag's `--help` line.
        flag: the flag (`--beam`), or None where the command has none.
        setting: `(config part, field name)` whose kind the value must have
            (`(DecodingConfig, "beam_size")`), or None.
        choices: the values it takes, or None.
        switch: the value a flag without a value passes (`--no-xla`:
            `jit_compile=False`), or None.
        metavar: the value's name in `--help`, where not the flag's.
    """

    name: str
    help: str
    flag: str | None = None
    setting: tuple | None = None
    choices: tuple | None = None
    switch: object = None
    metavar: str | None = None


@dataclasses.dataclass(frozen=True)
class ExportFormat:
    """One format a run can be exported in.

    Attributes:
        name: its name (`keras-transformer export --format NAME`).
        description: one line for `--help`: what it writes and who reads it.
        options: the `Option`s its `write` takes beside `overwrite`.
        write: `write(run, output, overwrite=False, **options) -> str`, the
            line that says what was written and how to use it.
        destination: what its folders are (`files.destinations.Destination`):
            how one that it wrote, and may replace, is told from any other.
        why_not: for an option it does not take, why (for the one-line refusal).
    """

    name: str
    description: str
    options: tuple
    write: Callable
    destination: object
    why_not: dict = dataclasses.field(default_factory=dict)

    @property
    def option_names(self):
        """The names of its options, in order."""
        return tuple(option.name for option in self.options)
