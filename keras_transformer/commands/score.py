"""`keras-transformer score`: the log-probability of each target sentence given its source.

Example::

    keras-transformer score --model saved_models/en-de-export --source train.en --target train.de > scores.txt
    keras-transformer score --model saved_models/multi30k-en-de --source a.en --target a.de --output scores.json

One number a line, in input order: the sum of the log-probabilities of the
target's tokens, END included (higher is likelier). Use it to filter a
corpus or to rerank candidate translations. With `--output`, a JSON file
with `log_probs` and `target_lengths` (the tokens scored; a target longer
than the model's maximum output length is scored on its first tokens). A
multilingual model scores targets in `--target-lang` given sources in
`--source-lang`; a target's first token is then its language's.
"""

import json
import sys

from keras_transformer.commands.arguments import (
    TRUST,
    add_engine_argument,
    add_language_arguments,
    add_loadable_model_argument,
    add_workers_argument,
    non_empty,
    positive_int,
)


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "score",
        help="log-probabilities of target sentences given their sources",
        description=__doc__.split("\n\n")[0] + " " + TRUST,
    )
    add_loadable_model_argument(parser)
    add_engine_argument(parser)
    add_language_arguments(parser)
    parser.add_argument("--source", required=True, type=non_empty, help="UTF-8 source file, one sentence a line")
    parser.add_argument("--target", required=True, type=non_empty, help="UTF-8 target file, line-aligned with --source")
    parser.add_argument("--output", type=non_empty, help="write JSON (log_probs, target_lengths) here")
    parser.add_argument("--batch-size", type=positive_int, default=32, help="pairs per batch (default 32)")
    add_workers_argument(parser)
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(run=run)


def run(args):
    from keras_transformer.commands.arguments import open_model, workers_of
    from keras_transformer.commands.translate import read_lines
    from keras_transformer.files import output_files
    from keras_transformer.translators.translation import Progress, score_lines

    output_files.check_outputs(
        [("output", args.output)], [("source", args.source), ("target", args.target)], [("model", args.model)]
    )
    sources, targets = read_lines(args.source), read_lines(args.target)
    if len(sources) != len(targets):
        raise ValueError(f"{args.target} has {len(targets)} lines but {args.source} has {len(sources)}")
    workers = workers_of(args)
    translator = open_model(args, threads=workers)
    progress = None if args.quiet else Progress(len(sources), verb="scored")
    log_probs, lengths = score_lines(translator, sources, targets, args.batch_size, progress=progress, workers=workers)
    if args.output:
        report = {"model": args.model, "source": args.source, "target": args.target}
        if translator.languages.codes:
            report.update(source_lang=translator.languages.source_lang, target_lang=translator.languages.target_lang)
        report.update(log_probs=log_probs, target_lengths=lengths)
        output_files.write_text(args.output, json.dumps(report, indent=1) + "\n")
    else:
        sys.stdout.write("".join(f"{value:.6f}\n" for value in log_probs))
        sys.stdout.flush()
    return 0
