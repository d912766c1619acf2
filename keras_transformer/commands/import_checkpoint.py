"""`keras-transformer import`: a checkpoint (OPUS-MT, M2M100, NLLB-200) as a run every command accepts.

Example::

    keras-transformer import hf://Helsinki-NLP/opus-mt-en-de --output saved_models/opus-mt-en-de
    keras-transformer translate --model saved_models/opus-mt-en-de "A dog runs in the park."
    keras-transformer import hf://facebook/nllb-200-distilled-600M --output saved_models/nllb
    keras-transformer translate --model saved_models/nllb --target-lang fra_Latn "A dog runs in the park."
"""

import sys

from keras_transformer.commands.arguments import non_empty

TRUST_SOURCE = (
    "Weights are read from safetensors or HDF5 files, or from PyTorch files (pytorch_model.bin) through an "
    "unpickler that builds tensors and refuses anything else, never a plain unpickle; torch is not needed."
)


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "import",
        help="import a pretrained checkpoint (OPUS-MT, M2M100, NLLB-200) as a run directory",
        description=__doc__.split("\n\n")[0] + " " + TRUST_SOURCE,
    )
    parser.add_argument(
        "source",
        type=non_empty,
        help="hf://ORG/NAME[@REVISION] (needs pip install 'keras-transformer[pretrained]'), or a local folder "
        "laid out as a Hugging Face repository (MarianMT or M2M100/NLLB)",
    )
    parser.add_argument(
        "--output",
        required=True,
        type=non_empty,
        help="the run directory to write: new, empty, or an earlier run (replaced only with --overwrite)",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace the run at --output (never any other folder)")
    parser.set_defaults(run=run)


def run(args):
    from keras_transformer.pretrained import import_pretrained

    config = import_pretrained(args.source, args.output, overwrite=args.overwrite)
    record = config.pretrained
    revision = f" at {record['revision']}" if record.get("revision") else ""
    print(
        f"Imported {record['source']}{revision} to {args.output} ({config.model.num_layers}+"
        f"{config.model.decoder_layers} layers, width {config.model.d_model}). "
        f"Translate with `keras-transformer translate --model {args.output} TEXT`.",
        file=sys.stderr,
    )
    if record.get("license"):
        terms = " (non-commercial use only)" if "-nc" in record["license"].lower() else ""
        print(f"License: {record['license']}{terms}, recorded in {args.output}/config.json.", file=sys.stderr)
    return 0
