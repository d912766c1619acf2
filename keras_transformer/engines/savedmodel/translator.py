"""The XLA engine's translators: a run directory's `Translator` (`open_run`), a SavedModel's (`open_saved_model`).

`export_run` writes a run as a SavedModel with serving signatures
(`SIGNATURES`), which `open_saved_model` opens again as a
`LoadedTranslator`. Both translators answer every method of
`translators.TranslatorInterface`. `keras_transformer.open_translator` (and
`keras_transformer.export.load`) picks the opener of a folder and an engine.

Example::

    from keras_transformer.serving.export import export_run, open_saved_model

    export_run("saved_models/multi30k-en-de", "saved_models/multi30k-en-de-export")
    translator = open_saved_model("saved_models/multi30k-en-de-export")
    translator(["A man is riding a bike."])
"""

import functools
import pathlib

import tensorflow as tf

from keras_transformer import decoding, runs
from keras_transformer.config import DecodingConfig
from keras_transformer.errors import ArgumentError, first_line
from keras_transformer.files import destinations, manifest
from keras_transformer.serving.token_ids import texts, tokenize_words
from keras_transformer.serving.translator import Translator
from keras_transformer.serving.translator_graph import SIGNATURES, check_export_destination
from keras_transformer.translators import TranslatorInterface, decoding_defaults
from keras_transformer.translators.controls import Languages, pieces_of, special_tokens

__all__ = ["SIGNATURES", "LoadedTranslator", "Translator", "export_run", "open_run", "open_saved_model"]


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
    from keras_transformer.serving.encoder import is_encoder_run
    from keras_transformer.serving.generator import is_generator_run

    if is_encoder_run(model):  # BERT: its signatures classify, fill_mask, embed
        from keras_transformer.serving.encoder_export import export_encoder

        runs.warn_if_unfinished(model)
        return export_encoder(model, output, overwrite=overwrite, **options)

    if is_generator_run(model):  # a decoder-only run (GPT): its serving_default continues prompts
        from keras_transformer.serving.generator_export import export_generator

        runs.warn_if_unfinished(model)
        return export_generator(model, output, overwrite=overwrite, **options)
    destinations.check_separate(model, output, what="the export")
    check_export_destination(output, overwrite)
    runs.warn_if_unfinished(model)
    translator = open_run(model, **options)
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

    def __init__(self, module, greedy=False, source_lang=None, target_lang=None):
        self.module = module
        self._greedy = greedy  # opened with beam_size=1: its `greedy` signature answers the beam's methods
        self._languages = exported_languages(module).with_defaults(source_lang, target_lang)
        self._special_tokens = exported_special_tokens(module)

    @property
    def languages(self):
        """The exported model's language codes and this translator's defaults (`controls.Languages`)."""
        return self._languages

    @property
    def special_tokens(self):
        """The texts of the target vocabulary's special tokens, which no `target_prefix` may hold."""
        return self._special_tokens

    @property
    def beam_size(self):
        return tf.constant(1) if self._greedy else self.module.beam_size

    @property
    def max_source_length(self):
        return self.module.max_source_length

    def __getattr__(self, name):  # only for attributes not found above: the module's
        if name == "module":
            raise AttributeError(name)
        return getattr(self.module, name)

    def _decode(self, search, sentences, controls, *sampling):
        search = "greedy" if self._greedy and search == "best" else search
        name = {"best": "call", "greedy": "greedy", "sample": "sample"}[search]
        if self._controlled(controls):
            return self._required(f"{name}_with_controls")(sentences, *self._filled(sentences, controls), *sampling)
        function = getattr(self.module, f"{name}_with_status", None)
        if function is None:  # exported before the status existed
            plain = self.module if search == "best" else getattr(self.module, name)
            return {"translations": plain(sentences, *sampling), "scores": None, "finished": None}
        return {"scores": None, **function(sentences, *sampling)}

    def _nbest(self, sentences, controls):
        if self._greedy:
            return {name: value[:, None] for name, value in self._decode("greedy", sentences, controls).items()}
        if self._controlled(controls):
            return self._required("nbest_with_controls")(sentences, *self._filled(sentences, controls))
        return self._required("nbest")(sentences)

    def _score(self, sources, targets, controls):
        if self._controlled(controls):
            return self._required("score_with_controls")(sources, targets, *self._filled(sources, controls)[:2])
        return self._required("score")(sources, targets)

    def _controlled(self, controls):
        """Whether a call needs the functions with controls: a language, a prefix or banned words to give."""
        return any(control is not None for control in controls.per_sentence) or bool(controls.banned)

    def _filled(self, sentences, controls):
        """The per-sentence controls ("" where not given), then the banned ids where the export takes them."""
        filled = [tf.fill(tf.shape(sentences)[:1], "") if c is None else c for c in controls.per_sentence]
        if not hasattr(self.module, "target_pieces"):  # exported before banned words
            if controls.banned:
                raise ValueError("This SavedModel was exported before `banned` words existed: export it again")
            return filled
        ids = self.banned_ids_of(controls.banned)
        return [*filled, tf.constant(ids, tf.int32, shape=[len(ids)])]

    def _banning_vocabulary(self):
        """What banned words are read against (`TranslatorInterface.banned_ids_of`): what the export holds."""
        tokenize = functools.partial(tokenize_words, self.module.target_tokenizer)
        return tokenize, texts(self.module.target_pieces), self.module.unbanned_ids.numpy()

    def _source_lengths(self, sentences):
        return self.module.source_lengths(sentences)

    def _required(self, name):
        function = getattr(self.module, name, None)
        if function is None:
            raise ValueError(f"This SavedModel was exported before `{name}` existed: export it again to use it")
        return function


def exported_languages(module):
    """The `controls.Languages` a loaded `Translator` export recorded (none for one exported before they existed)."""
    codes = getattr(module, "language_codes", None)
    if codes is None:
        return Languages()
    source, target = (value.decode("utf-8") or None for value in module.default_languages.numpy().tolist())
    flag = getattr(module, "target_in_source", None)  # MADLAD's; absent from exports made before it
    in_source = bool(flag.numpy()) if flag is not None else False
    return Languages(tuple(code.decode("utf-8") for code in codes.numpy().tolist()), source, target, in_source)


def exported_special_tokens(module):
    """The special tokens' texts a loaded `Translator` export recorded (`controls.prefix_error`).

    An export from before they were recorded gives the pieces of its
    special ids and language tokens; one from before banned words, none.
    """
    recorded = getattr(module, "prefix_special_tokens", None)
    if recorded is not None:
        return tuple(texts(recorded))
    pieces = getattr(module, "target_pieces", None)
    if pieces is None:
        return ()
    ids = module.unbanned_ids.numpy().tolist()
    codes = getattr(module, "language_codes", None)
    if codes is not None and codes.shape[0] and hasattr(module.target_tokenizer, "language_ids"):
        ids += module.target_tokenizer.language_ids(tf.convert_to_tensor(codes)).numpy().tolist()
    return special_tokens(pieces_of(texts(pieces), ids))


def open_saved_model(path, beam_size=None, source_lang=None, target_lang=None):
    """A `LoadedTranslator` of the SavedModel export at `path`, its manifest checked first.

    Its beam size was fixed at export: `beam_size` may be None, 1 (its
    `greedy` signature) or the exported one. `source_lang` and `target_lang`
    set a multilingual model's default languages. Load only exports you
    trust: a SavedModel is a program (`keras_transformer.opener`).
    """
    path = pathlib.Path(path)
    manifest.verify_or_warn(path)
    translator = _guarded(path, "SavedModel", lambda: tf.saved_model.load(str(path)))
    if not hasattr(translator, "greedy") or not hasattr(translator, "beam_size"):
        raise ValueError(
            f"{path} is a SavedModel but not a Translator export (`keras-transformer export` writes those)"
        )
    exported = int(translator.beam_size.numpy())
    if beam_size not in (None, 1, exported):
        raise ArgumentError(
            f"{path} was exported with beam_size={exported}: use {{beam_size=1}} (greedy) or "
            f"{{beam_size={exported}}}, or export again from the run directory. Received: beam_size={beam_size}"
        )
    return LoadedTranslator(translator, greedy=beam_size == 1, source_lang=source_lang, target_lang=target_lang)


def open_run(
    path,
    beam_size=None,
    alpha=None,
    max_length=None,
    jit_compile=True,
    compact=False,
    source_lang=None,
    target_lang=None,
):
    """The XLA `Translator` of the run directory at `path`, with its decoding settings unless given.

    Defaults are the run's `decoding` section (`beam_size`, `alpha`,
    `max_length`), else beam 4 and alpha 0.6; `compact=True` drops finished
    sentences between segments (see `Translator`). `source_lang` and
    `target_lang` set a multilingual model's default languages.
    """
    path = pathlib.Path(path)
    run = runs.open_run(path)
    config, model, (source, target) = run.config, run.model, run.tokenizers
    defaults = config.decoding or DecodingConfig()  # written by `keras-transformer train`
    beam_size, alpha = decoding_defaults(config.decoding, beam_size, alpha)
    if max_length is None and defaults.max_new_tokens:
        max_length = min(int(defaults.max_new_tokens), decoding.resolve_max_length(model))
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
            source_lang=source_lang,
            target_lang=target_lang,
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
