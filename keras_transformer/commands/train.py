"""`keras-transformer train`: train a preset on its corpus and write a run directory."""

import json

from keras_transformer.commands.arguments import (
    SEED_MAX, int_in_range, non_empty, positive_finite_float, positive_int,
)
from keras_transformer.presets import PRESETS


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "train",
        help="train a model on a corpus",
        description="Train a Transformer preset on its corpus. Without arguments it trains "
        "the chatbot-ko preset on the bundled Korean chatbot corpus.",
    )
    parser.add_argument("--preset", default="chatbot-ko", choices=sorted(PRESETS))
    parser.add_argument("--data-dir", type=non_empty, help="folder of the corpus files")
    length = parser.add_mutually_exclusive_group()
    length.add_argument("--epochs", type=positive_int, help="number of epochs (default: the preset's)")
    length.add_argument("--minutes", type=positive_finite_float, help="stop after this many minutes")
    parser.add_argument("--output", type=non_empty, help="run directory: new, empty, or a run of this package "
                        "(default: saved_models/PRESET)")
    parser.add_argument("--resume", action="store_true", help="continue an interrupted run")
    parser.add_argument("--overwrite", action="store_true",
                        help="delete the run at --output and train anew (never any other folder)")
    parser.add_argument("--strategy", default="default", choices=["default", "mirrored", "multi-worker"])
    parser.add_argument("--cpu-devices", type=positive_int, help="split the CPU into N logical devices")
    parser.add_argument(
        "--mixed-precision", nargs="?", const="mixed_float16", choices=["mixed_float16", "mixed_bfloat16"],
        help="compute in float16 (default when given) or bfloat16",
    )
    parser.add_argument("--seed", type=int_in_range(0, SEED_MAX), default=0,
                        help=f"seed of the weights, the shuffling and the dropout, 0 to {SEED_MAX} (default 0)")
    parser.set_defaults(run=run)
    return parser


def run(args):
    from keras_transformer.training import train

    summary = train(
        preset=args.preset, output=args.output, data_dir=args.data_dir, epochs=args.epochs,
        minutes=args.minutes, resume=args.resume, overwrite=args.overwrite, strategy=args.strategy,
        mixed_precision=args.mixed_precision, seed=args.seed, cpu_devices=args.cpu_devices,
    )
    print(json.dumps(summary, indent=2))
    return 0
