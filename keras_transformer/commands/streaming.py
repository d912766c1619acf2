"""Printing a translation as it is decoded: `--stream` of `chat` and `translate`.

Example::

    keras-transformer chat --model saved_models/korean-chatbot            # streams on a terminal
    keras-transformer translate --model saved_models/multi30k-en-de --stream "A dog runs."
"""

import argparse
import sys


def add_stream_argument(parser, default_help):
    """`--stream` / `--no-stream`: print the words of each answer as they are decoded."""
    parser.add_argument(
        "--stream",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=f"print the words as they are decoded ({default_help}); beam search prints its answer at the end",
    )


def print_stream(pieces, out=None, ending=None):
    """Prints each `translators.streaming.Piece`'s text as it comes, then a newline; the last piece's reason.

    `ending(text)`, if given, is printed before the newline once the whole
    text is decoded (`translate --alignments`: its ` ||| i-j` pairs). Ctrl-C
    stops the answer where it is: the words printed stay, the decoding stops
    at its next step, and the reason is `"cancelled"`.
    """
    out = out or sys.stdout
    reason, texts = "cancelled", []
    try:
        for piece in pieces:
            out.write(piece.text)
            out.flush()
            texts.append(piece.text)
            reason = piece.finish_reason or reason
    except KeyboardInterrupt:
        pieces.close()
        out.write(" [stopped]")
        reason = "cancelled"
    if ending is not None and reason != "cancelled":
        out.write(ending("".join(texts)))
    out.write("\n")
    out.flush()
    return reason


def streamed_lines(translator, sentences, args):
    """`translate --stream`: each sentence's translation printed as it is decoded, one line each.

    With `--alignments`, each line ends with its ` ||| i-j` pairs, printed
    once the sentence's translation has ended (`translate`'s format).
    """
    from keras_transformer.errors import ArgumentError

    for flag, value in (("--output", args.output), ("--n-best", args.n_best)):
        if value:
            raise ArgumentError(f"--stream prints to stdout as it decodes: it takes no {flag}")
    for number, sentence in enumerate(sentences, 1):
        text = sentence.decode("utf-8") if isinstance(sentence, bytes) else sentence
        pieces = translator.stream_pieces(text, target_prefix=args.prefix, banned=args.ban)
        if print_stream(pieces, ending=_alignments(translator, text) if args.alignments else None) == "length":
            print(
                f"warning: sentence {number}: the translation reached the maximum output length before END; "
                "it is cut off",
                file=sys.stderr,
            )
    return 0


def _alignments(translator, source):
    """`translate --alignments --stream`: the ` ||| i-j ...` pairs of a translation of `source`, once it ends."""
    from keras_transformer.translators.alignments import format_pairs

    return lambda translation: f" ||| {format_pairs(translator.align([source], [translation])[0])}"
