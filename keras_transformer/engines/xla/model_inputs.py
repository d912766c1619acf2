"""A sentence as a `Translator`'s model reads it: the source row and the forced start of the output.

`ModelInputs` holds what frames a row (the tokenizers, the END a run adds
to its sources, a multilingual model's language tokens, the limits) and
builds the rows two ways: in the graph, for a batch (`source_ids`,
`prefix`, `target_ids`, `source_lengths`: what the SavedModel's functions,
streams and in-flight rows decode from), and in Python, for one text with
the word of each piece (`aligned_source`, `aligned_target`: the rows that
`Translator.align` reads the attention of).

A source row is its first `source_limit` pieces, then END where the run
adds it (`add_source_end`; an empty sentence is then its END alone, as an
imported OPUS-MT model reads it; without it, an empty sentence is all
padding and translates to ""). A multilingual model's language token
comes first, or last where its tokenizer says so (`source_position`), and
for MADLAD (`target_in_source`) the token of the target language comes
first. An output starts with the target language's token (not MADLAD's),
then the pieces of its `target_prefix`.

Example:

>>> inputs = ModelInputs(tokenizer, tokenizer, languages, default_languages, max_source_length)  # doctest: +SKIP
>>> source_ids, prefix = inputs.source_ids(sentences, controls), inputs.prefix(controls, rows)  # doctest: +SKIP
"""

import functools

import tensorflow as tf

from keras_transformer import decoding
from keras_transformer.decoding import rules
from keras_transformer.translators import alignments
from keras_transformer.translators.token_ids import pad_to_buckets, tokenize_words, tokenized


class ModelInputs:
    """The rows a `Translator`'s model reads (see the module docstring).

    Args:
        source_tokenizer, target_tokenizer: the translator's tokenizers.
        languages: its `controls.Languages` (a multilingual model's codes;
            MADLAD's `target_in_source`).
        default_languages: the `tf.Variable` `[source, target]` of the codes
            that "" stands for in the graph (a served model assigns it).
        max_source_length: the `tf.Variable` of the source tokens kept,
            the frame (END, a language token) included.
        add_source_end: end each source with the source tokenizer's END.
        pad_ids: `(source pad, target pad)`, the model's.
        decode_length: tokens generated at most.
    """

    def __init__(
        self,
        source_tokenizer,
        target_tokenizer,
        languages,
        default_languages,
        max_source_length,
        *,
        add_source_end,
        pad_ids,
        decode_length,
    ):
        self.source_tokenizer, self.target_tokenizer = source_tokenizer, target_tokenizer
        self.default_languages, self.max_source_length = default_languages, max_source_length
        self.multilingual = bool(languages.codes)
        self.target_in_source = languages.target_in_source  # MADLAD's: the target language is the source's token
        self.forced_first = languages.forced_first  # each output begins with its target language's token
        self.add_source_end = bool(add_source_end)
        # The source's frame: END where the model adds it, a multilingual model's language token.
        self.source_extra = int(add_source_end) + int(self.multilingual)
        self.source_limit = int(max_source_length.numpy()) - self.source_extra
        # The ids that end and pad: the tokenizers' own (0 pads, 3 ends for this package's; an import's differ).
        self.source_end = int(getattr(source_tokenizer, "end_id", decoding.END_ID))
        self.target_end = int(getattr(target_tokenizer, "end_id", decoding.END_ID))
        self.source_pad, self.target_pad = pad_ids
        self.decode_length = decode_length

    # -- in the graph, for a batch `(batch,)` of strings

    def source_ids(self, sentences, controls):
        """Source ids `(batch', width)` in buckets (`pad_to_buckets`); empty sentences all padding (module docstring).

        `controls` are a `controls.Controls` as the graph reads them: its
        languages codes `(batch,)`, "" for the default (`default_languages`).
        """
        batch = tf.shape(sentences)[0]
        ids = tokenized(self.source_tokenizer, sentences)
        ids = tf.cast(ids[:, : self.source_limit], tf.int32)
        if self.add_source_end:
            ids = tf.concat([ids, tf.RaggedTensor.from_tensor(tf.fill([batch, 1], self.source_end))], axis=1)
        if self.multilingual:
            in_source = self.target_in_source
            codes = controls.target_lang if in_source else controls.source_lang
            language = self._language_column(codes, int(in_source))
            last = not in_source and getattr(self.source_tokenizer, "source_position", "first") == "last"
            ids = tf.concat([ids, language] if last else [language, ids], axis=1)
        if self.source_extra:
            return pad_to_buckets(ids, self.max_source_length, self.source_pad)
        empty = ids.row_lengths() == 0
        source = pad_to_buckets(ids, self.max_source_length, self.source_pad)
        return tf.where(tf.pad(empty, [[0, tf.shape(source)[0] - batch]])[:, None], self.source_pad, source)

    def prefix(self, controls, rows):
        """The forced beginning of each output `(rows, decode_length)`, -1 where free: language token, then prefix.

        `controls` as `source_ids` reads them (a "" prefix: none); `rows` is
        the bucketed batch of the source ids; the rows past the sentences
        are free.
        """
        pieces = tf.cast(self.target_tokenizer.tokenize(tf.strings.strip(controls.target_prefix)), tf.int32)
        forced = rules.forced_rows(pieces, self._target_language(controls), tf.concat)
        dense = forced.to_tensor(-1, shape=[None, self.decode_length])
        return tf.pad(dense, [[0, rows - tf.shape(dense)[0]], [0, 0]], constant_values=-1)

    def target_ids(self, targets, controls):
        """The ids a score reads of `targets`: language token (not MADLAD's), pieces, END; ragged, cut to the limit."""
        ids = tokenized(self.target_tokenizer, targets)
        ids = tf.concat([tf.cast(ids, tf.int32), tf.fill([tf.shape(targets)[0], 1], self.target_end)], axis=1)
        ids = rules.forced_rows(ids, self._target_language(controls), tf.concat)  # as the model learnt
        return ids[:, : self.decode_length]

    def source_lengths(self, sentences):
        """Source tokens of each sentence before truncation, the frame included."""
        ids = tokenized(self.source_tokenizer, sentences)
        return tf.cast(ids.row_lengths(), tf.int32) + self.source_extra

    def _target_language(self, controls):
        """The target language's token of each output that begins with one, ragged `(batch, 1)`; else None."""
        return self._language_column(controls.target_lang, 1) if self.forced_first else None

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

    # -- in Python, for one text: the rows of `Translator.align`

    def aligned_source(self, text, code):
        """`(source ids as the model reads them, where its words start, the word of each piece)`."""
        ids, words = alignments.word_pieces(functools.partial(tokenize_words, self.source_tokenizer), text)
        ids, words = ids[: self.source_limit], words[: self.source_limit]
        row = ids + [self.source_end] * int(self.add_source_end)
        if not self.multilingual:
            return row, 0, words
        language = self.source_tokenizer.languages[code]
        if self.target_in_source:
            return [language] + row, 1, words
        if getattr(self.source_tokenizer, "source_position", "first") == "last":
            return row + [language], 0, words
        return [language] + row, 1, words

    def aligned_target(self, text, code, start_id):
        """`(decoder inputs: START, a language, the pieces; the row producing the first piece; their words)`."""
        language = [self.target_tokenizer.languages[code]] if self.forced_first else None
        start = [int(start_id)] + rules.forced_rows([[]], language)[0]
        ids, words = alignments.word_pieces(functools.partial(tokenize_words, self.target_tokenizer), text)
        keep = self.decode_length - len(start) + 1
        return start + ids[: keep - 1], len(start) - 1, words[: keep - 1]
