"""`Engine`: what one engine declares, as data the opener reads.

An engine module declares one `Engine`: the name `engine=` (and
`--engine`) calls it by, the folder kinds it opens (`files.folders`), the
options it takes, those it drops and those it refuses (and why), how the
precision of what it decodes is decided (`precision_facts`), and `open`,
which gives the translator of a folder. `engines.ENGINES` lists them; `opener.py` reads that
list and is the only module that opens a folder with one.

Example:

>>> echo = Engine(name="echo", opens=("run directory",), open=lambda path, **options: None, what="the echo engine",
...               takes=("beam_size",), refuses=("compact",), because="it has no batches")
>>> echo.name, echo.opens
('echo', ('run directory',))
"""

import dataclasses
from collections.abc import Callable

from keras_transformer.errors import ArgumentError, first_line, literal


@dataclasses.dataclass(frozen=True)
class Engine:
    """One engine, as the opener reads it (see the module docstring).

    Attributes:
        name: what `engine=` and `--engine` call it; two entries may share one
            (the xla engine opens run directories and SavedModels).
        opens: the folder kinds it opens (`files.folders.RUN`, ...). The first
            entry of `engines.ENGINES` to open a kind is that kind's default.
        open: `open(path, **options)` -> a `translators.TranslatorInterface`,
            given the options left once those dropped and refused are out,
            and `precision` (decided by the opener) where `takes_precision`.
        what: how a refusal names the folder, e.g. "a SavedModel".
        takes: the options `open` takes (any other is a one-line `ValueError`).
        drops: options other engines take that this one has no use for (dropped).
        refuses: options it refuses when given, each as
            "`{name=value}` does not apply (`because`)".
        because: why it refuses them.
        takes_precision: whether `open` takes the decided `precision`.
        precision_facts: `precision_facts(path)` -> the keyword arguments of
            `translators.precision.decoding_precision` for a folder (CTranslate2's
            kernels and the model's width), asked only for a low precision.
        generate: `generate(path, **options)` -> a `Generator` of a decoder-only
            run, for an engine that continues prompts; None for the others.
        encode: `encode(path, batch_size=None)` -> the `Encoder` of an
            encoder-only run (BERT), for an engine that embeds, classifies
            and fills masks; None for the others.
        serves_signatures: `serves_signatures(path)` -> whether `serve` serves
            the folder as a SavedModel's signatures (a run exported first);
            None: it serves the engine's translator.
        workers: batches the commands decode side by side by default, one
            thread each (`--workers`), at most one per CPU core.
    """

    name: str
    opens: tuple
    open: Callable
    what: str
    takes: tuple = ()
    drops: tuple = ()
    refuses: tuple = ()
    because: str = ""
    takes_precision: bool = False
    precision_facts: Callable = None
    generate: Callable = None
    encode: Callable = None
    serves_signatures: Callable = None
    workers: int = 1


def refuse_options(path, what, options, names, because):
    """Raises an `ArgumentError` for the first of `names` given in `options`; else drops `names` from `options`."""
    given = [f"{{{name}={options[name]!r}}}" for name in names if options.get(name) not in (None, False)]
    if given:
        raise ArgumentError(
            f"{literal(path)} is {what}: {' and '.join(given)} does not apply ({because}); open the run directory "
            "with the xla engine to choose it"
        )
    for name in names:
        options.pop(name, None)


def guarded(path, what, load_fn, passthrough=()):
    """Runs `load_fn`, turning any failure into a one-line `ValueError` naming `path`."""
    try:
        return load_fn()
    except passthrough:
        raise
    except Exception as error:  # noqa: BLE001  (TF, Keras, zip, JSON... all mean "corrupt")
        raise ValueError(f"{path}: could not load the {what} (corrupt or incompatible?): {first_line(error)}") from None
