"""`keras-transformer import`: a checkpoint (OPUS-MT, M2M100, NLLB-200, GPT-2, BERT) as a run every command accepts.

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
        help="import a pretrained checkpoint (OPUS-MT, M2M100, NLLB-200, GPT-2, BERT) as a run directory",
        description=__doc__.split("\n\n")[0] + " " + TRUST_SOURCE,
    )
    parser.add_argument(
        "source",
        type=non_empty,
        help="hf://ORG/NAME[@REVISION] (needs pip install 'keras-transformer[pretrained]'), or a local folder "
        "laid out as a Hugging Face repository (Marian, M2M100/NLLB, GPT-2 or BERT; old layouts too)",
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
        f"Imported {record['source']}{revision} to {args.output} ({_stacks(config.model)}, width "
        f"{config.model.d_model}). {_next_command(config.model, args.output)}",
        file=sys.stderr,
    )
    if record.get("license"):
        terms = " (non-commercial use only)" if "-nc" in record["license"].lower() else ""
        print(f"License: {record['license']}{terms}, recorded in {args.output}/config.json.", file=sys.stderr)
    return 0


def _stacks(model):
    """The layers of each stack the model has: "6 encoder + 6 decoder layers", "12 layers"."""
    if model.architecture == "encoder_decoder":
        return f"{model.num_layers} encoder + {model.decoder_layers} decoder layers"
    return f"{model.num_layers} layers"


def _next_command(model, output):
    """The command that uses a run of this kind: translate (with real language codes), generate, or for a BERT
    classify (a classifier), fill-mask (a masked-LM head) or embed (none)."""
    if model.architecture == "decoder_only":
        return f"Continue a prompt with `keras-transformer generate --model {output} TEXT`."
    if model.architecture == "encoder_only" and model.encoder_head == "classifier":
        return f"Classify texts with `keras-transformer classify --model {output} TEXT`."
    if model.architecture == "encoder_only" and model.encoder_head == "masked_lm":
        return f'Fill masks with `keras-transformer fill-mask --model {output} "TEXT WITH {_mask_token(output)}"`.'
    if model.architecture == "encoder_only":
        return f"Embed sentences with `keras-transformer embed --model {output} --input FILE --output FILE.npy`."
    return f"Translate with `keras-transformer translate --model {output}{_language_flags(output)} TEXT`."


def _mask_token(output):
    """The mask token of an imported masked-LM run's tokenizer (`[MASK]` for BERT's)."""
    from keras_transformer import runs

    tokenizer = runs.load_tokenizers(output).source
    return tokenizer.token(tokenizer.mask_id)


def _language_flags(output):
    """` --source-lang CODE --target-lang CODE` of a multilingual run, each where it has no default; else ""."""
    from keras_transformer import runs
    from keras_transformer.translators.controls import languages_of

    languages = languages_of(*runs.load_tokenizers(output))
    if not languages.codes:
        return ""
    source = languages.source_lang or _likely(languages.codes, ("en", "eng_Latn"))
    flags = "" if languages.source_lang or languages.target_in_source else f" --source-lang {source}"
    if not languages.target_lang:
        others = tuple(code for code in languages.codes if code != source)
        flags += f" --target-lang {_likely(others or languages.codes, ('fr', 'fra_Latn', 'de', 'deu_Latn'))}"
    return flags


def _likely(codes, preferred):
    return next((code for code in preferred if code in codes), codes[0])
