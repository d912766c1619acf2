"""`keras-transformer evaluate`: translate a source file and score it with sacreBLEU and chrF.

Example::

    keras-transformer evaluate --model saved_models/multi30k-en-de \\
        --source test_2016_flickr.en --reference test_2016_flickr.de --beam 4 --output scores.json

(the Multi30k test set: after a `train --preset multi30k-en-de`, under
`~/tensorflow_datasets/downloads/extracted/keras_transformer/multi30k_task1/`).
A multilingual model translates from `--source-lang` into `--target-lang`
(`keras-transformer translate --help`), which the scores record.
"""

import json
import sys

from keras_transformer.commands.arguments import TRUST, non_empty
from keras_transformer.commands.translate import add_model_arguments


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "evaluate",
        help="BLEU and chrF of a model on a test set",
        description=__doc__.split("\n\n")[0] + " " + TRUST,
    )
    add_model_arguments(parser)
    parser.add_argument("--source", required=True, type=non_empty, help="UTF-8 source file, one sentence a line")
    parser.add_argument(
        "--reference",
        required=True,
        nargs="+",
        type=non_empty,
        help="UTF-8 reference file(s), line-aligned with --source",
    )
    parser.add_argument("--output", type=non_empty, help="write the scores here as JSON")
    parser.add_argument("--hypotheses", type=non_empty, help="also write the translations here")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(run=run)


def run(args):
    from keras_transformer import evaluation
    from keras_transformer.commands.arguments import open_model, workers_of
    from keras_transformer.commands.translate import print_cut_off_lines, warn_truncated
    from keras_transformer.files import output_files, text_files
    from keras_transformer.translators.translation import Progress, translate_lines_with_status

    output_files.check_outputs(
        [("output", args.output), ("hypotheses", args.hypotheses)],
        [("source", args.source), *(("reference", path) for path in args.reference)],
        [("model", args.model)],
    )
    sources = text_files.reject_nul(evaluation.read_lines(args.source), args.source)
    references = [evaluation.read_lines(path) for path in args.reference]
    for path, refs in zip(args.reference, references):
        if len(refs) != len(sources):
            raise ValueError(f"{path} has {len(refs)} lines but {args.source} has {len(sources)}")
    options = dict(beam_size=args.beam, alpha=args.alpha, compact=args.compact)
    workers = workers_of(args)
    translator = open_model(args, threads=workers, **options)
    warn_truncated(translator, sources)
    progress = None if args.quiet else Progress(len(sources))
    hypotheses, finished = translate_lines_with_status(
        translator, sources, args.batch_size, progress=progress, workers=workers, banned=args.ban
    )
    print_cut_off_lines(finished)
    scores = evaluation.score(hypotheses, references)
    beam = int(translator.beam_size.numpy())
    scores.update(
        model=str(args.model), source=str(args.source), reference=[str(p) for p in args.reference], beam_size=beam
    )
    languages = translator.languages
    if languages.codes:  # a multilingual model: which way it translated
        scores.update(source_lang=languages.source_lang, target_lang=languages.target_lang)
    print(evaluation.format_scores(scores), file=sys.stderr)
    print(json.dumps(scores, indent=2, ensure_ascii=False))
    if args.hypotheses:
        output_files.write_text(args.hypotheses, "".join(h + "\n" for h in hypotheses))
    if args.output:
        output_files.write_text(args.output, json.dumps(scores, indent=2, ensure_ascii=False))
    return 0
