"""Translating many sentences with a loaded model: batched by length, with progress and cut-off flags.

`translator` is what `keras_transformer.export.load` returns (a run
directory's `Translator` or a loaded SavedModel).

Example:

>>> translator = export.load("saved_models/chatbot-ko")
>>> translations, finished = translate_lines_with_status(translator, ["안녕", "오늘 너무 힘들었어"])
"""

import sys
import time


def translate_lines(translator, sentences, batch_size=32, greedy=False, sample=None, progress=None):
    """Translations of `sentences` in input order, batched by similar length.

    `translator` is what `keras_transformer.export.load` returns. `sample` is
    `(temperature, top_k, top_p, seed)` to sample instead.
    """
    return translate_lines_with_status(translator, sentences, batch_size, greedy, sample, progress)[0]


def translate_lines_with_status(translator, sentences, batch_size=32, greedy=False, sample=None, progress=None):
    """`(translations, finished)`: `translate_lines` and, per sentence, whether its translation ended.

    `finished[i]` is False where translation `i` reached the maximum output
    length before END (cut off), None where the model cannot tell (a
    SavedModel exported before the flag existed).
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"`batch_size` must be a positive int. Received: batch_size={batch_size!r}")
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
    results, finished = [""] * len(sentences), [None] * len(sentences)
    for start in range(0, len(order), batch_size):
        batch = order[start : start + batch_size]
        strings = [sentences[i] for i in batch]
        if sample is not None:
            result = translator.sample_with_status(strings, *sample)
        else:
            result = (translator.greedy_with_status if greedy else translator.call_with_status)(strings)
        flags = result["finished"]
        flags = [None] * len(batch) if flags is None else flags.numpy().tolist()
        for i, output, flag in zip(batch, result["translations"].numpy(), flags):
            results[i], finished[i] = output.decode("utf-8"), flag
        if progress is not None:
            progress.update(len(batch))
    if progress is not None:
        progress.close()
    return results, finished


def truncated_sentences(translator, sentences):
    """`(number, tokens, limit)` for each sentence (numbered from 1) longer than the model's source limit."""
    import tensorflow as tf

    if not sentences:
        return []
    limit = int(translator.max_source_length.numpy())
    lengths = translator.source_lengths(tf.constant(sentences)).numpy()
    return [(number, int(length), limit) for number, length in enumerate(lengths, 1) if length > limit]


class Progress:
    """A one-line progress bar on stderr: `translated 300/1000 [=====     ] 41.2 sentences/s`."""

    def __init__(self, total, stream=None):
        self.total, self.done, self.start = total, 0, time.time()
        self.stream = stream or sys.stderr

    def update(self, count):
        self.done += count
        rate = self.done / max(time.time() - self.start, 1e-9)
        filled = int(20 * self.done / max(self.total, 1))
        self.stream.write(
            f"\rtranslated {self.done}/{self.total} [{'=' * filled}{' ' * (20 - filled)}] {rate:.1f} sentences/s"
        )
        self.stream.flush()

    def close(self):
        self.stream.write("\n")
        self.stream.flush()
