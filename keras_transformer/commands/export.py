"""`keras-transformer export`: a run -> a string-in, string-out SavedModel, a CTranslate2 or LiteRT model, a checkpoint.

Example::

    keras-transformer export --model saved_models/multi30k-en-de --output saved_models/en-de-export
    keras-transformer export --model saved_models/multi30k-en-de --output saved_models/en-de-ct2 \
        --format ctranslate2 --quantization int8
    keras-transformer export --model saved_models/multi30k-en-de --output saved_models/en-de-litert \
        --format litert --quantization int8
    keras-transformer export --model saved_models/opus-mt-en-de-tuned --output saved_models/opus-mt-en-de-tuned-hf \
        --format transformers --scores scores.json

Load it anywhere with TensorFlow and tensorflow-text only::

    import tensorflow as tf, tensorflow_text  # the import registers the tokenizer ops
    translate = tf.saved_model.load("saved_models/en-de-export")
    translate(tf.constant(["A dog runs."]))
"""

import sys

from keras_transformer import export_formats
from keras_transformer.commands.arguments import non_empty, setting_type

TRUST_RUN_DIR = (
    "Only export run directories you trust: a model is a program, and the SavedModel "
    "written runs whatever the run's model.keras computes."
)


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "export",
        help="export a run as a SavedModel, a CTranslate2 or LiteRT model, or a Hugging Face checkpoint",
        description=__doc__.split("\n\n")[0] + " " + TRUST_RUN_DIR,
    )
    formats = export_formats.FORMATS
    parser.add_argument("--model", required=True, type=non_empty, help="a training run directory (one you trust)")
    parser.add_argument(
        "--output",
        required=True,
        type=non_empty,
        help="the directory to write: new, empty, or an earlier export of the same format "
        "(replaced only with --overwrite)",
    )
    parser.add_argument(
        "--format",
        choices=tuple(formats),
        default="savedmodel",
        help="; ".join(f"{name}: {each.description}" for name, each in formats.items()) + " (default: savedmodel)",
    )
    parser.add_argument(
        "--overwrite", action="store_true", help="replace the earlier export at --output (never any other folder)"
    )
    for option in export_formats.all_options():  # each format's settings, from the export registry
        if option.flag is not None:
            parser.add_argument(option.flag, dest=option.name, default=None, help=option.help, **_reading(option))
    parser.set_defaults(run=run)


def _reading(option):
    """How the flag of `option` (an `export_formats.Option`) reads its value: argparse's keywords."""
    if option.switch is not None:
        return {"action": "store_const", "const": option.switch}
    named = option.metavar or option.flag.lstrip("-").replace("-", "_").upper()
    if option.setting is not None:
        return {"type": setting_type(*option.setting), "metavar": named}
    if option.choices is not None:
        return {"choices": option.choices}
    return {"type": non_empty, "metavar": named}


def run(args):
    settings = {option.name: getattr(args, option.name, None) for option in export_formats.all_options()}
    print(
        export_formats.export_run(args.model, args.output, args.format, overwrite=args.overwrite, **settings),
        file=sys.stderr,
    )
    return 0
