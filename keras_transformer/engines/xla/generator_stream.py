"""A `Generator`'s streams: its greedy search and sampling, one compiled step at a time, cut into words.

`GeneratorStreams` is what `Generator.stream` runs for a greedy or sampled
continuation: the generator's own search (the same options, ids and, for
sampling, the same search object fed the same settings as scalar tensors)
as a `decoding.SteppedSearch` over the decoder-only model's cached step
(`decoding.prompts`), compiled once per `max_length` and prompt width (a
static shape of the prompt's cache). The prompt is padded as `generate` pads it (a width of a
multiple of 8), alone in its batch, and sampling draws its noise from the
seed as `generate` does for a prompt given alone. Each step's id goes into
a `translators.streaming.WordCutter` (GPT-2's `Ġ` and SentencePiece's `▁`
begin a word), whose text is the generator's own (`Generator._texts`), and
the last piece completes it to the text of the whole continuation: the
pieces joined are what `generate_with_status([prompt], ...)` returns.

Example:

>>> streams = GeneratorStreams(generator)  # doctest: +SKIP
>>> list(streams.pieces(prompt_ids, max_length=20))  # doctest: +SKIP
[Piece(text=' 여행', ids=(412,)), Piece(text=' 가요.', ids=(233, 18, 699), finish_reason='end')]
"""

import threading

import numpy as np
import tensorflow as tf

from keras_transformer import decoding
from keras_transformer.translators.streaming import WordCutter, stepped_pieces, word_starts


class GeneratorStreams:
    """The stepped greedy and sampling searches of `generator` (a `generator.Generator`)."""

    def __init__(self, generator):
        self.generator = generator
        vocab = generator.model.config.target_vocab_size
        pieces = generator.tokenizer.id_to_piece(tf.range(vocab, dtype=tf.int32)).numpy()
        self.starts_word = word_starts(piece.decode("utf-8", errors="replace") for piece in pieces)
        self._searches = {}  # (search, prompt width, max_length) -> its SteppedSearch
        self._lock = threading.Lock()

    @property
    def traces(self):
        """Traces of every stepped search's compiled parts so far (each traces once per shape)."""
        return sum(stepped.traces for stepped in self._searches.values())

    def pieces(self, prompt_ids, max_length, search, noise=None, numbers=None, cancel=None):
        """`translators.streaming.Piece`s of the continuation of one prompt (its ids, a list) by `search`.

        `search` is a `GreedySearch` or a `SamplingSearch` (then `noise`
        `(1, max_length)` and `numbers`, its settings as scalar tensors).
        `cancel` (with `is_set()`) is read before each step: once set, the
        last piece has what is pending and the reason `"cancelled"`.
        """
        generator = self.generator
        ids = generator._padded([prompt_ids], max_length, batch=1)
        inputs = () if noise is None else (noise,)
        steps = self._stepped(search, ids.shape[1], max_length).run(ids, *inputs, **(numbers or {}))
        cutter = WordCutter(lambda ids: generator._texts([ids])[0], self.starts_word)
        end = generator.model.config.end_id
        yield from stepped_pieces(steps, cutter, end, lambda result: self._text(result.ids), cancel)

    def _stepped(self, search, width, max_length):
        """The `SteppedSearch` of prompts `width` wide: one each, as a prompt's width is a static shape."""
        key = (search, width, max_length)
        with self._lock:  # streams of a server run on several threads
            if key not in self._searches:
                model, jit_compile = self.generator.model, self.generator.jit_compile
                self._searches[key] = decoding.SteppedSearch(model, search, max_length, jit_compile)
            return self._searches[key]

    def _text(self, ids):
        """The text of the best output of a one-prompt search's ids `(1, beams, length)`."""
        return self.generator._texts([np.asarray(ids)[0, 0]])[0]
