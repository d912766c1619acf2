"""`ExportFormat`: what the export registry knows of a format."""

import dataclasses
from collections.abc import Callable


@dataclasses.dataclass(frozen=True)
class ExportFormat:
    """One format a run can be exported in.

    Attributes:
        name: its name (`keras-transformer export --format NAME`).
        description: one line for `--help`: what it writes and who reads it.
        options: the keyword options its `write` takes beside `overwrite`.
        write: `write(run, output, overwrite=False, **options) -> str`, the
            line that says what was written and how to use it.
        why_not: for an option it does not take, why (for the one-line refusal).
    """

    name: str
    description: str
    options: tuple
    write: Callable
    why_not: dict = dataclasses.field(default_factory=dict)
