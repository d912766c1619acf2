"""The one opener of model folders: a folder and an engine give a translator.

`open_translator(path, engine)` is how every command, the REST server and
`keras_transformer.export.load` open a model. It tells what the folder is
(`folder_kind`: a run directory, a SavedModel export or a LiteRT export)
and which engine decodes it:

| folder | `"xla"` | `"ctranslate2"` | `"litert"` |
|---|---|---|---|
| run directory | `serving.Translator` (the default) | `CTranslate2Translator` | – |
| SavedModel | `LoadedTranslator` (the default) | – | – |
| LiteRT export | – | – | `litert.Translator` (the default) |

`engine=None` is the folder's default. Any other pair is one line that says
what works. Every translator it gives is a `translators.TranslatorInterface`.

`open_model(path, engine)`, what `keras_transformer.export.load` is, opens
the same folders, and an encoder-only run (BERT) too: as a
`serving.encoder.Encoder` (`embed`, `classify`, `fill_mask`), which
neither translates nor generates.

Example:

>>> translator = open_translator("saved_models/multi30k-en-de", beam_size=1)  # doctest: +SKIP
>>> translator.greedy(["A dog runs."])  # doctest: +SKIP
>>> open_translator("saved_models/multi30k-en-de-export", "ctranslate2")  # doctest: +SKIP
Traceback (most recent call last):
...
ValueError: saved_models/multi30k-en-de-export is a SavedModel export: it opens with the xla engine; the ctranslate2 engine opens run directories
"""  # noqa: E501  (a doctest's output is one line)

import pathlib

from keras_transformer import runs
from keras_transformer.files import destinations
from keras_transformer.translators.precision import check_precision, decoding_precision

ENGINES = ("xla", "ctranslate2", "litert")
RUN, SAVED_MODEL, LITERT = "run directory", "SavedModel export", "LiteRT export"
# What opens each kind of folder, the first being its default.
OPENS = {RUN: ("xla", "ctranslate2"), SAVED_MODEL: ("xla",), LITERT: ("litert",)}
_PLURAL = {RUN: "run directories", SAVED_MODEL: "SavedModel exports", LITERT: "LiteRT exports"}


def folder_kind(path):
    """What `path` holds: `RUN`, `SAVED_MODEL` or `LITERT`; a one-line `ValueError` for anything else."""
    from keras_transformer.litert.translator import is_export

    path = pathlib.Path(path)
    destinations.recover(path)  # a replacement a crash interrupted, put right first
    if not path.exists():
        raise ValueError(f"{path} does not exist: pass a training run directory, a SavedModel or a LiteRT export")
    if runs.is_run_dir(path):
        return RUN
    if is_export(path):
        return LITERT
    if runs.is_saved_model(path):
        return SAVED_MODEL
    raise ValueError(
        f"{path} is not a model: expected a training run directory (config.json + model.keras), "
        "an exported SavedModel (saved_model.pb) or a LiteRT export (litert.json)"
    )


def engine_for(path, engine=None):
    """`(kind, engine)` of `path`: `engine`, or the folder's default; a pair that does not work is a `ValueError`."""
    kind = folder_kind(path)
    if engine is None:
        return kind, OPENS[kind][0]
    if engine not in ENGINES:
        raise ValueError(f"`engine` must be one of {ENGINES}. Received: engine={engine!r}")
    if engine not in OPENS[kind]:
        opened = " and ".join(_PLURAL[other] for other, engines in OPENS.items() if engine in engines)
        raise ValueError(
            f"{path} is a {kind}: it opens with the {' or '.join(OPENS[kind])} engine; the {engine} engine opens "
            f"{opened}"
        )
    return kind, engine


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
    kind, engine = engine_for(path, engine)
    path = pathlib.Path(path)
    options = {name: value for name, value in options.items() if value is not None}
    precision = _decided_precision(path, kind, engine, options.pop("precision", None))
    if kind == RUN and engine == "xla":
        from keras_transformer.serving.export import open_run
        from keras_transformer.serving.generator import is_generator_run, open_generator

        if is_generator_run(path):  # a decoder-only model (GPT): a `Generator`, which continues prompts
            options.pop("threads", None)
            _refuse(path, "a decoder-only model", options, ("compact",), "it decodes prompts by their widths")
            return open_generator(path, **options)

        options.pop("threads", None)
        return open_run(path, **options)
    if kind == RUN:
        from keras_transformer.serving.ctranslate2_engine import CTranslate2Translator

        _refuse(path, "the ctranslate2 engine", options, ("compact", "jit_compile"), "CTranslate2 batches as it likes")
        return CTranslate2Translator(path, inter_threads=options.pop("threads", 1), precision=precision, **options)
    if kind == SAVED_MODEL:
        from keras_transformer.serving.export import open_saved_model

        options.pop("threads", None)
        options.pop("jit_compile", None)
        _refuse(path, "a SavedModel", options, ("alpha", "max_length", "compact"), "fixed at export")
        return open_saved_model(path, **options)
    from keras_transformer.litert import Translator

    options.pop("jit_compile", None)
    options.pop("threads", None)
    _refuse(path, "a LiteRT export", options, ("max_length", "compact"), "fixed at export")
    return Translator(path, **options)


def precision_for(path, engine=None, precision=None):
    """The precision the folder `path` decodes in with `engine` when `precision` is asked for: the one decision.

    `translators.precision.decoding_precision` decides, given what the
    engine has (CTranslate2's kernels and the model's width,
    `ctranslate2_engine.precision_facts`); a precision other than the one
    asked for is one warning line that says why. `open_translator` decides
    so, and so does `serve` for the SavedModels it serves.
    """
    kind, engine = engine_for(path, engine)
    return _decided_precision(pathlib.Path(path), kind, engine, precision)


def _decided_precision(path, kind, engine, precision):
    """`precision_for` of a folder whose kind and engine are known (`engine_for`)."""
    facts = {}
    if engine == "ctranslate2" and check_precision(precision) != "float32":  # low precision: its kernels decide
        from keras_transformer.serving.ctranslate2_engine import precision_facts

        facts = precision_facts(path)
    return decoding_precision(precision, engine, saved_model=kind == SAVED_MODEL, **facts)


def open_model(path, engine=None, **options):
    """What `path` opens as: an encoder-only run's `Encoder`, else the translator of `open_translator`.

    An `Encoder` takes one option, `batch_size`; the decoding options of a
    translator (`beam_size`, `alpha`, ...) are refused in one line, as an
    engine other than xla is.
    """
    if folder_kind(path) == RUN and runs.RunConfig.read(path).model.architecture == "encoder_only":
        from keras_transformer.serving.encoder import open_encoder

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


def _refuse(path, what, options, names, why):
    given = [f"{{{name}={options[name]!r}}}" for name in names if options.get(name) not in (None, False)]
    if given:
        from keras_transformer.errors import ArgumentError, literal

        raise ArgumentError(
            f"{literal(path)} is {what}: {' and '.join(given)} does not apply ({why}); open the run directory "
            "with the xla engine to choose it"
        )
    for name in names:
        options.pop(name, None)
