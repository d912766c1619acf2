"""`keras-transformer export`: a training run -> a SavedModel that takes and returns strings, or a CTranslate2 model.

Example::

    keras-transformer export --model saved_models/multi30k-en-de --output saved_models/en-de-export
    keras-transformer export --model saved_models/multi30k-en-de --output saved_models/en-de-ct2 \
        --format ctranslate2 --quantization int8
    keras-transformer export --model saved_models/multi30k-en-de --output saved_models/en-de-litert \
        --format litert --quantization int8

Load it anywhere with TensorFlow and tensorflow-text only::

    import tensorflow as tf, tensorflow_text  # the import registers the tokenizer ops
    translate = tf.saved_model.load("saved_models/en-de-export")
    translate(tf.constant(["A dog runs."]))
"""

import sys

from keras_transformer.commands.arguments import non_empty, non_negative_finite_float, positive_int
from keras_transformer.serving.ctranslate2 import QUANTIZATIONS

FORMATS = ("savedmodel", "ctranslate2", "litert")
SAVEDMODEL_ONLY = {"beam": "--beam", "alpha": "--alpha", "max_length": "--max-length", "no_xla": "--no-xla"}

TRUST_RUN_DIR = (
    "Only export run directories you trust: a model is a program, and the SavedModel "
    "written runs whatever the run's model.keras computes."
)


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "export",
        help="export a training run as a string-in, string-out SavedModel",
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
        choices=FORMATS,
        default="savedmodel",
        help="savedmodel (default): strings in, strings out, TensorFlow only; ctranslate2: a CTranslate2 model "
        "directory (pip install ctranslate2), which takes and returns SentencePiece pieces; litert: a .tflite "
        "with encode, decode_step and tokenize signatures for on-device translation (docs/litert.md)",
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
        type=positive_int,
        default=None,
        help="beam size of the default signature, 1 = greedy (default: the run's, else 4)",
    )
    parser.add_argument(
        "--alpha",
        type=non_negative_finite_float,
        default=None,
        help="length-penalty exponent of the default signature's beam search (default: the run's, else 0.6)",
    )
    parser.add_argument(
        "--max-length",
        type=positive_int,
        default=None,
        help="tokens generated at most (default: the model's max_length)",
    )
    parser.add_argument("--no-xla", action="store_true", help="do not compile the decoder with XLA")
    parser.set_defaults(run=run)


def run(args):
    if args.format == "ctranslate2":
        return _run_ctranslate2(args)
    if args.format == "litert":
        return _run_litert(args)
    if args.quantization is not None:
        raise ValueError("--quantization applies to --format ctranslate2 or litert only")
    from keras_transformer.serving.export import export_run

    translator = export_run(
        args.model,
        args.output,
        overwrite=args.overwrite,
        beam_size=args.beam,
        alpha=args.alpha,
        max_length=args.max_length,
        jit_compile=not args.no_xla,
    )
    print(
        f"Exported {args.model} to {args.output} (beam {int(translator.beam_size.numpy())}). "
        "Load it with `import tensorflow_text` then `tf.saved_model.load`.",
        file=sys.stderr,
    )
    return 0


def _run_ctranslate2(args):
    given = [name for attribute, name in SAVEDMODEL_ONLY.items() if getattr(args, attribute) not in (None, False)]
    if given:
        raise ValueError(
            f"{', '.join(given)} applies to --format savedmodel only: CTranslate2 chooses the search "
            "when it translates (translate_batch(beam_size=..., length_penalty=..., max_decoding_length=...))"
        )
    from keras_transformer.serving.ctranslate2 import convert_run

    convert_run(args.model, args.output, quantization=args.quantization, overwrite=args.overwrite)
    print(
        f"Exported {args.model} to {args.output} (CTranslate2, {args.quantization or 'float32'}). Load it with "
        "`ctranslate2.Translator(path)` and pass SentencePiece pieces.",
        file=sys.stderr,
    )
    return 0


def _run_litert(args):
    if args.no_xla:
        raise ValueError("--no-xla applies to --format savedmodel only: a LiteRT export is not XLA-compiled")
    if args.quantization not in (None, "int8"):
        raise ValueError(f"--format litert takes --quantization int8 only. Received: {args.quantization}")
    from keras_transformer.litert import export_run

    info = export_run(
        args.model,
        args.output,
        quantization=args.quantization,
        overwrite=args.overwrite,
        beam_size=args.beam,
        alpha=args.alpha,
        max_length=args.max_length,
    )
    text = [name for name in ("tokenize", "detokenize") if name in info["signatures"]]
    where = f"{' and '.join(text)} in the .tflite" if text else "tokenizer outside the model (SentencePiece)"
    print(
        f"Exported {args.model} to {args.output} (LiteRT, {info['quantization']}, {where}). "
        "Translate with `keras_transformer.litert.Translator(path)` (pip install 'keras-transformer[litert]').",
        file=sys.stderr,
    )
    return 0
