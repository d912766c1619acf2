"""`TranslatorInterface`: what every translator answers, whichever engine decodes it.

A run directory's `Translator` (the XLA decoder), a SavedModel's
`LoadedTranslator`, the `CTranslate2Translator` and a LiteRT export's
host `Translator` (the engines') are all `TranslatorInterface`s, and
`keras_transformer.open_translator` gives the one a folder and an engine
name. This class is their contract, and the code they share: each public
method checks its inputs in Python before anything runs (`inputs`: a bad
input is one line naming the argument, and never blocks a later call), asks
its engine (the hooks below), and the plain translating methods warn with
`decoding.TruncatedOutputWarning` about translations cut off at the maximum
output length before END (`warn_cut_off`, the one place that words it).

Every method takes strings `(batch,)`: a list (or tuple, or 1-D NumPy
array) of str or bytes, or a 1-D `tf.string` tensor. Results are tensors or
arrays with `.numpy()`:

- `translator(sentences)`: beam search (greedy for a beam of 1), strings `(batch,)`;
- `greedy(sentences)`, `sample(sentences, temperature, top_k, top_p, seed)`;
- `call_with_status`, `greedy_with_status`, `sample_with_status`: the same
  without the warning, as `{"translations", "scores", "finished"}`, each
  `(batch,)`: `scores` the log-probability over the length penalty that beam
  search ranks by (`decoding.rules`), `finished` False for a translation
  cut off before END;
- `nbest(sentences)`: every beam, best first, each `(batch, beam_size)`;
- `score(sources, targets)`: `{"log_probs", "target_lengths"}`, teacher-forced;
- `align(sources, outputs, layer=None)`: for each output word, the source
  word it attends to most, as `(i, j)` pairs (`alignments`; the XLA
  translator of a run directory, which has the model's attention);
- `source_lengths(sentences)`: source tokens before truncation;
- `stream(sentence, search)`: one sentence's translation in pieces of
  text, each given once its words are decoded (`streaming`), for
  `search` `"best"` (the translator's own search), `"greedy"` or
  `"sample"`; `stream_pieces` gives them as `streaming.Piece`s, with their
  ids and, last, why the output ended;
- `beam_size`, `max_source_length`, `languages` (a multilingual model's
  codes and default languages, `controls.Languages`), `special_tokens`
  (the target vocabulary's, which no `target_prefix` may hold:
  `controls.prefix_error`) and `supports_sampling` (a LiteRT export does
  not sample).

The translating methods also take the controls of `controls`:
`source_lang=` and `target_lang=` (a multilingual model's codes) and
`target_prefix=` (the first words of the output), each a str or one per
sentence, and `banned=` (a list of words no output may hold, for the
whole call: `banned_words`; `banned_ids_of(words)` gives the ids they
ban); `score` takes the languages.

A subclass implements `_decode(search, sentences, controls, *sampling)`
for `search` in `"best"`, `"greedy"`, `"sample"`, `_nbest(sentences,
controls)`, `_score(sources, targets, controls)` and
`_source_lengths(sentences)`, each given checked inputs and
`controls.Controls`. An engine that decodes token by token gives
`_stream(search, sentences, controls, *sampling, cancel=None)`, an iterator of
`streaming.Piece`s; without it a stream is the whole translation, once.
An engine that takes banned words gives `_banning_vocabulary()`.

Example:

>>> from keras_transformer import open_translator
>>> translator = open_translator("saved_models/multi30k-en-de")  # doctest: +SKIP
>>> isinstance(translator, TranslatorInterface)  # doctest: +SKIP
True
>>> decoding_defaults(None)  # a run without decoding settings: beam 4, alpha 0.6
(4, 0.6)
"""

import warnings

import numpy as np

from keras_transformer.config import DecodingConfig
from keras_transformer.decoding.search import TruncatedOutputWarning
from keras_transformer.kinds import MAX_BEAM_SIZE, check_finite_number, check_int_in_range
from keras_transformer.translators import banned_words
from keras_transformer.translators.controls import Languages, resolve
from keras_transformer.translators.inputs import pairs, sampling
from keras_transformer.translators.inputs import sentences as checked_sentences
from keras_transformer.translators.streaming import Piece

STREAMED_SEARCHES = ("best", "greedy", "sample")


class TranslatorInterface:
    """The methods every translator answers (see the module docstring); a subclass gives the hooks."""

    supports_sampling = True
    languages = Languages()  # a multilingual model's codes and defaults (`controls`)
    special_tokens = ()  # the texts of the target vocabulary's special tokens, which no prefix may hold
    precision = "float32"  # what the weights decode in (`translators.precision`)

    def __call__(self, sentences, **controls):
        """Beam search (greedy when `beam_size=1`): strings `(batch,)` -> strings."""
        return _warned(self.call_with_status(sentences, **controls))

    def greedy(self, sentences, **controls):
        """Greedy decoding: strings `(batch,)` -> strings."""
        return _warned(self.greedy_with_status(sentences, **controls))

    def sample(self, sentences, temperature, top_k, top_p, seed, **controls):
        """Sampling: `temperature` (0 = greedy), `top_k` (0 = off), `top_p` (1 = off), `seed` (-1 = random)."""
        return _warned(self.sample_with_status(sentences, temperature, top_k, top_p, seed, **controls))

    def call_with_status(self, sentences, **controls):
        """`__call__` without the warning: `{"translations", "scores", "finished"}`, each `(batch,)`."""
        sentences = checked_sentences(sentences)
        return self._decode("best", sentences, self._controls(sentences, **controls))

    def greedy_with_status(self, sentences, **controls):
        """`greedy` without the warning; see `call_with_status`."""
        sentences = checked_sentences(sentences)
        return self._decode("greedy", sentences, self._controls(sentences, **controls))

    def sample_with_status(self, sentences, temperature, top_k, top_p, seed, **controls):
        """`sample` without the warning; `scores` are the model's log-probabilities (before temperature), normalised."""
        sentences = checked_sentences(sentences)
        numbers = sampling(temperature, top_k, top_p, seed)
        return self._decode("sample", sentences, self._controls(sentences, **controls), *numbers)

    def nbest(self, sentences, **controls):
        """Every beam, best first: `{"translations", "scores", "finished"}`, each `(batch, beam_size)`.

        Row 0 is `__call__`'s translation; ended hypotheses rank before cut-off ones.
        """
        sentences = checked_sentences(sentences)
        return self._nbest(sentences, self._controls(sentences, **controls))

    def score(self, sources, targets, source_lang=None, target_lang=None):
        """Teacher-forced `{"log_probs", "target_lengths"}` of `targets` given `sources`, each `(batch,)`.

        The sum of the log-probabilities of the target's tokens, END included
        (not length-normalised), and that token count; a target longer than
        the maximum output length is scored on its first tokens. A
        multilingual model's target starts with its language token, which
        counts as one of them.
        """
        sources, targets = pairs(sources, targets)
        controls = self._controls(sources, source_lang=source_lang, target_lang=target_lang)
        return self._score(sources, targets, controls)

    def align(self, sources, outputs, layer=None, source_lang=None, target_lang=None):
        """For each output word, the source word it attends to most: a list of `(i, j)` pairs per pair of texts.

        `i` indexes the source's whitespace-separated words and `j` the
        output's, both from 0 (Moses' `i-j`, `alignments.format_pairs`): one
        pair per output word, read from decoder layer `layer`'s
        cross-attention averaged over its heads (default: the second-to-last
        layer; see `keras_transformer.translators.alignments`).
        """
        sources, outputs = pairs(sources, outputs)
        controls = self._controls(sources, source_lang=source_lang, target_lang=target_lang)
        return self._align(sources, outputs, layer, controls)

    def source_lengths(self, sentences):
        """Source tokens per sentence before truncation.

        END and a multilingual model's language token count where the model adds them.
        """
        return self._source_lengths(checked_sentences(sentences))

    def banned_ids_of(self, words):
        """The ids that ban `words` (a list of str, or None) in this translator's outputs (`banned_words`).

        The words are checked first (`banned_words.check_words`: a bad entry is
        a one-line `ValueError`), and none ban nothing; the engine gives the
        target vocabulary they are read against (`_banning_vocabulary`).
        """
        words = banned_words.check_words(words)
        if not words:
            return ()
        tokenize, pieces, unbanned = self._banning_vocabulary()
        return banned_words.banned_ids(words, tokenize, pieces, unbanned)

    def stream(self, sentence, search="best", *, temperature=1.0, top_k=0, top_p=1.0, seed=-1, **controls):
        """Yields the translation of one `sentence` (a str) in pieces of text, as the decoder produces them.

        Each piece is one or more whole words (with the space before them):
        nothing given can change, and the pieces joined are the string
        `__call__`, `greedy` or `sample` returns for `search` `"best"`,
        `"greedy"` or `"sample"` (`sample([sentence], ...)` with the same
        `seed`: a seed's draws depend on the batch). Greedy search and
        sampling give each word once the next begins; beam search gives the
        whole text once, at the end, as its best hypothesis can change at
        any step until then (so does `"best"` with more than one beam). The
        controls are the translating methods'.

        Example:

        >>> for words in translator.stream("A dog runs.", "greedy"):  # doctest: +SKIP
        ...     print(words, end="", flush=True)
        Ein Hund läuft.
        """
        options = dict(temperature=temperature, top_k=top_k, top_p=top_p, seed=seed)
        pieces = self.stream_pieces(sentence, search, **options, **controls)  # checked now, not at the first piece
        return (piece.text for piece in pieces if piece.text)

    def stream_pieces(
        self, sentence, search="best", *, temperature=1.0, top_k=0, top_p=1.0, seed=-1, cancel=None, **controls
    ):
        """`stream` as `streaming.Piece`s: text, ids, and on the last one its `finish_reason` ("end", "length").

        `cancel` (a `threading.Event`, or anything with `is_set()`) stops
        the decoding at its next step once set: the last piece's reason is
        then `"cancelled"`. The inputs are checked here, before the first
        piece: a bad one is a `ValueError` naming it.
        """
        numbers = dict(temperature=temperature, top_k=top_k, top_p=top_p, seed=seed)
        sentences, numbers = self._stream_inputs(sentence, search, **numbers)
        return self._stream(search, sentences, self._controls(sentences, **controls), *numbers, cancel=cancel)

    def _stream_inputs(self, sentence, search, temperature, top_k, top_p, seed):
        """`(sentences, sampling numbers)` of a stream, checked: one sentence, a search that streams."""
        if search not in STREAMED_SEARCHES:
            raise ValueError(f"`search` must be one of {STREAMED_SEARCHES}. Received: search={search!r}")
        if isinstance(sentence, (list, tuple)) or getattr(sentence, "ndim", 0):
            raise ValueError(f"`sentence` must be one str: stream one sentence at a time. Received: {sentence!r}")
        if search == "sample" and not self.supports_sampling:
            raise ValueError(f"{type(self).__name__} does not sample: stream with search='best' or 'greedy'")
        numbers = sampling(temperature, top_k, top_p, seed) if search == "sample" else ()
        return checked_sentences([sentence]), numbers

    def _controls(self, sentences, source_lang=None, target_lang=None, target_prefix=None, banned=None):
        """The checked `controls.Controls` of a call (see `keras_transformer.translators.controls`)."""
        return resolve(sentences, self.languages, source_lang, target_lang, target_prefix, banned, self.special_tokens)

    # -- what each engine gives: each hook is given checked inputs and `Controls` ------------------

    def _decode(self, search, sentences, controls, *sampling_numbers):
        raise NotImplementedError

    def _nbest(self, sentences, controls):
        raise NotImplementedError

    def _stream(self, search, sentences, controls, *sampling_numbers, cancel=None):
        """`streaming.Piece`s of the one sentence of `sentences`; here the whole translation, once."""
        result = self._decode(search, sentences, controls, *sampling_numbers)
        finished = result.get("finished")
        done = True if finished is None else bool(np.asarray(getattr(finished, "numpy", lambda: finished)())[0])
        text = result["translations"].numpy()[0].decode("utf-8", errors="replace")
        yield Piece(text, (), "end" if done else "length")

    def _score(self, sources, targets, controls):
        raise NotImplementedError

    def _source_lengths(self, sentences):
        raise NotImplementedError

    def _banning_vocabulary(self):
        """`(tokenize, pieces, unbanned)`: what banned words are read against (`banned_words.banned_ids`).

        `tokenize(words)` gives the target tokenizer's ids of each word,
        `pieces` the target pieces by id, `unbanned` the ids never banned
        (END, START, PAD, `<unk>`). An engine without them takes no words.
        """
        raise ValueError(f"{type(self).__name__} takes no `banned` words")

    def _align(self, sources, outputs, layer, controls):
        raise ValueError(
            "Alignments need the model's cross-attention: open the run directory with the XLA engine "
            f"(this is a {type(self).__name__})"
        )


def _warned(result):
    warn_cut_off(result["finished"], stacklevel=3)  # the user's call of `__call__`, `greedy` or `sample`
    return result["translations"]


def warn_cut_off(finished, stacklevel=1):
    """A `TruncatedOutputWarning` naming the sentences whose translation `finished` flags as cut off (False).

    `stacklevel` 1 points the warning at the caller of this function, 2 at its caller, and so on.
    """
    if finished is None:
        return
    finished = finished.numpy() if hasattr(finished, "numpy") else finished
    cut = np.flatnonzero(~np.asarray(finished, bool))
    if cut.size:
        names = ", ".join(f"sentences[{i}]" for i in cut[:5]) + (", ..." if cut.size > 5 else "")
        warnings.warn(
            f"{cut.size} of {len(finished)} translations reached the maximum output length before END "
            f"and are cut off: {names}",
            TruncatedOutputWarning,
            stacklevel=stacklevel + 1,
        )


def decoding_defaults(decoding_config, beam_size=None, alpha=None):
    """`(beam_size, alpha)`, checked: those given, else the run's `decoding_config`'s, else `DecodingConfig`'s.

    A beam that is not an int in [1, MAX_BEAM_SIZE], or an `alpha` that is not
    a finite number >= 0, is a `ValueError` naming it.
    """
    defaults = decoding_config or DecodingConfig()
    beam_size = check_int_in_range(
        "beam_size", defaults.beam_size if beam_size is None else beam_size, 1, MAX_BEAM_SIZE
    )
    return beam_size, check_finite_number("alpha", defaults.alpha if alpha is None else alpha, low=0)
