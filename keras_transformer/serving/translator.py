"""`Translator`: strings in, strings out, as a `tf.Module` that saves to a SavedModel.

(`keras_transformer.serving.export` loads and exports them: `load`, `export_run`.)

The module holds the source and target tokenizers, the Keras model and its
searches, compiled by `keras_transformer.decoding.compile_search` (the one
compile entry point; `decoding.search_for` names the search of the beam
size, greedy search for a beam of 1). Tokenization runs in
TensorFlow (tensorflow-text ops); the decode runs as one XLA program per
(batch bucket, source bucket) shape, or, with `compact=True`, in segments
that drop the finished sentences between them. A SavedModel written by
`Translator.save` needs no project code, only `import tensorflow_text`
before loading (it registers the SentencePiece ops)::

    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer ops)

    translator = tf.saved_model.load("saved_models/multi30k-en-de-export")
    translator(tf.constant(["A man is riding a bike."]))  # beam search
    translator.greedy(tf.constant(["A dog runs."]))
    translator.sample(tf.constant(["Hi"]), 0.8, 0, 0.9, -1)  # temperature, top_k, top_p, seed
    translator.call_with_status(tf.constant(["A dog runs."]))  # {"translations", "scores", "finished"}
    translator.nbest(tf.constant(["A dog runs."]))  # every beam, best first, with scores
    translator.score(tf.constant(["A dog runs."]), tf.constant(["Ein Hund läuft."]))  # log-probabilities

It also has named signatures (`SIGNATURES`), which TF Serving, `saved_model_cli`
and other tools that read SignatureDefs call: `serving_default` (beam
search), `greedy` and `sample` (`sentences` -> `translations`, `scores`,
`finished`), `nbest` (the same, `(batch, beam)`) and `score` (`sources`,
`targets` -> `log_probs`, `target_lengths`)::

    signatures = tf.saved_model.load("saved_models/multi30k-en-de-export").signatures
    signatures["serving_default"](sentences=tf.constant(["A dog runs."]))["translations"]

Empty or whitespace-only inputs translate to an empty string; sources longer
than `max_source_length` tokens are truncated (`source_lengths` tells which),
so one long sentence never fails a batch. A translation that reaches the
maximum output length before END is cut off: the `*_with_status` functions
return `finished=False` for it, and the Python side (`Translator`, `load`)
warns with `keras_transformer.decoding.TruncatedOutputWarning`.

Inputs are checked in Python before any TensorFlow call
(`keras_transformer.translators.TranslatorInterface`), by the `Translator` and by
what `load` returns (for a SavedModel, a `LoadedTranslator` around the
loaded module). `sentences` must be a 1-D string tensor or a list of str
without NUL bytes (the tokenizer would turn a NUL into an unknown token, so it
is rejected rather than translated into garbage), and `sample`'s
`temperature`, `top_k`, `top_p` and `seed` must be in range; anything else is
a one-line `ValueError` naming the argument. The check must come first: a
`tf.function` whose input signature rejects a call keeps its lock (a
TensorFlow bug, TF 2.21), so every later call from another thread would hang.
Callers of `tf.saved_model.load` itself get no such check: they must pass a
1-D `tf.string` tensor (and `sample` scalars of float32, int32, float32 and
int64). The SavedModel's `sample` checks its numbers itself: a NaN, infinite
or negative `temperature`, a negative `top_k` or a `top_p` outside (0, 1] is
an `InvalidArgumentError` that names it (they are not clamped).
"""

import functools

import keras
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the SentencePiece ops for loading)

from keras_transformer import decoding
from keras_transformer.decoding import rules
from keras_transformer.files import atomic, destinations, manifest
from keras_transformer.models import as_transformer
from keras_transformer.serving.token_ids import (
    check_vocab,
    pad_to_buckets,
    padded,
    pieces_by_id,
    texts,
    tokenize_words,
    tokenized,
)
from keras_transformer.translators import TranslatorInterface, alignments, decoding_defaults
from keras_transformer.translators.controls import languages_of, pieces_of, special_tokens

_STRINGS = tf.TensorSpec([None], tf.string)
_SAMPLE_SPECS = [
    _STRINGS,
    tf.TensorSpec([], tf.float32),
    tf.TensorSpec([], tf.int32),
    tf.TensorSpec([], tf.float32),
    tf.TensorSpec([], tf.int64),
]
# The controls (`translators.controls`): source language, target language, target prefix, one each per sentence,
# and the ids that the call's banned words ban (`translators.banned_words`), for the whole call.
_CONTROL_SPECS = [_STRINGS, _STRINGS, _STRINGS, tf.TensorSpec([None], tf.int32)]
# The SavedModel's functions, by name, and the `Translator` tf.functions they are. The
# Python methods of those names check their inputs first, then call these.
_EXPORTED = {
    "__call__": "_tf_call",
    "greedy": "_tf_greedy",
    "sample": "_tf_sample",
    "source_lengths": "_tf_source_lengths",
    "call_with_status": "_tf_call_with_status",
    "greedy_with_status": "_tf_greedy_with_status",
    "sample_with_status": "_tf_sample_with_status",
    "nbest": "_tf_nbest",
    "score": "_tf_score",
    "call_with_controls": "_tf_call_with_controls",
    "greedy_with_controls": "_tf_greedy_with_controls",
    "sample_with_controls": "_tf_sample_with_controls",
    "nbest_with_controls": "_tf_nbest_with_controls",
    "score_with_controls": "_tf_score_with_controls",
}
# The SavedModel's signatures (what TF Serving and `saved_model_cli` call), by name.
SIGNATURES = {
    "serving_default": "_tf_call_with_status",
    "greedy": "_tf_greedy_with_status",
    "sample": "_tf_sample_with_status",
    "nbest": "_tf_nbest",
    "score": "_tf_score",
    "with_controls": "_tf_call_with_controls",
    "greedy_with_controls": "_tf_greedy_with_controls",
}


class Translator(TranslatorInterface, tf.Module):
    """A Transformer with its tokenizers and decoder: `translator(strings) -> strings`.

    Args:
        model: a model from `build_transformer`, or a list of them: an
            ensemble, which decodes with the mean of their distributions.
        source_tokenizer: a `SubwordTokenizer` (or any `tf.Module` with
            `tokenize(strings) -> RaggedTensor` and `detokenize(ids)`).
        target_tokenizer: the target tokenizer; defaults to `source_tokenizer`.
        beam_size: beams of `__call__` and `nbest` (1 = greedy).
        alpha: GNMT length-penalty exponent of the beam search (and of the
            normalised scores).
        max_length: tokens generated at most; default the model's `max_length`.
        max_source_length: source tokens kept (longer ones are truncated);
            default the model's `max_length`.
        add_source_end: append the source tokenizer's END to the source ids
            (as the training data did). An empty sentence then decodes from
            its END alone, as an imported OPUS-MT model does; without it, an
            empty sentence translates to "".
        search_options: keyword arguments of `decoding.search_for` beside the
            beam size and alpha (a run's `DecodingConfig.search_options()`:
            an imported model decodes as transformers does); the special ids
            are the model's (`ModelConfig.special_ids`).
        source_lang, target_lang: a multilingual model's default languages
            (codes of its tokenizer, `languages.codes`); default its
            tokenizer's (the checkpoint's `src_lang`, and the target its
            generation settings force, if any).
        jit_compile: compile the decode with XLA.
        compact: drop the sentences that are done from the batch between
            segments of steps (`keras_transformer.decoding.compaction`) in beam
            search and greedy decoding: the same translations, faster for
            batches whose outputs differ in length, with an XLA program per
            segment and batch size instead of one per batch (more to
            compile before the first translations). Such a translator does
            not `save`.
        name: module name.

    Call arguments:
        sentences: string tensor `(batch,)`, or a list of str. Checked before
            any TensorFlow call: anything else, or a sentence with a NUL
            byte, is a `ValueError` naming it.
        source_lang, target_lang, target_prefix: the controls of
            `keras_transformer.translators.controls`, each a str or one per
            sentence: a multilingual model's languages, and the first words
            of the output (decoding continues from them).
        banned: words no output may hold, for every sentence: the ids of
            their pieces are never produced (`translators.banned_words`;
            the SavedModel's `*_with_controls` take those ids, `banned_ids`,
            which `banned_ids_of(words)` gives).

    Returns:
        string tensor `(batch,)`, the translations. A translation cut off at
        `max_length` before END raises a `TruncatedOutputWarning`
        (`call_with_status` returns the flags instead).

    `save` writes a SavedModel with the signatures of `SIGNATURES`
    (`serving_default`, `greedy`, `sample`, `nbest`, `score`), which
    TF Serving and `saved_model_cli` call by name.

    Example:

    >>> translator = Translator(model, tokenizer, beam_size=4)
    >>> translator(tf.constant(["Ein Hund läuft."])).numpy()
    array([b'A dog runs.'], dtype=object)
    >>> translator.nbest(["Ein Hund läuft."])["scores"].shape
    TensorShape([1, 4])
    >>> translator.save("saved_models/demo")
    """

    def __init__(
        self,
        model,
        source_tokenizer,
        target_tokenizer=None,
        *,
        beam_size=4,
        alpha=0.6,
        max_length=None,
        max_source_length=None,
        add_source_end=False,
        search_options=None,
        source_lang=None,
        target_lang=None,
        jit_compile=True,
        compact=False,
        name=None,
    ):
        super().__init__(name=name)
        first = decoding.ensemble_members(model)[0]  # the members share vocabularies and lengths
        model_max = first.encoder_embedding.max_length
        max_source_length = model_max if max_source_length is None else max_source_length
        if not isinstance(max_source_length, int) or not 1 <= max_source_length <= model_max:
            raise ValueError(
                f"`max_source_length` must be an int in [1, {model_max}]. "
                f"Received: max_source_length={max_source_length!r}"
            )
        beam_size, alpha = decoding_defaults(None, beam_size, alpha)  # checked
        options = {**first.config.special_ids(), **(search_options or {})}
        search = decoding.search_for(beam_size, alpha, **options)  # a beam of 1: greedy
        self.model = model
        # The tf.Variables under the Keras variables, tracked directly: a Session-based
        # loader (TF Serving, `saved_model_cli run`) restores only the variables it reaches so.
        self._tf_variables = [v.value for member in decoding.ensemble_members(model) for v in member.variables]
        self.source_tokenizer = source_tokenizer
        self.target_tokenizer = target_tokenizer or source_tokenizer
        check_vocab("source_tokenizer", self.source_tokenizer, first.source_vocab_size)
        check_vocab("target_tokenizer", self.target_tokenizer, first.outputs[0].shape[-1])
        self._languages = languages_of(self.source_tokenizer, self.target_tokenizer).with_defaults(
            source_lang, target_lang
        )
        self._multilingual = bool(self._languages.codes)
        # The source's frame: END where the model adds it, a multilingual model's language token.
        self._source_extra = int(add_source_end) + int(self._multilingual)
        self._source_limit = max_source_length - self._source_extra
        self._add_source_end = add_source_end
        # The ids that end and pad: the tokenizers' own (0 pads, 3 ends for this package's; an import's differ).
        self._source_end = int(getattr(self.source_tokenizer, "end_id", decoding.END_ID))
        self._target_end = int(getattr(self.target_tokenizer, "end_id", decoding.END_ID))
        self._source_pad, self._target_pad = first.config.pad_id, first.config.target_pad
        self._decode_length = decoding.resolve_max_length(model, max_length)
        self._compact = bool(compact)
        self._searches = _Searches(model, search, options, self._decode_length, jit_compile, compact)
        self._stream_decoder = None  # what `stream` steps through (`stream_decoder`), built on the first stream
        # Read back by the commands, also after `tf.saved_model.load`.
        self.beam_size = tf.Variable(beam_size, trainable=False, name="beam_size")
        self.max_source_length = tf.Variable(max_source_length, trainable=False, name="max_source_length")
        codes, source, target = self._languages.codes, self._languages.source_lang, self._languages.target_lang
        self.language_codes = tf.Variable(tf.constant(codes, tf.string, shape=[len(codes)]), trainable=False)
        self.default_languages = tf.Variable([source or "", target or ""], trainable=False)
        # MADLAD's: the target language is the source's first token, and the output starts free.
        self._target_in_source = self._languages.target_in_source
        self.target_in_source = tf.Variable(self._target_in_source, trainable=False)
        # The target pieces by id: what a call's banned words are read against, also after loading.
        self.target_pieces = tf.Variable(
            pieces_by_id(self.target_tokenizer, first.outputs[0].shape[-1]), trainable=False
        )
        unk = getattr(self.target_tokenizer, "unk_id", self._target_end)
        specials = sorted({self._target_end, self._target_pad, unk, *first.config.special_ids().values()})
        self.unbanned_ids = tf.Variable(specials, trainable=False)  # what banned words never ban
        # The texts of the special tokens, which no prefix may hold (`controls.prefix_error`), also after loading.
        languages = getattr(self.target_tokenizer, "languages", None) or {}
        self._special_tokens = special_tokens(
            getattr(self.target_tokenizer, "special_tokens", ()),
            pieces_of(texts(self.target_pieces), [*specials, *languages.values()]),
        )
        self.prefix_special_tokens = tf.Variable(tf.constant(self._special_tokens, tf.string), trainable=False)

    @property
    def languages(self):
        """The model's language codes and this translator's default source and target (`controls.Languages`)."""
        return self._languages

    @property
    def special_tokens(self):
        """The texts of the target vocabulary's special tokens, which no `target_prefix` may hold."""
        return self._special_tokens

    # The engine's hooks (`TranslatorInterface`): its compiled functions, given checked inputs.

    def _banning_vocabulary(self):
        """What banned words are read against (`TranslatorInterface.banned_ids_of`): the target vocabulary's."""
        tokenize = functools.partial(tokenize_words, self.target_tokenizer)
        return tokenize, texts(self.target_pieces), self.unbanned_ids.numpy()

    def _decode(self, search, sentences, controls, *sampling):
        controls = self._filled(sentences, controls)
        if search == "sample":
            return self._tf_sample_with_controls(sentences, *controls, *sampling)
        decode = self._tf_greedy_with_controls if search == "greedy" else self._tf_call_with_controls
        return decode(sentences, *controls)

    def _stream(self, search, sentences, controls, *sampling, cancel=None):
        """Greedy search and sampling step by step (`stream_decoder`); beam search's result once."""
        if search == "best" and self._searches.beam_size > 1:
            return super()._stream(search, sentences, controls)
        if self._stream_decoder is None:
            from keras_transformer.serving.stream_decoder import StreamDecoder

            self._stream_decoder = StreamDecoder(self)
        search = "greedy" if search == "best" else search
        return self._stream_decoder.pieces(search, sentences, controls, *sampling, cancel=cancel)

    def _nbest(self, sentences, controls):
        return self._tf_nbest_with_controls(sentences, *self._filled(sentences, controls))

    def _score(self, sources, targets, controls):
        return self._tf_score_with_controls(sources, targets, *self._filled(sources, controls)[:2])

    def _filled(self, sentences, controls):
        """`controls` as the graph takes them: "" for each one not given (its default), then the banned ids."""
        if controls.banned and self._compact:
            raise ValueError("A Translator built with `compact=True` takes no `banned` words: build one without")
        filled = [tf.fill(tf.shape(sentences)[:1], "") if c is None else c for c in controls.per_sentence]
        ids = self.banned_ids_of(controls.banned)
        return [*filled, tf.constant(ids, tf.int32, shape=[len(ids)])]

    def _source_lengths(self, sentences):
        return self._tf_source_lengths(sentences)

    def _align(self, sources, outputs, layer, controls):
        members = [as_transformer(member) for member in decoding.ensemble_members(self.model)]
        layer = alignments.check_layer(layer, len(members[0].decoder_layers))
        if not sources.shape[0]:
            return []
        source_lang, target_lang = (
            [self._languages[which]] * sources.shape[0] if codes is None else texts(codes)
            for which, codes in ((1, controls.source_lang), (2, controls.target_lang))
        )
        source_codes = target_lang if self._target_in_source else source_lang  # the language token the source holds
        source = [self._aligned_source(text, code) for text, code in zip(texts(sources), source_codes)]
        target = [self._aligned_target(text, code) for text, code in zip(texts(outputs), target_lang)]
        source_ids = padded([ids for ids, _, _ in source], self._source_pad)
        decoder_inputs = padded([ids for ids, _, _ in target], self._target_pad)
        attention = alignments.cross_attention(members, source_ids, decoder_inputs, layer)
        return [
            alignments.word_alignment(weights[t0 : t0 + len(t_words), s0 : s0 + len(s_words)], s_words, t_words)
            for weights, (_, s0, s_words), (_, t0, t_words) in zip(attention, source, target)
        ]

    def _aligned_source(self, text, code):
        """`(source ids as the model reads them, where its words start, the word of each piece)`."""
        ids, words = alignments.word_pieces(functools.partial(tokenize_words, self.source_tokenizer), text)
        ids, words = ids[: self._source_limit], words[: self._source_limit]
        row = ids + [self._source_end] * int(self._add_source_end)
        if not self._multilingual:
            return row, 0, words
        language = self.source_tokenizer.languages[code]
        if self._target_in_source:
            return [language] + row, 1, words
        if getattr(self.source_tokenizer, "source_position", "first") == "last":
            return row + [language], 0, words
        return [language] + row, 1, words

    def _aligned_target(self, text, code):
        """`(decoder inputs: START, a language, the pieces; the row producing the first piece; their words)`."""
        forced = self._multilingual and not self._target_in_source  # a language token starts the output
        start = [int(self._searches.start_id)] + ([self.target_tokenizer.languages[code]] if forced else [])
        ids, words = alignments.word_pieces(functools.partial(tokenize_words, self.target_tokenizer), text)
        keep = self._decode_length - len(start) + 1
        return start + ids[: keep - 1], len(start) - 1, words[: keep - 1]

    def _trackable_children(self, *args, **kwargs):
        """The SavedModel holds the `_tf_*` functions under their public names (`_EXPORTED`)."""
        children = super()._trackable_children(*args, **kwargs)
        for public, private in _EXPORTED.items():
            if private in children:
                children[public] = children.pop(private)
        return children

    # The SavedModel's functions. The input signatures check nothing in
    # Python's time: the methods of `TranslatorInterface` do, before calling these.
    # No autograph: their control flow is explicit (`tf.cond`, the searches' loops).

    @tf.function(input_signature=[_STRINGS], autograph=False)
    def _tf_call(self, sentences):
        return self._tf_call_with_status(sentences)["translations"]

    @tf.function(input_signature=[_STRINGS], autograph=False)
    def _tf_greedy(self, sentences):
        return self._tf_greedy_with_status(sentences)["translations"]

    @tf.function(input_signature=_SAMPLE_SPECS, autograph=False)
    def _tf_sample(self, sentences, temperature, top_k, top_p, seed):
        return self._tf_sample_with_status(sentences, temperature, top_k, top_p, seed)["translations"]

    @tf.function(input_signature=[_STRINGS], autograph=False)
    def _tf_source_lengths(self, sentences):
        ids = tokenized(self.source_tokenizer, sentences)
        return tf.cast(ids.row_lengths(), tf.int32) + self._source_extra

    @tf.function(input_signature=[_STRINGS], autograph=False)
    def _tf_call_with_status(self, sentences):
        return self._tf_call_with_controls(sentences, *self._defaults(sentences))

    @tf.function(input_signature=[_STRINGS], autograph=False)
    def _tf_greedy_with_status(self, sentences):
        return self._tf_greedy_with_controls(sentences, *self._defaults(sentences))

    @tf.function(input_signature=_SAMPLE_SPECS, autograph=False)
    def _tf_sample_with_status(self, sentences, temperature, top_k, top_p, seed):
        return self._tf_sample_with_controls(sentences, *self._defaults(sentences), temperature, top_k, top_p, seed)

    @tf.function(input_signature=[_STRINGS], autograph=False)
    def _tf_nbest(self, sentences):
        return self._tf_nbest_with_controls(sentences, *self._defaults(sentences))

    @tf.function(input_signature=[_STRINGS, _STRINGS], autograph=False)
    def _tf_score(self, sources, targets):
        return self._tf_score_with_controls(sources, targets, *self._defaults(sources)[:2])

    # The same with the controls (`translators.controls`): a "" entry is the translator's default.

    @tf.function(input_signature=[_STRINGS, *_CONTROL_SPECS], autograph=False)
    def _tf_call_with_controls(self, sentences, source_lang, target_lang, target_prefix, banned_ids):
        return self._run(sentences, self._searches.best, (source_lang, target_lang, target_prefix, banned_ids))

    @tf.function(input_signature=[_STRINGS, *_CONTROL_SPECS], autograph=False)
    def _tf_greedy_with_controls(self, sentences, source_lang, target_lang, target_prefix, banned_ids):
        return self._run(sentences, self._searches.greedy, (source_lang, target_lang, target_prefix, banned_ids))

    @tf.function(input_signature=[_STRINGS, *_CONTROL_SPECS, *_SAMPLE_SPECS[1:]], autograph=False)
    def _tf_sample_with_controls(
        self, sentences, source_lang, target_lang, target_prefix, banned_ids, temperature, top_k, top_p, seed
    ):
        controls = (source_lang, target_lang, target_prefix, banned_ids)
        return self._run_sample(sentences, controls, temperature, top_k, top_p, seed)

    @tf.function(input_signature=[_STRINGS, *_CONTROL_SPECS], autograph=False)
    def _tf_nbest_with_controls(self, sentences, source_lang, target_lang, target_prefix, banned_ids):
        controls = (source_lang, target_lang, target_prefix, banned_ids)
        return self._run(sentences, self._searches.nbest, controls, beams=self._searches.beam_size)

    @tf.function(input_signature=[_STRINGS, _STRINGS, _STRINGS, _STRINGS], autograph=False)
    def _tf_score_with_controls(self, sources, targets, source_lang, target_lang):
        batch = tf.shape(sources)[0]
        check = tf.debugging.assert_equal(
            batch, tf.shape(targets)[0], message="`sources` and `targets` must hold as many sentences"
        )

        def run():
            ids = tokenized(self.target_tokenizer, targets)
            ids = tf.concat([tf.cast(ids, tf.int32), tf.fill([batch, 1], self._target_end)], axis=1)
            if self._multilingual and not self._target_in_source:  # it starts with its language, as the model learnt
                ids = tf.concat([self._language_column(target_lang, 1), ids], axis=1)
            ids = ids[:, : self._decode_length]
            target = pad_to_buckets(ids, self._decode_length, self._target_pad)
            log_probs = self._searches.score(self._source_ids(sources, source_lang, target_lang), target)[:batch]
            return {"log_probs": log_probs, "target_lengths": tf.cast(ids.row_lengths(), tf.int32)}

        with tf.control_dependencies([check]):
            empty = {"log_probs": tf.zeros([0]), "target_lengths": tf.zeros([0], tf.int32)}
            return tf.cond(batch > 0, run, lambda: empty)

    def _defaults(self, sentences):
        """The controls of a plain call: the default languages, no prefix, nothing banned."""
        fill = functools.partial(tf.fill, tf.shape(sentences)[:1])
        return fill(self.default_languages[0]), fill(self.default_languages[1]), fill(""), tf.zeros([0], tf.int32)

    def _run_sample(self, sentences, controls, temperature, top_k, top_p, seed):
        with tf.control_dependencies(_sampling_asserts(temperature, top_k, top_p)):
            seed = tf.cond(seed < 0, lambda: tf.random.uniform([], 0, 2**62, tf.int64), lambda: seed)

        def decode(source_ids, prefix, ban_mask):
            shape = tf.stack([tf.shape(source_ids)[0], self._decode_length])
            noise = tf.random.stateless_uniform(shape, tf.stack([seed, 0]))
            return self._searches.sample(source_ids, noise, temperature, top_k, top_p, prefix, ban_mask)

        return self._run(sentences, decode, controls)

    def _run(self, sentences, decode, controls, beams=None):
        """`{"translations", "scores", "finished"}` of `sentences` by `decode(source_ids, prefix, ban_mask)`.

        `decode` returns a `SearchResult`. `controls` are `(source_lang,
        target_lang, target_prefix)`, each `(batch,)`, and the banned ids
        `(n,)`, which reach the search as its `ban_mask` (`rules.ids_mask`).
        Each output is `(batch,)`, or `(batch, beams)` when `beams` is given.
        """
        batch = tf.shape(sentences)[0]
        shape = [0] if beams is None else [0, beams]
        source_lang, target_lang, target_prefix, banned_ids = controls

        def run():
            source_ids = self._source_ids(sentences, source_lang, target_lang)
            prefix = self._prefix(target_lang, target_prefix, tf.shape(source_ids)[0])
            ids, scores, finished = decode(source_ids, prefix, _ban_mask(self.target_pieces.shape[0], banned_ids))
            return _status(self._detokenize(ids[:batch]), scores[:batch], finished[:batch])

        def empty():
            return _status(tf.zeros(shape, tf.string), tf.zeros(shape), tf.zeros(shape, tf.bool))

        return tf.cond(batch > 0, run, empty)

    def _source_ids(self, sentences, source_lang, target_lang):
        """Source ids `(batch', width)` in buckets (`pad_to_buckets`); empty sentences all padding.

        With `add_source_end`, an empty sentence is its END alone (see the
        class docstring); a multilingual model's sources carry their
        language token, first or last as its tokenizer says, or, for
        MADLAD (`target_in_source`), the target language's token first.
        """
        batch = tf.shape(sentences)[0]
        ids = tokenized(self.source_tokenizer, sentences)
        ids = tf.cast(ids[:, : self._source_limit], tf.int32)
        if self._add_source_end:
            ids = tf.concat([ids, tf.RaggedTensor.from_tensor(tf.fill([batch, 1], self._source_end))], axis=1)
        if self._multilingual:
            in_source = self._target_in_source
            language = self._language_column(target_lang, 1) if in_source else self._language_column(source_lang, 0)
            last = not in_source and getattr(self.source_tokenizer, "source_position", "first") == "last"
            ids = tf.concat([ids, language] if last else [language, ids], axis=1)
        if self._source_extra:
            return pad_to_buckets(ids, self.max_source_length, self._source_pad)
        empty = ids.row_lengths() == 0
        source = pad_to_buckets(ids, self.max_source_length, self._source_pad)
        return tf.where(tf.pad(empty, [[0, tf.shape(source)[0] - batch]])[:, None], self._source_pad, source)

    def _language_column(self, codes, which):
        """The language ids of `codes` `(batch,)` as a ragged `(batch, 1)`; "" is default `which` (0 source, 1 target).

        A code the model lacks (or no default) fails with an `InvalidArgumentError`.
        """
        codes = tf.where(codes == "", self.default_languages[which], codes)
        ids = self.source_tokenizer.language_ids(codes)
        check = tf.debugging.assert_non_negative(
            ids, message=f"`{('source_lang', 'target_lang')[which]}` names no language of this model"
        )
        with tf.control_dependencies([check]):
            return tf.RaggedTensor.from_tensor(tf.identity(ids)[:, None])

    def _prefix(self, target_lang, target_prefix, rows):
        """The forced beginning of each output `(rows, max_length)`, -1 where free: language token, then prefix.

        `rows` is the bucketed batch of the source ids; the rows past the
        sentences are free.
        """
        pieces = self.target_tokenizer.tokenize(tf.strings.strip(target_prefix))
        pieces = tf.cast(pieces, tf.int32)
        if self._multilingual and not self._target_in_source:
            pieces = tf.concat([self._language_column(target_lang, 1), pieces], axis=1)
        dense = pieces.to_tensor(-1, shape=[None, self._decode_length])
        return tf.pad(dense, [[0, rows - tf.shape(dense)[0]], [0, 0]], constant_values=-1)

    def _detokenize(self, ids):
        """Strings of ids `(batch, length)`, or `(batch, beams, length)` -> `(batch, beams)`."""
        if ids.shape.rank == 2:
            return self.target_tokenizer.detokenize(ids)
        shape = tf.shape(ids)
        strings = self.target_tokenizer.detokenize(tf.reshape(ids, [-1, shape[2]]))
        return tf.reshape(strings, shape[:2])

    def save(self, path, overwrite=True):
        """Writes this module as a SavedModel at `path`, atomically, with a manifest of sha256 sums.

        The SavedModel has the signatures of `SIGNATURES`. `path` may be new,
        an empty folder, or (when `overwrite` is true) an earlier export of
        this package; anything else is refused before any work with
        `destinations.UnsafeDestinationError`. The new export is written
        beside `path` and swapped in only when complete: a failed or
        interrupted save leaves a previous export intact. A compacting
        `Translator` (`compact=True`) is refused with a `ValueError`: exports
        decode each batch as one XLA program.
        """
        if self._compact:
            raise ValueError("A Translator built with `compact=True` does not save: build one with compact=False")
        check_export_destination(path, overwrite)
        # The functions, not their concrete functions: traced once, inside the save.
        signatures = {name: getattr(self, private) for name, private in SIGNATURES.items()}
        # No gradients: the export only translates, and tracing them took a fifth of the save.
        options = tf.saved_model.SaveOptions(experimental_custom_gradients=False)

        def write(tmp):
            tf.saved_model.save(self, tmp, signatures=signatures, options=options)
            manifest.write_manifest(tmp)

        atomic.replace_dir(write, path, destinations.remove_previous)
        return str(path)


class _Searches:
    """A `Translator`'s compiled searches (`decoding.compile_search`): source ids -> `SearchResult`.

    `scores` are log-probabilities normalised by the search's length penalty
    (`Search.normalise`, length counting END), the quantity the beam search
    ranks by, for every search alike. `nbest` runs `search` (what
    `decoding.search_for(beam_size, alpha, **options)` names); greedy search
    and sampling share its `options`.
    """

    def __init__(self, model, search, options, max_length, jit_compile, compact=False):
        compile_search = functools.partial(decoding.compile_search, model, max_length=max_length)
        compile_search = functools.partial(compile_search, jit_compile=jit_compile)
        greedy = decoding.search_for(1, search.alpha, **options)
        self.beam_size, self._compact = search.beam_size, compact
        self.start_id = search.start_id
        self.stream_settings = (model, search, options, max_length, jit_compile)  # `stream_decoder`'s
        self._greedy = compile_search(greedy, compact=compact)
        self._nbest = self._greedy if search == greedy else compile_search(search, compact=compact)
        self._sample = compile_search(decoding.search_for(None, search.alpha, temperature=1.0, **options))
        scoring = decoding.search_for(1, 0.0, **options)  # plain log-probabilities, with the search's ids and bans
        self.score = decoding.compile_scores(model, search=scoring, jit_compile=jit_compile)

    def greedy(self, source_ids, prefix, ban_mask):
        return self._greedy(source_ids, prefix=prefix, **self._ban(ban_mask)).best()

    def nbest(self, source_ids, prefix, ban_mask):
        return self._nbest(source_ids, prefix=prefix, **self._ban(ban_mask))

    def best(self, source_ids, prefix, ban_mask):
        """The best hypothesis of `nbest`."""
        return self.nbest(source_ids, prefix, ban_mask).best()

    def sample(self, source_ids, noise, temperature, top_k, top_p, prefix, ban_mask):
        settings = dict(temperature=temperature, top_k=top_k, top_p=top_p, ban_mask=ban_mask)
        return self._sample(source_ids, noise, prefix=prefix, **settings).best()

    def _ban(self, ban_mask):
        """The setting of a call's banned ids; none for a compacting decode (`Translator._filled` refuses bans)."""
        return {} if self._compact else {"ban_mask": ban_mask}


def check_export_destination(path, overwrite):
    """Refuses `path` unless it is new, empty, or (with `overwrite`) an export of this package."""
    if destinations.check_destination(path, destinations.EXPORT) == "ours" and not overwrite:
        raise destinations.DestinationInUseError(path, "an export", ["overwrite"])


def _status(translations, scores, finished):
    return {"translations": translations, "scores": scores, "finished": finished}


def _sampling_asserts(temperature, top_k, top_p):
    """Graph-side checks of `sample`'s numbers (for SavedModel callers that skip the Python ones)."""

    def check(condition, message, value):
        return tf.debugging.Assert(condition, [message, value])

    return [
        check(
            tf.math.is_finite(temperature) & (temperature >= 0),
            "`temperature` must be a finite number >= 0 (0 = greedy). Received: temperature=",
            temperature,
        ),
        check(top_k >= 0, "`top_k` must be an int >= 0 (0 = off). Received: top_k=", top_k),
        check((top_p > 0) & (top_p <= 1), "`top_p` must be in (0, 1] (1 = off). Received: top_p=", top_p),
    ]


def _ban_mask(vocab_size, banned_ids):
    """Bool `(vocab_size,)`, True at `banned_ids`: the search's `ban_mask` (`rules.ids_mask`)."""
    return rules.ids_mask(vocab_size, banned_ids, keras.ops)
