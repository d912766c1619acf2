"""`keras-transformer translate`: sentences from the command line, a file or stdin.

Example::

    keras-transformer translate --model saved_models/multi30k-en-de "A dog runs."
    keras-transformer translate --model saved_models/en-de-export --input test.en > test.hyp.de
    echo "A dog runs." | keras-transformer translate --model saved_models/multi30k-en-de --beam 1

Input must be UTF-8 text without NUL bytes (the tokenizer would turn a NUL
into an unknown token): a line or argument with one is an error naming it.
A warning on stderr names each sentence longer than the model's source limit
(truncated) and each whose translation reached the maximum output length
before END (cut off).
"""

import sys
import time

from keras_transformer.commands.arguments import (
    TRUST, non_empty, non_negative_finite_float, positive_int,
)

SENTENCES_HELP = "sentences to translate; without them, --input or stdin (one sentence a line)"


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "translate", help="translate sentences with a trained or exported model",
        description=__doc__.split("\n\n")[0] + " " + TRUST,
    )
    parser.add_argument("sentences", nargs="*", help=SENTENCES_HELP)
    add_model_arguments(parser)
    parser.add_argument("--input", type=non_empty, help="a UTF-8 file, one sentence a line (default: stdin)")
    parser.add_argument("--output", type=non_empty, help="write the translations here (default: stdout)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(run=run)


def add_model_arguments(parser):
    """`--model`, `--beam`, `--alpha`, `--batch-size`, shared with `evaluate`."""
    parser.add_argument("--model", required=True, type=non_empty,
                        help="a training run directory or an exported SavedModel (one you trust)")
    parser.add_argument("--beam", type=positive_int, default=None,
                        help="beam size, 1 = greedy (default: the model's, else 4)")
    parser.add_argument("--alpha", type=non_negative_finite_float, default=None,
                        help="length-penalty exponent of the beam search (default 0.6)")
    parser.add_argument("--batch-size", type=positive_int, default=32, help="sentences per batch (default 32)")


def run(args):
    from keras_transformer.export import load

    sentences = [check_utf8(s, f"argument {i}") for i, s in enumerate(args.sentences, 1)]
    from_file = not sentences
    if from_file:
        sentences = read_lines(args.input)
    translator = load(args.model, beam_size=args.beam, alpha=args.alpha)
    warn_truncated(translator, sentences)
    progress = None if args.quiet or not from_file else Progress(len(sentences))
    translations, finished = translate_lines_with_status(translator, sentences, args.batch_size,
                                                         greedy=args.beam == 1, progress=progress)
    warn_cut_off(finished)
    text = "".join(t + "\n" for t in translations)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as handle:
            handle.write(text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    return 0


def check_utf8(text, where):
    """`text` as it is, or a `ValueError` if it holds bytes that were not UTF-8 or a NUL byte."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{where} is not valid UTF-8 text") from None
    if "\0" in text:
        raise ValueError(f"{where} contains a NUL byte, which the model cannot translate; remove it")
    return text


def read_lines(path=None):
    """Lines of a UTF-8 file (or of stdin when `path` is None), newlines stripped; no NUL bytes."""
    from keras_transformer import text_files

    if path is None:
        lines = text_files.split_lines(text_files.decode_utf8(sys.stdin.buffer.read(), "stdin"))
    else:
        lines = text_files.read_lines(path)
    return reject_nul(lines, "stdin" if path is None else path)


def reject_nul(lines, name):
    """`lines` as they are, or a `ValueError` naming `name` and the first line with a NUL byte."""
    for number, line in enumerate(lines, 1):
        if "\0" in line:
            raise ValueError(f"{name}, line {number}: contains a NUL byte, which the model cannot "
                             "translate; remove it")
    return lines


def warn_truncated(translator, sentences):
    """Warns on stderr for each sentence longer than the model's source limit."""
    import tensorflow as tf

    if not sentences:
        return
    limit = int(translator.max_source_length.numpy())
    lengths = translator.source_lengths(tf.constant(sentences)).numpy()
    for number, length in enumerate(lengths, 1):
        if length > limit:
            print(f"warning: sentence {number} has {length} tokens; truncated to {limit}",
                  file=sys.stderr)


def warn_cut_off(finished):
    """Warns on stderr for each sentence whose translation `finished` flags as cut off (False)."""
    for number, done in enumerate(finished, 1):
        if done is False:
            print(f"warning: sentence {number}: the translation reached the maximum output length "
                  "before END; it is cut off", file=sys.stderr)


def translate_lines(translator, sentences, batch_size=32, greedy=False, sample=None, progress=None):
    """Translations of `sentences` in input order, batched by similar length.

    `translator` is what `keras_transformer.export.load` returns. `sample` is
    `(temperature, top_k, top_p, seed)` to sample instead.
    """
    return translate_lines_with_status(translator, sentences, batch_size, greedy, sample, progress)[0]


def translate_lines_with_status(translator, sentences, batch_size=32, greedy=False, sample=None,
                                progress=None):
    """`(translations, finished)`: `translate_lines` and, per sentence, whether its translation ended.

    `finished[i]` is False where translation `i` reached the maximum output
    length before END (cut off), None where the model cannot tell (a
    SavedModel exported before the flag existed).
    """
    if batch_size < 1:
        raise ValueError(f"`--batch-size` must be positive. Received: {batch_size}")
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
    results, finished = [""] * len(sentences), [None] * len(sentences)
    for start in range(0, len(order), batch_size):
        batch = order[start:start + batch_size]
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


class Progress:
    """A one-line progress bar on stderr: `translated 300/1000 [=====     ] 41.2 sentences/s`."""

    def __init__(self, total, stream=None):
        self.total, self.done, self.start = total, 0, time.time()
        self.stream = stream or sys.stderr

    def update(self, count):
        self.done += count
        rate = self.done / max(time.time() - self.start, 1e-9)
        filled = int(20 * self.done / max(self.total, 1))
        self.stream.write(f"\rtranslated {self.done}/{self.total} "
                          f"[{'=' * filled}{' ' * (20 - filled)}] {rate:.1f} sentences/s")
        self.stream.flush()

    def close(self):
        self.stream.write("\n")
        self.stream.flush()
