"""A `Translator`'s streams: its greedy search and sampling, one compiled step at a time, cut into words.

`StreamDecoder` is what `Translator.stream` runs: the translator's own
greedy and sampling searches (the same options, maximum length and ids,
`Translator.search_settings`) as `decoding.SteppedSearch`es, each compiled
on its first stream, fed the source, forced beginning and banned ids that
the translator's own decode gives them (`search_inputs`, `ban_mask`),
and read one id a step into a `translators.streaming.WordCutter`. The last
piece completes the text to the translator's own detokenization of the
result, so the pieces joined are what `greedy` or `sample` returns: the
same ids (the same loop body, and for sampling the same noise from the same
seed) and the same strings. Beam search has no stream here: the
`Translator` gives its result once.

Example:

>>> decoder = StreamDecoder(translator)  # doctest: +SKIP
>>> list(decoder.pieces("greedy", tf.constant(["A dog runs."]), filled_controls))  # doctest: +SKIP
[Piece(text='Ein', ids=(120,)), Piece(text=' Hund', ids=(87,)), Piece(text=' läuft.', ids=(301, 4, 3), ...)]
"""

import functools

import tensorflow as tf

from keras_transformer import decoding
from keras_transformer.translators.stream_text import sampling_noise, starts_word_of, text_of
from keras_transformer.translators.streaming import WordCutter, stepped_pieces


class StreamDecoder:
    """The stepped greedy and sampling searches of `translator` (an `engines.xla.Translator`)."""

    def __init__(self, translator):
        self.translator = translator
        settings = translator.search_settings
        self.length = settings.max_length

        def stepped(beam_size, **sampling):
            chosen = decoding.search_for(beam_size, settings.search.alpha, **sampling, **settings.options)
            return decoding.SteppedSearch(settings.model, chosen, settings.max_length, settings.jit_compile)

        self.searches = {"greedy": stepped(1), "sample": stepped(None, temperature=1.0)}
        self.starts_word = starts_word_of(translator)
        self._text = functools.partial(text_of, translator, self.length)

    @property
    def traces(self):
        """Traces of every stepped search's compiled parts so far (each traces once per shape)."""
        return sum(search.traces for search in self.searches.values())

    def pieces(self, search, sentences, controls, banned_ids, *sampling, cancel=None):
        """`translators.streaming.Piece`s of the one sentence of `sentences` (`"greedy"` or `"sample"`).

        `controls` are a `controls.Controls` as the translator's graph takes
        them (`Controls.filled`: each `(1,)`, "" for the default), and
        `banned_ids` the banned ids. `cancel` (with `is_set()`) is read
        before each step: once set, the last piece has what is pending and
        the reason `"cancelled"`.
        """
        translator = self.translator
        source_ids, prefix = translator.search_inputs(sentences, controls)
        inputs, settings = (), {"ban_mask": translator.ban_mask(banned_ids)}
        if search == "sample":
            temperature, top_k, top_p, seed = sampling
            inputs = (sampling_noise(tf.shape(source_ids)[0], self.length, seed),)
            settings.update(temperature=temperature, top_k=top_k, top_p=top_p)
        steps = self.searches[search].run(source_ids, *inputs, prefix=prefix, **settings)
        cutter = WordCutter(self._text, self.starts_word)
        yield from stepped_pieces(steps, cutter, translator.target_end_id, self._result_text, cancel)

    def _result_text(self, result):
        """The text of a stepped search's `result` (its one row's best output)."""
        return self.translator.detokenize(result.ids[:1, 0]).numpy()[0].decode("utf-8", errors="replace")
