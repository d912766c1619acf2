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

from keras_transformer.commands.arguments import non_empty, setting_type
from keras_transformer.config import DecodingConfig
from keras_transformer.export_formats import FORMATS
from keras_transformer.serving.ctranslate2 import QUANTIZATIONS

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
        choices=tuple(FORMATS),
        default="savedmodel",
        help="; ".join(f"{name}: {each.description}" for name, each in FORMATS.items()) + " (default: savedmodel)",
    )
    parser.add_argument(
        "--quantization",
        choices=QUANTIZATIONS,
        default=None,
        help="--format ctranslate2 or litert (int8 only): the weight type (default: float32, as trained)",
    )
    parser.add_argument(
        "--overwrite", action="store_true", help="replace the earlier export at --output (never any other folder)"
    )
    parser.add_argument(
        "--beam",
        type=setting_type(DecodingConfig, "beam_size"),
        default=None,
        help="beam size of the default signature, 1 = greedy; transformers: generation_config.json's num_beams "
        "(default: the run's, else 4)",
    )
    parser.add_argument(
        "--alpha",
        type=setting_type(DecodingConfig, "alpha"),
        default=None,
        help="length-penalty exponent of the default signature's beam search (default: the run's, else 0.6)",
    )
    parser.add_argument(
        "--max-length",
        type=setting_type(DecodingConfig, "max_new_tokens"),
        default=None,
        help="tokens generated at most, END included (default: the run's, else the model's max_length)",
    )
    parser.add_argument("--no-xla", action="store_true", help="do not compile the decoder with XLA")
    parser.add_argument(
        "--scores",
        type=non_empty,
        default=None,
        metavar="FILE",
        help="--format transformers: the JSON of `evaluate --output`, whose BLEU and chrF the model card reports",
    )
    parser.set_defaults(run=run)


def run(args):
    from keras_transformer.export_formats import export_run

    options = dict(
        beam_size=args.beam,
        alpha=args.alpha,
        max_length=args.max_length,
        jit_compile=False if args.no_xla else None,
        quantization=args.quantization,
        scores=args.scores,
    )
    print(export_run(args.model, args.output, args.format, overwrite=args.overwrite, **options), file=sys.stderr)
    return 0
