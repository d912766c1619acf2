"""Translating and scoring many sentences with a loaded model: batched by length, with progress.

`translator` is what `keras_transformer.open_translator` returns (any
`translators.TranslatorInterface`). Each helper takes the controls of
`translators.controls` and gives them to every call: `source_lang` and
`target_lang` (a multilingual model's codes) and, where it decodes,
`target_prefix` (the forced beginning of each output), each None (the
translator's default), a str for every sentence, or a list with one per
sentence, which follows its sentence into its batch; and `banned`, a list of
words for every sentence (`translators.banned_words`).

Example:

>>> translator = open_translator("saved_models/chatbot-ko")
>>> translations, finished = translate_lines_with_status(translator, ["안녕", "오늘 너무 힘들었어"])
>>> nllb = open_translator("saved_models/nllb", source_lang="eng_Latn")
>>> translate_lines(nllb, ["A dog runs.", "Two cats."], target_lang=["fra_Latn", "deu_Latn"])
"""

import sys
import time
from concurrent.futures import ThreadPoolExecutor

from keras_transformer.errors import ArgumentError


def translate_lines(
    translator,
    sentences,
    batch_size=32,
    sample=None,
    progress=None,
    workers=1,
    *,
    source_lang=None,
    target_lang=None,
    target_prefix=None,
    banned=None,
):
    """Translations of `sentences` in input order, batched by similar length.

    `translator` is what `keras_transformer.open_translator` returns; it
    decodes with its own search (greedy where it was opened with
    `beam_size=1`). `sample` is `(temperature, top_k, top_p, seed)` to
    sample instead. `workers` threads
    translate batches side by side, as CTranslate2's `inter_threads` does:
    each batch's program uses every core, but two may use them better
    (docs/performance.md). The translations are the same. `source_lang`,
    `target_lang` and `target_prefix`: see the module docstring.
    """
    controls = dict(source_lang=source_lang, target_lang=target_lang, target_prefix=target_prefix, banned=banned)
    return translate_lines_with_status(translator, sentences, batch_size, sample, progress, workers, **controls)[0]


def translate_lines_with_status(
    translator,
    sentences,
    batch_size=32,
    sample=None,
    progress=None,
    workers=1,
    *,
    source_lang=None,
    target_lang=None,
    target_prefix=None,
    banned=None,
):
    """`(translations, finished)`: `translate_lines` and, per sentence, whether its translation ended.

    `finished[i]` is False where translation `i` reached the maximum output
    length before END (cut off), None where the model cannot tell (a
    SavedModel exported before the flag existed).
    """
    controls = _given(len(sentences), source_lang=source_lang, target_lang=target_lang, target_prefix=target_prefix)
    controls = {**controls, "banned": banned} if banned else controls

    def translate(batch):
        strings, given = [sentences[i] for i in batch], _batch_controls(controls, batch)
        if sample is not None:
            result = translator.sample_with_status(strings, *sample, **given)
        else:
            result = translator.call_with_status(strings, **given)
        flags = result["finished"]
        flags = [None] * len(strings) if flags is None else flags.numpy().tolist()
        return [(text(output), flag) for output, flag in zip(result["translations"].numpy(), flags)]

    results = _in_length_batches(
        translate, range(len(sentences)), batch_size, progress, key=_length(sentences), workers=workers
    )
    return [text for text, _ in results], [flag for _, flag in results]


def nbest_lines(
    translator,
    sentences,
    n_best,
    batch_size=32,
    progress=None,
    workers=1,
    *,
    source_lang=None,
    target_lang=None,
    target_prefix=None,
    banned=None,
):
    """The `n_best` best translations of each sentence: a list, per sentence, of `(score, translation, finished)`.

    Best first, as the beam search ranks them (`translator.nbest`); `n_best` must
    be at most the translator's beam size. `workers`, `source_lang`,
    `target_lang` and `target_prefix` as in `translate_lines`.

    Example:

    >>> nbest_lines(translator, ["A dog runs."], n_best=2)
    [[(-0.21, 'Ein Hund läuft.', True), (-0.93, 'Ein Hund rennt.', True)]]
    """
    beam_size = int(translator.beam_size.numpy())
    if isinstance(n_best, bool) or not isinstance(n_best, int) or not 1 <= n_best <= beam_size:
        raise ArgumentError(f"{{n_best={n_best!r}}} must be between 1 and the beam size, {{beam_size={beam_size}}}")
    controls = _given(len(sentences), source_lang=source_lang, target_lang=target_lang, target_prefix=target_prefix)
    controls = {**controls, "banned": banned} if banned else controls

    def best(batch):
        result = translator.nbest([sentences[i] for i in batch], **_batch_controls(controls, batch))
        rows = zip(result["scores"].numpy(), result["translations"].numpy(), result["finished"].numpy())
        return [
            [(float(score), text(output), bool(done)) for score, output, done in list(zip(*row))[:n_best]]
            for row in rows
        ]

    return _in_length_batches(
        best, range(len(sentences)), batch_size, progress, key=_length(sentences), workers=workers
    )


def score_lines(
    translator, sources, targets, batch_size=32, progress=None, workers=1, *, source_lang=None, target_lang=None
):
    """`(log_probs, target_lengths)`: each target's log-probability given its source (`translator.score`).

    The sum over the target's tokens, END included, and that token count.
    `workers`, `source_lang` and `target_lang` as in `translate_lines` (a
    multilingual model's target starts with its language token, which
    counts as one of the target's tokens).

    Example:

    >>> log_probs, lengths = score_lines(translator, ["A dog runs."], ["Ein Hund läuft."])
    """
    if len(sources) != len(targets):
        raise ValueError(
            f"`sources` and `targets` must hold as many sentences. Received: {len(sources)} sources "
            f"and {len(targets)} targets"
        )

    languages = _given(len(sources), source_lang=source_lang, target_lang=target_lang)

    def score(batch):
        given = _batch_controls(languages, batch)
        result = translator.score([sources[i] for i in batch], [targets[i] for i in batch], **given)
        return list(zip(result["log_probs"].numpy().tolist(), result["target_lengths"].numpy().tolist()))

    results = _in_length_batches(
        score, range(len(sources)), batch_size, progress, key=_length(sources), workers=workers
    )
    return [log_prob for log_prob, _ in results], [length for _, length in results]


def _given(count, **controls):
    """The controls given (None ones left out), each a str or a list of `count`; a `ValueError` naming a bad one."""
    given = {name: value for name, value in controls.items() if value is not None}
    for name, value in given.items():
        if isinstance(value, (list, tuple)) and len(value) != count:
            raise ValueError(
                f"`{name}` must be a str or hold one entry per sentence: {count}. Received: {len(value)} entries"
            )
    return given


def _batch_controls(controls, batch):
    """`controls` for the sentences at the indices `batch`: a list's entries at those indices, else as it is.

    `banned` words are the whole call's: every batch gets them all.
    """
    return {
        name: [value[i] for i in batch] if isinstance(value, (list, tuple)) and name != "banned" else value
        for name, value in controls.items()
    }


def _length(sentences):
    return lambda i: len(sentences[i])


def _in_length_batches(function, items, batch_size, progress, key=len, workers=1):
    """`function(batch) -> one result per item`, over batches of similar `key`; results in input order.

    With `workers` > 1, that many threads run `function` on batches side by side.
    """
    for name, value in (("batch_size", batch_size), ("workers", workers)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"`{name}` must be a positive int. Received: {name}={value!r}")
    order = sorted(range(len(items)), key=lambda i: key(items[i]))
    batches = [order[start : start + batch_size] for start in range(0, len(order), batch_size)]
    results = [None] * len(items)
    for batch, outputs in zip(batches, _mapped(function, [[items[i] for i in b] for b in batches], workers)):
        for i, result in zip(batch, outputs):
            results[i] = result
        if progress is not None:
            progress.update(len(batch))
    if progress is not None:
        progress.close()
    return results


def _mapped(function, batches, workers):
    """`function` of each batch, in order: in this thread, or on `workers` threads.

    On an error or an interrupt the batches not yet started are dropped, and
    the error comes at once (the running batches end on their own).
    """
    if workers == 1:
        yield from map(function, batches)
        return
    pool = ThreadPoolExecutor(workers, thread_name_prefix="translate")
    try:
        yield from pool.map(function, batches)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def text(output):
    """A translation's bytes as str. A weak model may end on part of a UTF-8 character: U+FFFD stands for it."""
    return output.decode("utf-8", errors="replace")


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

    def __init__(self, total, stream=None, verb="translated"):
        self.total, self.done, self.start = total, 0, time.time()
        self.stream = stream or sys.stderr
        self.verb = verb

    def update(self, count):
        self.done += count
        rate = self.done / max(time.time() - self.start, 1e-9)
        filled = int(20 * self.done / max(self.total, 1))
        self.stream.write(
            f"\r{self.verb} {self.done}/{self.total} [{'=' * filled}{' ' * (20 - filled)}] {rate:.1f} sentences/s"
        )
        self.stream.flush()

    def close(self):
        self.stream.write("\n")
        self.stream.flush()
