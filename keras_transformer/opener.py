"""The one opener of model folders: a folder and an engine give a translator.

`open_translator(path, engine)` is how every command, the REST server and
`keras_transformer.export.load` open a model. It tells what the folder is
(`files.folders.folder_kind`: a run directory, a SavedModel export or a
LiteRT export) and which engine decodes it, reading the registry of
engines (`engines.ENGINES`: what each opens, its options and refusals, its
precision facts). Today's registry:

| folder | `"xla"` | `"ctranslate2"` | `"litert"` |
|---|---|---|---|
| run directory | `Translator`, or a GPT run's `Generator` (the default) | `CTranslate2Translator` | – |
| SavedModel | `LoadedTranslator` (the default) | – | – |
| LiteRT export | – | – | the host `Translator` (the default) |

`engine=None` is the folder's default. Any other pair is one line that says
what works. Every translator it gives is a `translators.TranslatorInterface`.
No other module outside `engines/` imports an engine: `open_generator`
(`generate`), `open_encoder` (`embed`, `classify`, `fill-mask`),
`open_served` (`serve`) and `write_saved_model` (the SavedModel export) are
here too.

`open_model(path, engine)`, what `keras_transformer.export.load` is, opens
the same folders, and an encoder-only run (BERT) too: as a
`engines.xla.encoder.Encoder` (`embed`, `classify`, `fill_mask`), which
neither translates nor generates.

Example:

>>> translator = open_translator("saved_models/multi30k-en-de", beam_size=1)  # doctest: +SKIP
>>> translator.greedy(["A dog runs."])  # doctest: +SKIP
>>> open_translator("saved_models/multi30k-en-de-export", "ctranslate2")  # doctest: +SKIP
Traceback (most recent call last):
...
ValueError: saved_models/multi30k-en-de-export is a SavedModel export: it opens with the xla engine; the ctranslate2 engine opens run directories
"""  # noqa: E501  (a doctest's output is one line)

import os
import pathlib
from typing import NamedTuple

from keras_transformer import engines, runs
from keras_transformer.engines.engine import refuse_options
from keras_transformer.files import folders
from keras_transformer.files.folders import LITERT, RUN, SAVED_MODEL, folder_kind
from keras_transformer.translators.precision import check_precision, decoding_precision

__all__ = [
    "ENGINES",
    "LITERT",
    "OPENS",
    "RUN",
    "SAVED_MODEL",
    "Served",
    "engine_for",
    "default_workers",
    "engine_names",
    "folder_kind",
    "open_encoder",
    "open_generator",
    "open_model",
    "open_served",
    "open_translator",
    "opens",
    "precision_for",
    "write_saved_model",
]


def engine_names():
    """The names `engine=` takes, in the registry's order (`ENGINES` when no engine was registered since)."""
    return tuple(dict.fromkeys(engine.name for engine in engines.ENGINES.values()))


def opens():
    """`{folder kind: the names of the engines that open it}`, its default first."""
    kinds = {}
    for engine in engines.ENGINES.values():
        for kind in engine.opens:
            kinds.setdefault(kind, []).append(engine.name)
    return {kind: tuple(names) for kind, names in kinds.items()}


ENGINES = engine_names()  # ("xla", "ctranslate2", "litert")
OPENS = opens()  # what opens each kind of folder, the first being its default


def engine_for(path, engine=None):
    """`(kind, engine)` of `path`: `engine`, or the folder's default; a pair that does not work is a `ValueError`."""
    kind = folder_kind(path)
    opened_by = opens()
    if engine is None:
        return kind, opened_by[kind][0]
    if engine not in engine_names():
        raise ValueError(f"`engine` must be one of {engine_names()}. Received: engine={engine!r}")
    if engine not in opened_by.get(kind, ()):
        opened = " and ".join(folders.PLURAL.get(other, other) for other, names in opened_by.items() if engine in names)
        raise ValueError(
            f"{path} is a {kind}: it opens with the {' or '.join(opened_by[kind])} engine; the {engine} engine opens "
            f"{opened}"
        )
    return kind, engine


def default_workers(path, engine=None):
    """Batches the commands decode side by side for `path` by default: its engine's `workers`, one per core at most.

    Example:

    >>> default_workers("runs/multi30k-en-de")  # doctest: +SKIP
    2
    """
    kind, name = engine_for(path, engine)
    return max(1, min(_engine(kind, name).workers, os.cpu_count() or 1))


def _engine(kind, name):
    """The registered `Engine` called `name` that opens a `kind` of folder."""
    return next(engine for engine in engines.ENGINES.values() if engine.name == name and kind in engine.opens)


def open_translator(path, engine=None, **options):
    """The translator of the folder `path` decoded by `engine` (None: the folder's default; see the table above).

    `options` are the engine's: `beam_size`, `alpha` (each checked, default
    the folder's own), `source_lang` and `target_lang` (a multilingual
    model's default languages, every engine), `max_length`, `compact` and
    `jit_compile` (xla, run directories), `threads` (the batches CTranslate2
    decodes side by side), `precision` (`"float32"`, `"bfloat16"` or
    `"int8"`: the weights in low precision where this CPU and the engine
    make them faster, else float32 with a one-line warning;
    `precision_for`).
    An option the folder fixed at export is a `ValueError` naming it.

    Load only models you trust: a SavedModel is a program, and loading and
    calling it runs whatever graph it holds.
    """
    kind, name = engine_for(path, engine)
    path, chosen = pathlib.Path(path), _engine(kind, name)
    options = {option: value for option, value in options.items() if value is not None}
    precision = _decided_precision(path, chosen, options.pop("precision", None))
    for option in chosen.drops:
        options.pop(option, None)
    refuse_options(path, chosen.what, options, chosen.refuses, chosen.because)
    unknown = sorted(set(options) - set(chosen.takes))
    if unknown:
        raise ValueError(
            f"`{unknown[0]}` is not an option of the {name} engine for {path} ({kind}). It takes: "
            f"{', '.join(chosen.takes)}"
        )
    if chosen.takes_precision:
        options["precision"] = precision
    return chosen.open(path, **options)


def precision_for(path, engine=None, precision=None):
    """The precision the folder `path` decodes in with `engine` when `precision` is asked for: the one decision.

    `translators.precision.decoding_precision` decides, given what the
    engine declares (`Engine.precision_facts`: CTranslate2's kernels and the
    model's width); a precision other than the one asked for is one warning
    line that says why. `open_translator` decides so, and so does `serve`
    for the SavedModels it serves.
    """
    kind, name = engine_for(path, engine)
    return _decided_precision(pathlib.Path(path), _engine(kind, name), precision)


def _decided_precision(path, engine, precision):
    """`precision_for` of a folder whose `Engine` is known."""
    facts = {}
    if engine.precision_facts is not None and check_precision(precision) != "float32":  # low: the facts decide
        facts = engine.precision_facts(path)
    return decoding_precision(precision, engine.name, **facts)


def open_model(path, engine=None, **options):
    """What `path` opens as: an encoder-only run's `Encoder`, else the translator of `open_translator`.

    An `Encoder` takes one option, `batch_size`; the decoding options of a
    translator (`beam_size`, `alpha`, ...) are refused in one line, as an
    engine other than xla is.
    """
    if folder_kind(path) == RUN and _encoder_only(path):
        if engine not in (None, "xla"):
            engine_for(path, engine)  # an engine that does not exist, or opens no run
            raise ValueError(f"{path} is an encoder-only run: it opens with the xla engine")
        options = {name: value for name, value in options.items() if value not in (None, False)}
        batch_size = options.pop("batch_size", None)
        if options:
            raise ValueError(
                f"{path} is an encoder-only run (BERT): `{sorted(options)[0]}` applies to translators and "
                "generators; an Encoder takes `batch_size` alone"
            )
        return open_encoder(path, batch_size=batch_size)
    return open_translator(path, engine, **options)


def _encoder_only(path):
    """Whether the run directory at `path` holds an encoder-only model (BERT): no translator, no generator."""
    model = runs.RunConfig.read(path).model
    return model is not None and model.architecture == "encoder_only"


def open_encoder(path, batch_size=None):
    """The `Encoder` of the encoder-only run at `path` (`embed`, `classify`, `fill-mask`), by its engine."""
    encoding = next(engine for engine in engines.ENGINES.values() if engine.encode is not None)
    return encoding.encode(path, batch_size=batch_size)


def open_generator(path, **options):
    """The `Generator` of the decoder-only run at `path` (`keras-transformer generate`), by the engine that generates.

    `options`: `beam_size`, `alpha`, `max_length`, `jit_compile`. A run of
    another architecture is a one-line `ValueError` that says so.
    """
    generating = next(engine for engine in engines.ENGINES.values() if engine.generate is not None)
    return generating.generate(path, **options)


class Served(NamedTuple):
    """What `serve` serves for a folder and an engine (`open_served`).

    `saved_model`: the SavedModel whose signatures are served (the folder,
    or its run exported), or None; `translator`: the translator served, or
    the one that decodes the streams and in-flight rows of the served
    SavedModel's run (None for a SavedModel, or an encoder-only run);
    `in_rows`: whether that translator may decode in in-flight rows (the xla
    engine on a run directory).
    """

    kind: str
    engine: str
    saved_model: pathlib.Path
    translator: object
    in_rows: bool


def open_served(path, engine=None, *, workdir, on_export=None, threads=None, precision=None, **languages):
    """What `serve` serves of the folder `path` with `engine` (None: its default): a `Served`.

    An engine that serves signatures (the xla engine, but for an imported
    GPT-2's run, whose tokenizer runs in Python) serves a SavedModel: the
    folder itself, or its run exported under `workdir` first (`on_export(path)`
    called before), in float32 (a warning if `precision` asks another). Any
    other engine serves its translator (`threads`, `precision`). `languages`
    are the default `source_lang` and `target_lang` of both.
    """
    kind, name = engine_for(path, engine)
    path, chosen = pathlib.Path(path), _engine(kind, name)
    languages = {option: code for option, code in languages.items() if code is not None}
    if chosen.serves_signatures is None or not chosen.serves_signatures(path):
        translator = open_translator(path, name, threads=threads, precision=precision, **languages)
        return Served(kind, name, None, translator, in_rows=False)
    _decided_precision(path, chosen, precision)  # float32: a warning if another is asked for
    if kind != RUN:
        return Served(kind, name, path, None, in_rows=False)
    if on_export is not None:
        on_export(path)
    saved_model = pathlib.Path(workdir) / "export"
    write_saved_model(path, saved_model, **languages)
    if _encoder_only(path):  # BERT: its signatures answer whole, once
        return Served(kind, name, saved_model, None, in_rows=False)
    return Served(kind, name, saved_model, open_translator(path, name, **languages), in_rows=True)


def write_saved_model(run, output, **options):
    """The run directory `run` written as a SavedModel at `output` (`engines.xla.export.export_run`).

    Returns what was saved: the `Translator`, the `Generator`'s module or the
    `Encoder`'s module.
    """
    from keras_transformer.engines.xla.export import export_run

    return export_run(run, output, **options)
