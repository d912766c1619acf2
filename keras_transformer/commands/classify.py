"""`keras-transformer classify`: the labels of texts by an imported classifier (BertForSequenceClassification).

Example::

    keras-transformer classify --model saved_models/bert-sentiment "What a lovely day"
    keras-transformer classify --model saved_models/bert-nli --pairs --input pairs.tsv --output labels.jsonl

Each text gives one line of JSON: every label of the checkpoint's
`id2label` with its score, highest first, as transformers'
`pipeline("text-classification", top_k=None)` gives them. With `--pairs`,
each text is `first<TAB>second`, read as BERT reads two segments. The
output is written at the end, whole: an error leaves nothing.
"""

from keras_transformer.commands.encoder_io import add_text_arguments, open_encoder, read_texts, write_jsonl


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "classify",
        help="label texts with an imported classifier (BERT)",
        description=__doc__.split("\n\n")[0],
    )
    add_text_arguments(parser, "texts to classify", "write the labels here, one JSON line a text (default: stdout)")
    parser.add_argument("--pairs", action="store_true", help="each text is two, separated by a tab: TEXT<TAB>TEXT_PAIR")
    parser.set_defaults(run=run)


def run(args):
    texts = read_texts(args)
    if args.pairs:
        texts = [_pair(text, number) for number, text in enumerate(texts, 1)]
    write_jsonl(args.output, open_encoder(args).classify(texts))
    return 0


def _pair(text, number):
    parts = text.split("\t")
    if len(parts) != 2:
        raise ValueError(f"text {number}: --pairs reads TEXT<TAB>TEXT_PAIR; it holds {len(parts) - 1} tabs")
    return tuple(parts)
