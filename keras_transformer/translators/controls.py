"""The controls of a translation: its languages, a forced beginning of the output, and banned words.

A multilingual model (M2M100, NLLB-200, mBART-50) is told the language of
each source and the language to translate into; MADLAD-400 only the target
language, which becomes its source's first token (`target_in_source`: a
source language is then read and not used). Any model can be given the first words
of its output (`target_prefix`), from which decoding continues, and words
that must never appear (`banned`, a list of words for the whole call:
`banned_words`). Every translator takes them per call, the first three
each a str (for every sentence) or a list with one per sentence, and
`resolve` checks them in Python before any
engine runs: an unknown language code is one line naming three close ones,
a multilingual model without a target language one line that says how to
give one, a language given to a model of one language pair one line that
says it has none, and a prefix holding a special token of the model (`</s>`,
`<pad>`, a language code) one line naming it (`prefix_error`: a prefix is
text; the REST server and `--prefix` read the same rule).

What reaches an engine is `Controls`: three 1-D `tf.string` tensors, one
entry per sentence, every language filled in (None for a model without
languages, and for no prefix), and the banned words (a tuple of str).

Example:

>>> controls = resolve(tf.constant(["Hallo", "Welt"]), Languages(("deu_Latn", "fra_Latn"), "deu_Latn"),
...                    target_lang="fra_Latn", target_prefix="Le")
>>> controls.target_lang.numpy().tolist(), controls.target_prefix.numpy().tolist()
([b'fra_Latn', b'fra_Latn'], [b'Le', b'Le'])
"""

import unicodedata
from typing import NamedTuple

import tensorflow as tf

from keras_transformer.input_rules import sentence_error
from keras_transformer.kinds import close_matches
from keras_transformer.translators.banned_words import check_words

HOW_TO_NAME = (
    'name one with target_lang= in Python, --target-lang on the command line or a "target_lang" field in a '
    "REST instance"
)


COMMON_CODES = ("fra_Latn", "fr", "deu_Latn", "de", "spa_Latn", "es", "eng_Latn", "en")  # examples users know


def example_code(codes, other_than=None):
    """A code of `codes` to show in an example: a widely known language's where it has one, never `other_than`.

    Example:

    >>> example_code(("ace_Arab", "eng_Latn", "fra_Latn", "zul_Latn"), other_than="fra_Latn")
    'eng_Latn'
    """
    candidates = [code for code in codes if code != other_than] or list(codes)
    return next((code for code in COMMON_CODES if code in candidates), candidates[0] if candidates else None)


class Languages(NamedTuple):
    """A model's language codes and its defaults (None where it names none); no codes: one language pair.

    `target_in_source`: the target language is a token of the source (MADLAD's `<2de>`), and the source's
    language is not told (any code is taken, and none needed).
    """

    codes: tuple = ()
    source_lang: str = None
    target_lang: str = None
    target_in_source: bool = False

    @property
    def forced_first(self):
        """Whether each output begins with its target language's token (`decoding.rules.forced_rows`): a
        multilingual model's, but not MADLAD's, whose source holds it."""
        return bool(self.codes) and not self.target_in_source

    def check(self, code, name):
        """`code` if it is one of `codes`; a one-line `ValueError` naming `name` and three close codes otherwise."""
        if not isinstance(code, str):
            raise ValueError(f"`{name}` must be a language code (a str). Received: {name}={code!r}")
        if not self.codes:
            raise ValueError(
                f"`{name}` applies to multilingual models; this one translates one language pair. "
                f"Received: {name}={code!r}"
            )
        if code not in self.codes:
            close = close_matches(code, self.codes)
            hint = f"close: {', '.join(close)}" if close else f"it has {len(self.codes)}, e.g. {self.codes[0]}"
            token = f" (it has no <2{code}> token)" if self.target_in_source else ""
            raise ValueError(f"`{name}` {code!r} is not a language of this model{token}; {hint}")
        return code

    def missing_target(self, how=HOW_TO_NAME, model="this model"):
        """Why a call naming no target language cannot be translated by `model` (multilingual, without a
        default), ending with `how` to name one; None when it can. The one check of a missing target: calls,
        the command line's flags and REST requests read it.

        >>> Languages(("deu_Latn", "fra_Latn")).missing_target("give target_lang=")
        "No target language: this model translates into 2 languages; give target_lang= (e.g. 'fra_Latn')"
        >>> Languages(("deu_Latn", "fra_Latn"), target_lang="deu_Latn").missing_target() is None
        True
        """
        if not self.codes or self.target_lang is not None:
            return None
        example = example_code(self.codes, self.source_lang)
        return f"No target language: {model} translates into {len(self.codes)} languages; {how} (e.g. {example!r})"

    def require_target(self, how=HOW_TO_NAME, model="this model"):
        """The default target language; a one-line `ValueError` (`missing_target`) where there is none to use."""
        reason = self.missing_target(how, model)
        if reason is not None:
            raise ValueError(reason)
        return self.target_lang

    def with_defaults(self, source_lang=None, target_lang=None):
        """A copy whose defaults are those given (each checked), else these."""
        if self.target_in_source and source_lang is not None:  # the model reads the source's language itself
            source_lang = self._source_code(source_lang, "source_lang")
        source = self.source_lang if source_lang is None else self.check(source_lang, "source_lang")
        target = self.target_lang if target_lang is None else self.check(target_lang, "target_lang")
        return self._replace(source_lang=source, target_lang=target)

    def _source_code(self, code, name):
        """A source language of a model that needs none: any str, not used (None)."""
        if not isinstance(code, str):
            raise ValueError(f"`{name}` must be a language code (a str). Received: {name}={code!r}")
        return None


def languages_of(source_tokenizer, target_tokenizer):
    """The `Languages` of a multilingual model's tokenizers (their `languages`, ordered by id, and defaults).

    A tokenizer without languages (this package's, Marian's) gives
    `Languages()`: one language pair. The defaults are the source
    tokenizer's `source_lang` and the target tokenizer's `target_lang`.

    Example:

    >>> class Fairseq:  # what `tokenizers.fairseq.FairseqTokenizer` has
    ...     languages, source_lang, target_lang = {"fra_Latn": 9, "deu_Latn": 8}, "deu_Latn", None
    >>> languages_of(Fairseq(), Fairseq())
    Languages(codes=('deu_Latn', 'fra_Latn'), source_lang='deu_Latn', target_lang=None, target_in_source=False)
    """
    codes = getattr(target_tokenizer, "languages", None) or {}
    if not codes:
        return Languages()
    ordered = tuple(sorted(codes, key=codes.get))
    in_source = bool(getattr(target_tokenizer, "target_in_source", False))
    source_lang = None if in_source else getattr(source_tokenizer, "source_lang", None)
    return Languages(ordered, source_lang, getattr(target_tokenizer, "target_lang", None), in_source)


class Controls(NamedTuple):
    """Per sentence `(batch,)` `tf.string`: source and target language codes, the forced prefix (or None);
    and the call's `banned` words (a tuple of str, `banned_words`).

    One frozen value, made and checked once by `resolve` at a translator's
    public methods and passed whole to its engine. In an engine's graph (a
    SavedModel's functions, a stream, in-flight rows) each of the three is
    a tensor whose "" entries stand for the default (`filled`), which the
    graph fills in.
    """

    source_lang: tf.Tensor = None
    target_lang: tf.Tensor = None
    target_prefix: tf.Tensor = None
    banned: tuple = ()

    @property
    def per_sentence(self):
        """The three per-sentence tensors (or None each): what the engines' graphs take."""
        return (self.source_lang, self.target_lang, self.target_prefix)

    def filled(self, sentences):
        """These controls as a graph reads them: "" for each entry of the three not given (its default)."""
        blank = tf.fill(tf.shape(sentences)[:1], "")
        source, target, prefix = (blank if value is None else value for value in self.per_sentence)
        return self._replace(source_lang=source, target_lang=target, target_prefix=prefix)


def resolve(sentences, languages, source_lang=None, target_lang=None, target_prefix=None, banned=None, special=()):
    """The `Controls` of a call on `sentences` (checked, 1-D `tf.string`), for a model of `languages`.

    Each control is None (the model's default), a str for every sentence, or
    a list with one per sentence (None entries: the default); `banned` is
    None or a list of words for every sentence. A bad one is a one-line
    `ValueError`: a prefix holding one of the model's `special` tokens too
    (`prefix_error`), the one rule of every engine.
    """
    words = check_words(banned)
    if not languages.codes:
        for name, value in (("source_lang", source_lang), ("target_lang", target_lang)):
            if value is not None and (not isinstance(value, (list, tuple)) or any(v is not None for v in value)):
                raise ValueError(
                    f"`{name}` applies to multilingual models; this one translates one language pair. "
                    f"Received: {name}={value!r}"
                )
        return Controls(target_prefix=_prefix(sentences, target_prefix, special), banned=words)

    def code(default):
        def checked(value, name):
            if value is None and default is None:
                languages.require_target()
            return default if value is None else languages.check(value, name)

        return checked

    if languages.target_in_source:  # the source's language is the model's to find: checked to be a code, not used
        values = source_lang if isinstance(source_lang, (list, tuple)) else [source_lang]
        if not isinstance(source_lang, (str, list, tuple, type(None))):
            raise ValueError(f"`source_lang` must be a str or a list with one per sentence. Received: {source_lang!r}")
        for value in values:
            if value is not None:
                languages._source_code(value, "source_lang")
        source = None
    else:
        source = _per_sentence(sentences, "source_lang", source_lang, code(languages.source_lang))
    target = _per_sentence(sentences, "target_lang", target_lang, code(languages.target_lang))
    return Controls(source, target, _prefix(sentences, target_prefix, special), words)


def special_tokens(*groups):
    """The texts of a vocabulary's special tokens, from `groups` of them: each once, longest first.

    A group is a tokenizer's `special_tokens`, or the pieces of the ids a
    model decodes with (START, END, PAD, UNK, its language tokens:
    `pieces_of`). Blank pieces, and pieces with spaces around them, are no
    tokens a text could hold: left out.

    Example:

    >>> special_tokens(["</s>", "<unk>"], pieces_of(["<pad>", "</s>", "", "eng_Latn"], [0, 1, 2, 3]))
    ('eng_Latn', '<pad>', '<unk>', '</s>')
    """
    tokens = {
        token for group in groups for token in group if isinstance(token, str) and token and token.strip() == token
    }
    return tuple(sorted(tokens, key=lambda token: (-len(token), token)))


def pieces_of(pieces, ids):
    """The pieces (`pieces`, a list by id) of `ids`; ids outside the list are passed over."""
    return [pieces[int(i)] for i in ids if 0 <= int(i) < len(pieces)]


def prefix_error(text, special_tokens):
    """Why a forced prefix `text` cannot be given, as the end of a sentence naming it; None if it can.

    A prefix is text: the first words of the translation, tokenized as the
    target tokenizer reads text. One that holds a special token's text
    (`</s>`, `<pad>`, a language code such as `fra_Latn`) would force that
    control token where some tokenizers read it (it ended the output on one
    engine and was text on another): it is refused, naming the first one.

    Example:

    >>> prefix_error("비 와 </s> 비", ("eng_Latn", "<pad>", "</s>"))
    "holds the special token '</s>': a prefix is the text a translation begins with; remove it"
    """
    reason = sentence_error(text)
    if reason is not None:
        return reason
    folded = unicodedata.normalize("NFKC", text)  # a full-width "＜/s＞" is "</s>" once a tokenizer normalizes it
    found = [(text.find(token), -len(token), token) for token in special_tokens if token in text]
    found = found or [(folded.find(token), -len(token), token) for token in special_tokens if token in folded]
    if found:
        token = min(found)[2]
        return f"holds the special token {token!r}: a prefix is the text a translation begins with; remove it"
    return None


def _prefix(sentences, target_prefix, special):
    if target_prefix is None:
        return None

    def checked(text, name):
        if text is None:
            return ""
        if not isinstance(text, str):
            raise ValueError(f"`{name}` must be a str. Received: {name}={text!r}")
        reason = prefix_error(text, special)
        if reason is not None:
            raise ValueError(f"`{name}` {reason}")
        return text

    return _per_sentence(sentences, "target_prefix", target_prefix, checked)


def _per_sentence(sentences, name, value, checked):
    """`value` (a str or None for every sentence, or one per sentence) as a `(batch,)` string tensor of `checked`."""
    count = sentences.shape[0]
    if value is None or isinstance(value, str):
        return tf.fill(tf.shape(sentences)[:1], checked(value, name))
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"`{name}` must be a str or a list with one per sentence. Received: {name}={value!r}")
    if count is not None and len(value) != count:
        raise ValueError(f"`{name}` must hold one entry per sentence: {count}. Received: {len(value)} entries")
    return tf.constant([checked(item, f"{name}[{i}]") for i, item in enumerate(value)], tf.string, shape=[len(value)])
