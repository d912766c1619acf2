"""The export registry: every format a run can be written in, registered by name with one interface.

`export_run(run, output, format="savedmodel", **options)` writes the run
directory `run` at `output` in `format`, the one way `keras-transformer
export` and `keras_transformer.export.export_run` write one. Each format is
an `ExportFormat` in a module of its own, registered in `FORMATS`:

- `"savedmodel"`: strings in, strings out, with TF Serving signatures (`savedmodel`);
- `"ctranslate2"`: a CTranslate2 model directory (`ctranslate2`);
- `"litert"`: a `.tflite` for on-device translation (`litert`);
- `"transformers"`: a Hugging Face checkpoint folder (`transformers`), which
  transformers, CTranslate2's converter and the Hub read.

A new format is one module with one `ExportFormat`, added to `FORMATS`
(`register`). The format declares its options (`Option`: keyword, flag,
kind, `--help`), from which `keras-transformer export` builds its flags, and
its destination (`files.destinations.Destination`: how a folder it wrote is
told from any other), which `register` hands to `files.destinations`.
Every format writes atomically, replaces only an earlier export of its own
kind (with `overwrite`), refuses foreign files, and writes a manifest.

Example:

>>> export_run("saved_models/chatbot-ko", "saved_models/chatbot-ko-ct2", "ctranslate2", quantization="int8")  # doctest: +SKIP
'Exported saved_models/chatbot-ko to saved_models/chatbot-ko-ct2 (CTranslate2, int8). ...'
>>> export_run("saved_models/chatbot-ko", "out", "onnx")  # doctest: +SKIP
Traceback (most recent call last):
...
ValueError: `format` must be one of ('savedmodel', 'ctranslate2', 'litert', 'transformers'). Received: format='onnx'
"""  # noqa: E501  (a doctest's line)

from keras_transformer.errors import ArgumentError, literal
from keras_transformer.export_formats import ctranslate2, litert, options, savedmodel, transformers
from keras_transformer.export_formats.format import ExportFormat, Option
from keras_transformer.files import destinations

FORMATS = {}  # {name: ExportFormat}


def register(export_format):
    """Adds `export_format` (an `ExportFormat`) to `FORMATS`, and its destination to `files.destinations`."""
    if export_format.name in FORMATS:
        raise ValueError(f"the export format {export_format.name!r} is registered already")
    destinations.register(export_format.destination)
    FORMATS[export_format.name] = export_format
    return export_format


def all_options():
    """Every format's `Option`s, each once: the shared ones (`options.SHARED`) first, then the formats' own."""
    found = {option.name: option for option in options.SHARED}
    for export_format in FORMATS.values():
        for option in export_format.options:
            found.setdefault(option.name, option)
    return tuple(found.values())


for _module in (savedmodel, ctranslate2, litert, transformers):
    register(_module.FORMAT)


def export_run(run, output, format="savedmodel", *, overwrite=False, **options):  # noqa: A002  (the format's name)
    """Writes the run directory `run` as `format` at `output`; returns the line that says what was written.

    `options` are the format's own (`FORMATS[format].options`): `beam_size`,
    `alpha`, `max_length`, `jit_compile`, and a multilingual model's
    default `source_lang` and `target_lang` for a SavedModel; `quantization`
    for CTranslate2; `quantization`, `beam_size`, `alpha`, `max_length`,
    `source_lang` and `target_lang` for LiteRT; `beam_size`, `alpha`,
    `max_length` (generation_config.json's) and `scores` (an `evaluate
    --output` file, for the model card) for transformers. Options left None
    are the format's defaults; one the format does
    not take is a `ValueError` (`errors.ArgumentError`) naming it and the
    formats that take it.
    """
    if format not in FORMATS:
        raise ValueError(f"`format` must be one of {tuple(FORMATS)}. Received: format={format!r}")
    chosen = FORMATS[format]
    given = {name: value for name, value in options.items() if value is not None}
    for name in given:
        if name not in chosen.option_names:
            takes = " and ".join(other.name for other in FORMATS.values() if name in other.option_names)
            why = chosen.why_not.get(name, "it has no such setting")
            setting = f"{{{name}={literal(given[name])}}}"
            raise ArgumentError(f"{setting} does not apply to the {format} format ({why}): it applies to {takes}")
    return chosen.write(run, output, overwrite=overwrite, **given)


__all__ = ["FORMATS", "ExportFormat", "Option", "all_options", "export_run", "register"]
