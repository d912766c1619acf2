"""`keras-transformer embed`: sentence embeddings from an imported encoder (BERT), as sentence-transformers computes.

Example::

    keras-transformer embed --model saved_models/all-MiniLM-L6-v2 --input sentences.txt --output embeddings.npy
    keras-transformer embed --model saved_models/all-MiniLM-L6-v2 "A dog runs." "Un chien court."
    cat sentences.txt | keras-transformer embed --model RUN --format jsonl --output embeddings.jsonl

Each text gives one row: a float32 array `(texts, width)` in a `.npy` file
(`--format npy`, the default for an `--output` ending in `.npy`), or one
JSON list of numbers a line (`--format jsonl`, the default otherwise, and
on stdout). The pooling is the run's own, from the checkpoint's
sentence-transformers folder (mean, CLS or max, normalized or not); a run
imported without one embeds by the mean of its token states, with a
warning. The file is written at the end, whole: an error leaves nothing.
"""

import io

from keras_transformer.commands.encoder_io import add_text_arguments, open_encoder, read_texts, write_jsonl

FORMATS = ("npy", "jsonl")


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "embed",
        help="sentence embeddings from an imported encoder (BERT, sentence-transformers)",
        description=__doc__.split("\n\n")[0],
    )
    add_text_arguments(
        parser,
        "texts to embed",
        "write the embeddings here: FILE.npy (a float32 array) or JSON Lines (default: stdout)",
    )
    parser.add_argument(
        "--format", choices=FORMATS, help="npy or jsonl (default: npy for an --output ending in .npy, else jsonl)"
    )
    parser.set_defaults(run=run)


def run(args):
    import numpy as np

    form = args.format or ("npy" if args.output and args.output.endswith(".npy") else "jsonl")
    if form == "npy" and not args.output:
        raise ValueError("--format npy writes a file: give --output FILE.npy (stdout takes --format jsonl)")
    texts = read_texts(args)
    embeddings = open_encoder(args).embed(texts)
    if form == "jsonl":
        write_jsonl(args.output, embeddings.tolist())
        return 0
    from keras_transformer.files import output_files

    buffer = io.BytesIO()
    np.save(buffer, embeddings)
    output_files.write_bytes(args.output, buffer.getvalue())
    return 0
