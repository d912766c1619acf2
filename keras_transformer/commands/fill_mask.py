"""`keras-transformer fill-mask`: the likeliest tokens at a text's mask token, by an imported masked LM (BERT).

Example::

    keras-transformer fill-mask --model saved_models/bert-base-uncased "The capital of France is [MASK]."
    keras-transformer fill-mask --model saved_models/bert-base-uncased --top-k 10 --input masked.txt --output top.jsonl

Each text gives one line of JSON: the `--top-k` candidates at its mask
token (`{"score", "token", "token_str", "sequence"}`, likeliest first), as
transformers' `pipeline("fill-mask")` gives them; a list of such lists, one
a mask, where a text holds several. A text without the tokenizer's mask
token is an error naming it. The output is written at the end, whole.
"""

from keras_transformer.commands.arguments import positive_int
from keras_transformer.commands.encoder_io import add_text_arguments, open_encoder, read_texts, write_jsonl


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "fill-mask",
        help="fill the mask token of texts with an imported masked LM (BERT)",
        description=__doc__.split("\n\n")[0],
    )
    add_text_arguments(
        parser, "texts holding the mask token", "write the candidates here, one JSON line a text (default: stdout)"
    )
    parser.add_argument("--top-k", type=positive_int, default=5, help="candidates per mask (default 5)")
    parser.set_defaults(run=run)


def run(args):
    texts = read_texts(args)
    write_jsonl(args.output, open_encoder(args).fill_mask(texts, top_k=args.top_k))
    return 0
