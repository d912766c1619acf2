"""`Translator`: strings in, strings out, as a `tf.Module` that saves to a SavedModel.

(`keras_transformer.opener` opens one for a run directory: `engines.xla.opening`; `engines.xla.export` exports it.)

The module holds the source and target tokenizers, the Keras model and its
searches, compiled by `keras_transformer.decoding.compile_search` (the one
compile entry point; `decoding.search_for` names the search of the beam
size, greedy search for a beam of 1: `compiled_searches`). What runs in
TensorFlow, and the SavedModel that `Translator.save` writes (its functions
and named signatures, `SIGNATURES`), is `translator_graph`'s; the rows the
model reads (a source's END and language token, the forced start of an
output) are `model_inputs`'.

Empty or whitespace-only inputs translate to an empty string; sources longer
than `max_source_length` tokens are truncated (`source_lengths` tells which),
so one long sentence never fails a batch. A translation that reaches the
maximum output length before END is cut off: the `*_with_status` methods
return `finished=False` for it, and the others warn with
`keras_transformer.decoding.TruncatedOutputWarning`.

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
"""

import functools

import tensorflow as tf

from keras_transformer import decoding
from keras_transformer.engines.xla.compiled_searches import CompiledSearches
from keras_transformer.engines.xla.model_inputs import ModelInputs
from keras_transformer.engines.xla.translator_graph import TranslatorGraph
from keras_transformer.models import as_transformer
from keras_transformer.translators import TranslatorInterface, alignments, decoding_defaults
from keras_transformer.translators.controls import languages_of, pieces_of, special_tokens
from keras_transformer.translators.token_ids import check_vocab, padded, pieces_by_id, texts, tokenize_words


class Translator(TranslatorInterface, TranslatorGraph):
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
        decode_length = decoding.resolve_max_length(model, max_length)
        self._compact = bool(compact)
        self._searches = CompiledSearches(model, search, options, decode_length, jit_compile, compact)
        self._stream_decoder = None  # what `stream` steps through (`stream_decoder`), built on the first stream
        # Read back by the commands, also after `tf.saved_model.load`.
        self.beam_size = tf.Variable(beam_size, trainable=False, name="beam_size")
        self.max_source_length = tf.Variable(max_source_length, trainable=False, name="max_source_length")
        codes, source, target = self._languages.codes, self._languages.source_lang, self._languages.target_lang
        self.language_codes = tf.Variable(tf.constant(codes, tf.string, shape=[len(codes)]), trainable=False)
        self.default_languages = tf.Variable([source or "", target or ""], trainable=False)
        # MADLAD's: the target language is the source's first token, and the output starts free.
        self.target_in_source = tf.Variable(self._languages.target_in_source, trainable=False)
        self._inputs = ModelInputs(
            self.source_tokenizer,
            self.target_tokenizer,
            self._languages,
            self.default_languages,
            self.max_source_length,
            add_source_end=add_source_end,
            pad_ids=(first.config.pad_id, first.config.target_pad),
            decode_length=decode_length,
        )
        # The target pieces by id: what a call's banned words are read against, also after loading.
        self.target_pieces = tf.Variable(
            pieces_by_id(self.target_tokenizer, first.outputs[0].shape[-1]), trainable=False
        )
        end, pad = self._inputs.target_end, self._inputs.target_pad
        unk = getattr(self.target_tokenizer, "unk_id", end)
        specials = sorted({end, pad, unk, *first.config.special_ids().values()})
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

    # What a translator's streams (`stream_decoder`) and in-flight rows (`inflight`) decode with, beside
    # `TranslatorGraph`'s steps (`search_inputs`, `ban_mask`, `detokenize`).

    @property
    def search_settings(self):
        """What this translator's searches were compiled from (`compiled_searches.SearchSettings`)."""
        return self._searches.settings

    @property
    def target_end_id(self):
        """The id that ends an output (the target tokenizer's END)."""
        return self._inputs.target_end

    @property
    def target_pad_id(self):
        """The id that pads an output (the model's)."""
        return self._inputs.target_pad

    # The engine's hooks (`TranslatorInterface`): its compiled functions, given checked inputs.

    def _banning_vocabulary(self):
        """What banned words are read against (`TranslatorInterface.banned_ids_of`): the target vocabulary's."""
        tokenize = functools.partial(tokenize_words, self.target_tokenizer)
        return tokenize, texts(self.target_pieces), self.unbanned_ids.numpy()

    def _decode(self, search, sentences, controls, *sampling):
        inputs = self._graph_inputs(sentences, controls)
        if search == "sample":
            return self._tf_sample_with_controls(sentences, *inputs, *sampling)
        decode = self._tf_greedy_with_controls if search == "greedy" else self._tf_call_with_controls
        return decode(sentences, *inputs)

    def _stream(self, search, sentences, controls, *sampling, cancel=None):
        """Greedy search and sampling step by step (`stream_decoder`); beam search's result once."""
        if search == "best" and self._searches.beam_size > 1:
            return super()._stream(search, sentences, controls)
        if self._stream_decoder is None:
            from keras_transformer.engines.xla.stream_decoder import StreamDecoder

            self._stream_decoder = StreamDecoder(self)
        search = "greedy" if search == "best" else search
        filled, banned_ids = self._filled(sentences, controls)
        return self._stream_decoder.pieces(search, sentences, filled, banned_ids, *sampling, cancel=cancel)

    def _nbest(self, sentences, controls):
        return self._tf_nbest_with_controls(sentences, *self._graph_inputs(sentences, controls))

    def _score(self, sources, targets, controls):
        filled = controls.filled(sources)
        return self._tf_score_with_controls(sources, targets, filled.source_lang, filled.target_lang)

    def _filled(self, sentences, controls):
        """`(controls.filled(sentences), the banned ids)`: the controls as the graph takes them ("" the default)."""
        if controls.banned and self._compact:
            raise ValueError("A Translator built with `compact=True` takes no `banned` words: build one without")
        ids = self.banned_ids_of(controls.banned)
        return controls.filled(sentences), tf.constant(ids, tf.int32, shape=[len(ids)])

    def _graph_inputs(self, sentences, controls):
        """The inputs a `_tf_*_with_controls` function takes after the sentences (the SavedModel's names)."""
        filled, banned_ids = self._filled(sentences, controls)
        return (*filled.per_sentence, banned_ids)

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
        inputs, start_id = self._inputs, self._searches.start_id
        source_codes = target_lang if inputs.target_in_source else source_lang  # the language token the source holds
        source = [inputs.aligned_source(text, code) for text, code in zip(texts(sources), source_codes)]
        target = [inputs.aligned_target(text, code, start_id) for text, code in zip(texts(outputs), target_lang)]
        source_ids = padded([ids for ids, _, _ in source], inputs.source_pad)
        decoder_inputs = padded([ids for ids, _, _ in target], inputs.target_pad)
        attention = alignments.cross_attention(members, source_ids, decoder_inputs, layer)
        return [
            alignments.word_alignment(weights[t0 : t0 + len(t_words), s0 : s0 + len(s_words)], s_words, t_words)
            for weights, (_, s0, s_words), (_, t0, t_words) in zip(attention, source, target)
        ]
