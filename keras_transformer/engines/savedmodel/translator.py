"""The savedmodel engine: a SavedModel export (`keras-transformer export`) as a `LoadedTranslator`.

`open_saved_model(path)` loads the export (its manifest checked first) and
gives a `LoadedTranslator`, which answers every method of
`translators.TranslatorInterface` through the export's functions. The
xla engine writes such an export (`engines.xla.export.export_run`);
`keras_transformer.opener` picks the engine of a folder.

Example::

    from keras_transformer.engines.savedmodel.translator import open_saved_model

    translator = open_saved_model("saved_models/multi30k-en-de-export")
    translator(["A man is riding a bike."])
"""

import functools
import pathlib

import tensorflow as tf

from keras_transformer.engines.engine import guarded
from keras_transformer.errors import ArgumentError
from keras_transformer.files import manifest
from keras_transformer.translators import TranslatorInterface
from keras_transformer.translators.exported import exported_languages, exported_special_tokens
from keras_transformer.translators.token_ids import texts, tokenize_words

__all__ = ["LoadedTranslator", "open_saved_model"]


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
        filled = list(controls.filled(sentences).per_sentence)
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


def open_saved_model(path, beam_size=None, source_lang=None, target_lang=None):
    """A `LoadedTranslator` of the SavedModel export at `path`, its manifest checked first.

    Its beam size was fixed at export: `beam_size` may be None, 1 (its
    `greedy` signature) or the exported one. `source_lang` and `target_lang`
    set a multilingual model's default languages. Load only exports you
    trust: a SavedModel is a program (`keras_transformer.opener`).
    """
    path = pathlib.Path(path)
    manifest.verify_or_warn(path)
    translator = guarded(path, "SavedModel", lambda: tf.saved_model.load(str(path)))
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
