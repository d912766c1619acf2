"""`keras-transformer translate`: sentences from the command line, a file or stdin.

Example::

    keras-transformer translate --model saved_models/multi30k-en-de "A dog runs."
    keras-transformer translate --model saved_models/en-de-export --input test.en > test.hyp.de
    echo "A dog runs." | keras-transformer translate --model saved_models/multi30k-en-de --beam 1
    keras-transformer translate --model saved_models/en-de-export --n-best 4 "A dog runs."
    keras-transformer translate --model saved_models/nllb --source-lang eng_Latn --target-lang fra_Latn "A dog runs."
    keras-transformer translate --model saved_models/opus-mt-en-de --prefix "Der Hund" "The dog runs."

A multilingual model (M2M100, NLLB-200) translates from `--source-lang` into
`--target-lang`, codes of its own (`fra_Latn` for NLLB-200, `fr` for
M2M100); one without a default target language needs `--target-lang`.
`--prefix` forces the beginning of every translation: decoding continues
after it.

With `--n-best K`, each sentence gives K lines `index<TAB>score<TAB>translation`
(index from 0, in input order; best first; score the length-normalised
log-probability that the beam search ranks by).

Input must be UTF-8 text without NUL bytes (the tokenizer would turn a NUL
into an unknown token): a line or argument with one is an error naming it.
A warning on stderr names each sentence longer than the model's source limit
(truncated) and each whose translation reached the maximum output length
before END (cut off).
"""

import sys

from keras_transformer.commands.arguments import (
    TRUST,
    add_ban_argument,
    add_engine_argument,
    add_language_arguments,
    add_loadable_model_argument,
    add_prefix_argument,
    add_workers_argument,
    non_empty,
    open_model,
    positive_int,
    setting_type,
    workers_of,
)
from keras_transformer.commands.streaming import add_stream_argument, streamed_lines
from keras_transformer.config import DecodingConfig
from keras_transformer.input_rules import check_sentence
from keras_transformer.translators.translation import (
    Progress,
    nbest_lines,
    translate_lines_with_status,
    truncated_sentences,
)

SENTENCES_HELP = "sentences to translate; without them, --input or stdin (one sentence a line)"


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "translate",
        help="translate sentences with a trained or exported model",
        description=__doc__.split("\n\n")[0] + " " + TRUST,
    )
    parser.add_argument("sentences", nargs="*", help=SENTENCES_HELP)
    add_model_arguments(parser)
    add_prefix_argument(parser)
    parser.add_argument("--input", type=non_empty, help="a UTF-8 file, one sentence a line (default: stdin)")
    parser.add_argument("--output", type=non_empty, help="write the translations here (default: stdout)")
    parser.add_argument(
        "--n-best",
        type=positive_int,
        default=None,
        help="print the K best translations of each sentence, as index<TAB>score<TAB>translation (K <= --beam)",
    )
    parser.add_argument(
        "--alignments",
        action="store_true",
        help="print each translation as 'translation ||| 0-0 1-2 ...': for each output word j, the source word i "
        "it attends to most (Moses' i-j pairs, 0-based; the XLA engine on a run directory; docs/translating.md); "
        "with --stream, printed once each sentence ends",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    add_stream_argument(parser, "one sentence at a time, to stdout; default off")
    parser.set_defaults(run=run)


def add_model_arguments(parser):
    """`--model`, `--engine`, the languages, `--beam`, `--alpha`, `--batch-size`, `--compact`, `--workers`, `--ban`.

    Shared with `evaluate`.
    """
    add_loadable_model_argument(parser)
    add_engine_argument(parser)
    add_language_arguments(parser)
    parser.add_argument(
        "--beam",
        type=setting_type(DecodingConfig, "beam_size"),
        default=None,
        help="beam size, 1 = greedy (default: the model's, else 4)",
    )
    parser.add_argument(
        "--alpha",
        type=setting_type(DecodingConfig, "alpha"),
        default=None,
        help="length-penalty exponent of the beam search (default: the model's, else 0.6)",
    )
    parser.add_argument("--batch-size", type=positive_int, default=32, help="sentences per batch (default 32)")
    parser.add_argument(
        "--compact",
        action="store_true",
        help="drop finished sentences from each batch as it decodes: the same translations, faster on large "
        "inputs, but more to compile before the first ones (a run directory only)",
    )
    add_workers_argument(parser)
    add_ban_argument(parser)


def run(args):
    from keras_transformer.files import output_files

    output_files.check_outputs([("output", args.output)], [("input", args.input)], [("model", args.model)])
    sentences = [check_sentence(s, f"argument {i}") for i, s in enumerate(args.sentences, 1)]
    from_file = not sentences
    if from_file:
        sentences = read_lines(args.input)
    options = dict(beam_size=args.beam, alpha=args.alpha, compact=args.compact)
    workers = workers_of(args)
    translator = open_model(args, threads=workers, **options)
    if args.alignments:
        check_alignments(translator, args)
    warn_truncated(translator, sentences)
    if args.stream:
        return streamed_lines(translator, sentences, args)
    progress = None if args.quiet or not from_file else Progress(len(sentences))
    if args.n_best:
        text = _nbest_text(translator, sentences, args, progress, workers)
    else:
        translations, finished = translate_lines_with_status(
            translator,
            sentences,
            args.batch_size,
            progress=progress,
            workers=workers,
            target_prefix=args.prefix,
            banned=args.ban,
        )
        print_cut_off_lines(finished)
        if args.alignments:
            translations = aligned_lines(translator, sentences, translations, args.batch_size)
        text = "".join(t + "\n" for t in translations)
    if args.output:
        output_files.write_text(args.output, text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    return 0


def _nbest_text(translator, sentences, args, progress, workers):
    """`index<TAB>score<TAB>translation` lines, `args.n_best` per sentence, best first."""
    rows = nbest_lines(
        translator,
        sentences,
        args.n_best,
        args.batch_size,
        progress=progress,
        workers=workers,
        target_prefix=args.prefix,
        banned=args.ban,
    )
    print_cut_off_lines([hypotheses[0][2] for hypotheses in rows])
    return "".join(
        f"{index}\t{score:.6f}\t{text}\n" for index, hypotheses in enumerate(rows) for score, text, _ in hypotheses
    )


def check_alignments(translator, args):
    """Refuses `--alignments` with `--n-best`, or on an engine without the model's attention, before translating."""
    if args.n_best:
        raise ValueError("--alignments prints one translation a line: give it without --n-best")
    translator.align([], [])  # the engine's one-line refusal, if it has no attention to read


def aligned_lines(translator, sentences, translations, batch_size):
    """`translation ||| i-j ...` for each translation (`translators.alignments`)."""
    from keras_transformer.translators.alignments import format_pairs

    lines = []
    for start in range(0, len(sentences), batch_size):
        chunk = slice(start, start + batch_size)
        pairs = translator.align(sentences[chunk], translations[chunk])
        lines += [f"{text} ||| {format_pairs(row)}" for text, row in zip(translations[chunk], pairs)]
    return lines


def read_lines(path=None):
    """Lines of a UTF-8 file (or of stdin when `path` is None), newlines stripped; no NUL bytes."""
    from keras_transformer.files import text_files

    if path is None:
        lines = text_files.split_lines(text_files.decode_utf8(sys.stdin.buffer.read(), "stdin"))
    else:
        lines = text_files.read_lines(path)
    return text_files.reject_nul(lines, "stdin" if path is None else path)


def warn_truncated(translator, sentences):
    """Warns on stderr for each sentence longer than the model's source limit."""
    for number, length, limit in truncated_sentences(translator, sentences):
        print(f"warning: sentence {number} has {length} tokens; truncated to {limit}", file=sys.stderr)


def print_cut_off_lines(finished):
    """Warns on stderr for each sentence whose translation `finished` flags as cut off (False)."""
    for number, done in enumerate(finished, 1):
        if done is False:
            print(
                f"warning: sentence {number}: the translation reached the maximum output length "
                "before END; it is cut off",
                file=sys.stderr,
            )
