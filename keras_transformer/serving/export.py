"""Loading and exporting translators: `load` (a run directory, a SavedModel or a LiteRT export), `export_run`.

`load` gives a `Translator` (`keras_transformer.serving.translator`) for a training
run, a `LoadedTranslator` for an exported SavedModel, or a
`keras_transformer.litert.Translator` for a LiteRT export folder; all answer
the same methods and check their inputs before any TensorFlow call. `export_run`
writes a run as a SavedModel with serving signatures (`SIGNATURES`).

Example::

    from keras_transformer.serving.export import export_run, load

    export_run("saved_models/multi30k-en-de", "saved_models/multi30k-en-de-export")
    translator = load("saved_models/multi30k-en-de-export")
    translator(["A man is riding a bike."])
"""

import pathlib

import tensorflow as tf

from keras_transformer import decoding, litert, runs
from keras_transformer.config import DecodingConfig
from keras_transformer.errors import ArgumentError, first_line, literal
from keras_transformer.files import destinations, manifest
from keras_transformer.serving.translator import SIGNATURES, Translator, check_export_destination
from keras_transformer.translators import TranslatorInterface, decoding_defaults

__all__ = ["SIGNATURES", "LoadedTranslator", "Translator", "export_run", "load"]


def export_run(model, output, *, overwrite=False, **options):
    """Exports the training run `model` (a run directory) as a SavedModel at `output`.

    Every check runs before the model loads: `model` must be a run directory,
    and `output` must be new, an empty folder, or an export of this package
    (replaced only when `overwrite` is true) that neither holds nor lies inside
    `model`. `options` go to `load` (`beam_size`, `alpha`, `max_length`,
    `jit_compile`).

    Returns:
        The `Translator` that was saved.

    Example:

    >>> export_run("saved_models/chatbot-ko", "saved_models/chatbot-ko-export", beam_size=4)
    """
    if not runs.is_run_dir(model):
        kind = "a SavedModel already" if runs.is_saved_model(model) else "not a training run"
        raise ValueError(
            f"{model} is {kind}: `model` must be a run directory (config.json + model.keras + tokenizers/)"
        )
    destinations.check_separate(model, output, what="the export")
    check_export_destination(output, overwrite)
    runs.warn_if_unfinished(model)
    translator = load(model, **options)
    translator.save(output, overwrite=overwrite)
    return translator


class LoadedTranslator(TranslatorInterface):
    """A `Translator` SavedModel loaded by `tf.saved_model.load`, which checks its inputs first.

    `load` returns one for a SavedModel. It answers what every translator
    answers (`TranslatorInterface`), checking the inputs in Python and
    warning about cut-off translations, then calls the loaded module's
    function; any other attribute is the loaded module's (`module`). A
    SavedModel exported before a function existed answers without it:
    `scores` and `finished` None, or a `ValueError` that says to export
    again (`nbest`, `score`).

    Args:
        module: what `tf.saved_model.load` returned for a `Translator` export.

    Example:

    >>> translator = LoadedTranslator(tf.saved_model.load("saved_models/demo"))
    >>> translator(["A dog runs."])
    >>> translator(tf.constant([["A dog runs."]]))  # ValueError: `sentences` must be a 1-D ...
    """

    def __init__(self, module):
        self.module = module

    @property
    def beam_size(self):
        return self.module.beam_size

    @property
    def max_source_length(self):
        return self.module.max_source_length

    def __getattr__(self, name):  # only for attributes not found above: the module's
        if name == "module":
            raise AttributeError(name)
        return getattr(self.module, name)

    def _decode(self, search, sentences, *sampling):
        name = {"best": "call", "greedy": "greedy", "sample": "sample"}[search]
        function = getattr(self.module, f"{name}_with_status", None)
        if function is None:  # exported before the status existed
            plain = self.module if search == "best" else getattr(self.module, name)
            return {"translations": plain(sentences, *sampling), "scores": None, "finished": None}
        return {"scores": None, **function(sentences, *sampling)}

    def _nbest(self, sentences):
        return self._required("nbest")(sentences)

    def _score(self, sources, targets):
        return self._required("score")(sources, targets)

    def _source_lengths(self, sentences):
        return self.module.source_lengths(sentences)

    def _required(self, name):
        function = getattr(self.module, name, None)
        if function is None:
            raise ValueError(f"This SavedModel was exported before `{name}` existed: export it again to use it")
        return function


def load(path, *, beam_size=None, alpha=None, max_length=None, jit_compile=True, compact=False):
    """A translator from a training run directory, an exported SavedModel or a LiteRT export.

    A run directory (`config.json` + `model.keras` + `tokenizers/`, or an
    ensemble's `config.json` + `tokenizers/` + members) gives a
    live `Translator` built with the given decoding options (defaults from
    the config's `decoding` section: `beam_size`, `length_penalty`,
    `max_length`; else beam 4 and alpha 0.6). A SavedModel gives the
    loaded module in a `LoadedTranslator`, whose beam size was fixed at
    export: `beam_size` may only be `None`, 1 (its `greedy` signature) or
    the exported one. Anything else, or a corrupt model, is a one-line
    `ValueError`, never a TensorFlow trace. An export's files are checked
    against its `MANIFEST.sha256` first (`manifest.verify_manifest`): a file
    missing, changed or added is a `ValueError`; an export without a
    manifest loads with an `UnverifiedExportWarning`. A replacement of
    `path` that a crash interrupted is put right first
    (`destinations.recover`). `compact=True` gives a run directory's
    `Translator` compaction (see `Translator`); for a SavedModel, as
    `alpha` and `max_length`, it is a `ValueError`. A LiteRT export folder
    (`keras_transformer.litert.is_export`) gives a
    `keras_transformer.litert.Translator` (beam search on the host, any
    `beam_size` and `alpha`); its `max_length` (the cache) was fixed at export,
    it does not compact, and it does not `sample` (each a `ValueError`);
    `jit_compile` does not apply to it.

    Load only models you trust: a SavedModel is a program, and loading and
    calling it runs whatever graph it holds.

    Both kinds answer `translator(strings)`, `.greedy(strings)`,
    `.sample(strings, temperature, top_k, top_p, seed)`, `.nbest(strings)`,
    `.score(sources, targets)`, `.source_lengths`, the `*_with_status`
    methods, `.beam_size` and `.max_source_length`, and
    both check their inputs before any TensorFlow call (a bad input is a
    `ValueError` naming the argument, and never blocks later calls) and warn
    with `TruncatedOutputWarning` about translations cut off before END.

    Example:

    >>> translator = load("saved_models/multi30k-en-de", beam_size=4)
    >>> translator(tf.constant(["A dog runs."]))
    """
    path = pathlib.Path(path)
    destinations.recover(path)
    if not path.exists():
        raise ValueError(f"{path} does not exist: pass a training run directory or a SavedModel")
    if runs.is_run_dir(path):
        return _load_run_dir(path, beam_size, alpha, max_length, jit_compile, compact)
    if litert.is_export(path):
        return _load_litert(path, beam_size, alpha, max_length, compact)
    if runs.is_saved_model(path):
        return _load_saved_model(path, beam_size, alpha, max_length, compact)
    raise ValueError(
        f"{path} is not a model: expected a training run directory (config.json + model.keras), "
        "an exported SavedModel (saved_model.pb) or a LiteRT export (litert.json)"
    )


def _load_litert(path, beam_size, alpha, max_length, compact):
    """`load` of a LiteRT export folder: a `keras_transformer.litert.Translator`."""
    fixed = [("max_length", max_length), ("compact", compact or None)]
    given = [f"{{{name}={value!r}}}" for name, value in fixed if value is not None]
    if given:
        raise ArgumentError(
            f"{literal(path)} is a LiteRT export: its max length (the self-attention cache) was fixed at export "
            f"and it does not compact; export again from the run directory, or drop {' and '.join(given)}"
        )
    return litert.Translator(path, beam_size=beam_size, alpha=alpha)


def _load_saved_model(path, beam_size, alpha, max_length, compact):
    """`load` of an exported SavedModel: a `LoadedTranslator`, its manifest checked first."""
    manifest.verify_or_warn(path)
    translator = _guarded(path, "SavedModel", lambda: tf.saved_model.load(str(path)))
    if not hasattr(translator, "greedy") or not hasattr(translator, "beam_size"):
        raise ValueError(
            f"{path} is a SavedModel but not a Translator export (`keras-transformer export` writes those)"
        )
    if alpha is not None or max_length is not None or compact:
        raise ValueError(
            f"{path} is a SavedModel: its length penalty, max length and decoding were fixed "
            "at export; pass the run directory to change them"
        )
    exported = int(translator.beam_size.numpy())
    search = None if beam_size is None else decoding.search_for(beam_size)  # greedy: its `greedy` signature
    if search is not None and not isinstance(search, decoding.GreedySearch) and search.beam_size != exported:
        raise ArgumentError(
            f"{path} was exported with beam_size={exported}: use {{beam_size=1}} (greedy) or "
            f"{{beam_size={exported}}}, or export again from the run directory. Received: beam_size={beam_size}"
        )
    return LoadedTranslator(translator)


def _load_run_dir(path, beam_size, alpha, max_length, jit_compile, compact):
    run = runs.open_run(path)
    config, model, (source, target) = run.config, run.model, run.tokenizers
    defaults = config.decoding or DecodingConfig()  # written by `keras-transformer train`
    beam_size, alpha = decoding_defaults(config.decoding, beam_size, alpha)
    if max_length is None and defaults.max_length:
        max_length = min(int(defaults.max_length), decoding.resolve_max_length(model))
    return _guarded(
        path,
        "run",
        lambda: Translator(
            model,
            source,
            target,
            beam_size=beam_size,
            alpha=alpha,
            max_length=max_length,
            add_source_end=config.add_source_end,
            search_options=defaults.search_options(),
            jit_compile=jit_compile,
            compact=compact,
        ),
        passthrough=(ValueError,),
    )


def _guarded(path, what, load_fn, passthrough=()):
    """Runs `load_fn`, turning any failure into a one-line `ValueError` naming `path`."""
    try:
        return load_fn()
    except passthrough:
        raise
    except Exception as error:  # noqa: BLE001  (TF, Keras, zip, JSON... all mean "corrupt")
        raise ValueError(f"{path}: could not load the {what} (corrupt or incompatible?): {first_line(error)}") from None
