"""`keras-transformer train`: train a preset on its corpus and write a run directory."""

import contextlib
import json

from keras_transformer.commands.arguments import (
    SEED_MAX,
    int_in_range,
    non_empty,
    positive_finite_float,
    positive_int,
    setting_type,
)
from keras_transformer.config import TrainingConfig
from keras_transformer.presets import PRESETS


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "train",
        help="train a model on a corpus",
        description="Train a Transformer preset on its corpus (downloaded and cached on first use), on your "
        "own files (--train-source/--train-target or --train-tsv), or fine-tune a trained run (--init-from). "
        "Without arguments it trains the chatbot-ko preset on the bundled Korean chatbot corpus.",
    )
    parser.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        help="the model and recipe (default: --init-from's preset, else chatbot-ko)",
    )
    parser.add_argument(
        "--data-dir",
        type=non_empty,
        help="folder of the preset's corpus files, or the tensorflow-datasets data dir to "
        "download them into (default: $KERAS_TRANSFORMER_DATA_DIR, else $TFDS_DATA_DIR "
        "or ~/tensorflow_datasets); $KERAS_TRANSFORMER_MIRROR=URL downloads URL/FILE_NAME; a download "
        "that receives nothing for $KERAS_TRANSFORMER_DOWNLOAD_TIMEOUT seconds (default 60) fails",
    )
    _add_corpus_arguments(parser)
    _add_run_arguments(parser)
    parser.set_defaults(run=run)
    return parser


def _add_corpus_arguments(parser):
    """The corpus: the user's own files, or a run to fine-tune."""
    own = parser.add_argument_group(
        "your own corpus",
        "train the preset's model and recipe on your files instead of its corpus: two "
        "line-aligned UTF-8 files, or one source<TAB>target file; without validation files a seeded 1% "
        "(100 to 3,000 pairs) of the training pairs is held out",
    )
    own.add_argument("--train-source", type=non_empty, metavar="FILE", help="source sentences, one a line")
    own.add_argument("--train-target", type=non_empty, metavar="FILE", help="their translations, line by line")
    own.add_argument("--train-tsv", type=non_empty, metavar="FILE", help="source<TAB>target pairs, one a line")
    own.add_argument("--valid-source", type=non_empty, metavar="FILE", help="validation sources (optional)")
    own.add_argument("--valid-target", type=non_empty, metavar="FILE", help="their translations")
    own.add_argument("--valid-tsv", type=non_empty, metavar="FILE", help="validation pairs as a TSV (optional)")
    own.add_argument("--train-text", type=non_empty, metavar="FILE", help="a language model's texts, one a line")
    own.add_argument("--valid-text", type=non_empty, metavar="FILE", help="its validation texts (optional)")
    parser.add_argument(
        "--init-from",
        type=non_empty,
        metavar="RUN",
        help="fine-tune: start from run directory RUN's best weights and reuse its tokenizer",
    )
    for side, example in (("source", "kor_Hang"), ("target", "eng_Latn")):
        parser.add_argument(
            f"--{side}-lang",
            type=non_empty,
            metavar="CODE",
            help=f"with --init-from a multilingual run (an imported M2M100 or NLLB-200): the {side} language of the "
            f"pairs, in its codes (e.g. {example}; M2M100: {example[:2]}); needed there, refused elsewhere. The run "
            "then translates from and into them by default",
        )


def _add_run_arguments(parser):
    """How long, where, and on what devices and precision the run trains."""
    length = parser.add_mutually_exclusive_group()
    length.add_argument(
        "--epochs", type=setting_type(TrainingConfig, "epochs"), help="number of epochs (default: the preset's)"
    )
    length.add_argument("--minutes", type=positive_finite_float, help="stop after this many minutes")
    parser.add_argument(
        "--output",
        type=non_empty,
        help="run directory: new, empty, or a run of this package "
        "(default: saved_models/PRESET, or saved_models/PRESET-finetuned with --init-from)",
    )
    parser.add_argument("--resume", action="store_true", help="continue an interrupted run")
    parser.add_argument(
        "--marian-compatible",
        action="store_true",
        help="a new run that `export --format transformers` writes as a Marian (OPUS-MT) checkpoint: its sources "
        "end with END and its LayerNorms' epsilon is 1e-5 (this package's defaults: no END, 1e-6)",
    )
    parser.add_argument(
        "--overwrite", action="store_true", help="delete the run at --output and train anew (never any other folder)"
    )
    parser.add_argument("--strategy", default="default", choices=["default", "mirrored", "multi-worker"])
    parser.add_argument("--cpu-devices", type=positive_int, help="split the CPU into N logical devices")
    parser.add_argument(
        "--mixed-precision",
        nargs="?",
        const="mixed_float16",
        choices=["mixed_float16", "mixed_bfloat16"],
        help="compute in float16 (default when given) or bfloat16 (on a CPU with bf16 units: the matmuls "
        "in TensorFlow's bf16 kernels, the rest XLA-compiled; without them, a warning: float32 is faster)",
    )
    parser.add_argument(
        "--seed",
        type=int_in_range(0, SEED_MAX),
        default=0,
        help=(
            f"seed of the weights, the shuffling and the dropout, 0 to {SEED_MAX} (default 0); a preset's "
            "subword sampling draws anew every run"
        ),
    )


def _split_files(args, split, source, target, tsv):
    """`(source, target)`, a TSV path, `{"text": path}` or None for one split; flags that do not go together
    are a ValueError."""
    text = getattr(args, f"{split}_text")  # --train-text, --valid-text: a language model's texts
    flags = {f"--{split}-source": source, f"--{split}-target": target, f"--{split}-tsv": tsv, f"--{split}-text": text}
    given = [flag for flag, value in flags.items() if value is not None]
    if not given:
        return None
    if text is not None and len(given) > 1:
        raise ValueError(f"--{split}-text (texts) replaces pairs; give one or the other. Received: {', '.join(given)}")
    if text is not None:
        return {"text": text}
    if tsv is not None and len(given) > 1:
        raise ValueError(
            f"--{split}-tsv replaces --{split}-source and --{split}-target; give one or the other. "
            f"Received: {', '.join(given)}"
        )
    if tsv is None and len(given) == 1:
        missing = f"--{split}-target" if source is not None else f"--{split}-source"
        raise ValueError(f"{given[0]} needs {missing} (two line-aligned files). Received: {given[0]} only")
    return tsv if tsv is not None else (source, target)


def corpus_files(args):
    """The `corpus_files` argument of `train` from the --train-*/--valid-* flags, or None."""
    files = {
        "train": _split_files(args, "train", args.train_source, args.train_target, args.train_tsv),
        "validation": _split_files(args, "valid", args.valid_source, args.valid_target, args.valid_tsv),
    }
    if files["train"] is None:
        if files["validation"] is not None:
            raise ValueError(
                "--valid-source/--valid-target/--valid-tsv go with --train-source/--train-target "
                "or --train-tsv (the preset's own corpus has its validation split)"
            )
        return None
    if args.data_dir is not None:
        raise ValueError(
            "--data-dir locates a preset's corpus; leave it out with --train-source/--train-tsv. "
            f"Received: --data-dir {args.data_dir}"
        )
    return {split: paths for split, paths in files.items() if paths is not None}


@contextlib.contextmanager
def validation_files_as_flags():
    """Reports a library `ValueError` that names `corpus_files['validation']` with the flags that give them."""
    from keras_transformer.datasets.corpora import VALIDATION_FILES

    try:
        yield
    except ValueError as error:
        if VALIDATION_FILES not in str(error):
            raise
        flags = "--valid-tsv, or --valid-source and --valid-target"
        raise ValueError(str(error).replace(VALIDATION_FILES, flags)) from None


def run(args):
    from keras_transformer.training import train

    with validation_files_as_flags():
        summary = _train(train, args)
    print(json.dumps(summary, indent=2))
    return 0


def _train(train, args):
    return train(
        preset=args.preset,
        output=args.output,
        data_dir=args.data_dir,
        corpus_files=corpus_files(args),
        init_from=args.init_from,
        source_lang=args.source_lang,
        target_lang=args.target_lang,
        epochs=args.epochs,
        minutes=args.minutes,
        resume=args.resume,
        overwrite=args.overwrite,
        strategy=args.strategy,
        mixed_precision=args.mixed_precision,
        seed=args.seed,
        cpu_devices=args.cpu_devices,
        marian_compatible=args.marian_compatible,
    )
