"""What `embed`, `classify` and `fill-mask` share: texts from arguments, a file or stdin; JSON Lines out.

Each command reads its texts from its arguments, else `--input FILE`, else
stdin (one text a line, UTF-8 without NUL), checks its `--output` before
the model loads (`files.output_files`), runs the run directory's `Encoder`
(`opener.open_encoder`), and writes every result at once at the end: a file
through a temporary file and a rename, so an error leaves nothing written.
"""

import json
import sys

from keras_transformer.commands.arguments import non_empty, positive_int
from keras_transformer.commands.translate import read_lines
from keras_transformer.input_rules import check_sentence


def add_text_arguments(parser, what, output_help):
    """The texts (`texts`, `--input`), `--model`, `--output` and `--batch-size` of an encoder command."""
    parser.add_argument("texts", nargs="*", help=f"{what}; without them, --input or stdin (one a line)")
    parser.add_argument(
        "--model",
        required=True,
        type=non_empty,
        help="the run directory of an imported BERT (keras-transformer import)",
    )
    parser.add_argument("--input", type=non_empty, help="a UTF-8 file, one text a line (default: stdin)")
    parser.add_argument("--output", type=non_empty, help=output_help)
    parser.add_argument("--batch-size", type=positive_int, default=32, help="texts per model call (default 32)")


def read_texts(args, outputs=()):
    """The command's texts, after its outputs were checked against its input and model (nothing loaded yet)."""
    from keras_transformer.files import output_files

    output_files.check_outputs([("output", args.output), *outputs], [("input", args.input)], [("model", args.model)])
    texts = [check_sentence(text, f"argument {number}") for number, text in enumerate(args.texts, 1)]
    return texts or read_lines(args.input)


def open_encoder(args):
    """The `Encoder` of `--model`, batching `--batch-size` texts."""
    from keras_transformer.opener import open_encoder as open_run_encoder

    return open_run_encoder(args.model, batch_size=args.batch_size)


def write_jsonl(path, rows):
    """Each of `rows` as one line of JSON (UTF-8, not ASCII-escaped), to `path` or stdout."""
    text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    if path:
        from keras_transformer.files import output_files

        output_files.write_text(path, text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
