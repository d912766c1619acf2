"""`export_checkpoint`: a run as a Hugging Face checkpoint folder, which transformers, CTranslate2 and the Hub read.

The folder is laid out as the family's repositories are (for Marian:
config.json, generation_config.json, model.safetensors, source.spm,
target.spm, vocab.json, tokenizer_config.json; for M2M100 and NLLB-200 the
same JSON files and model.safetensors beside the tokenizer's own files,
tokenizer.json, or vocab.json and sentencepiece.bpe.model), with a model card
(README.md, `model_card`), this package's `keras_transformer.json` and
`MANIFEST.sha256`. An imported run records its source's JSON files and
tensor names (`import_pretrained`): each file the run did not change is
written back byte for byte, the tensors under the source's names, bit for
bit. A run of this package is written as a Marian checkpoint
(`families.writer_of`), or refused in one line naming the option Marian
has no equivalent for.

Example:

>>> export_checkpoint("saved_models/opus-mt-en-de-tuned", "saved_models/opus-mt-en-de-tuned-hf")  # doctest: +SKIP
{'output': 'saved_models/opus-mt-en-de-tuned-hf', 'model_type': 'marian', 'files': [...], 'unchanged': [...]}
"""

import hashlib
import json
import pathlib

from keras_transformer import __version__, runs
from keras_transformer.config import DecodingConfig
from keras_transformer.files import atomic, destinations, manifest
from keras_transformer.pretrained.families import writer_of
from keras_transformer.pretrained.model_card import model_card, read_scores

PROVENANCE = destinations.TRANSFORMERS_PROVENANCE
MARIAN_COMPATIBLE = "--marian-compatible"  # the `train` option of a run that Marian's checkpoints hold
CARD = "README.md"


def export_checkpoint(run, output, *, overwrite=False, beam_size=None, alpha=None, max_length=None, scores=None):
    """Writes the run directory `run` as a Hugging Face checkpoint at `output`, atomically; returns what it wrote.

    Args:
        run: a run directory of one model (not an ensemble): an import, a
            fine-tuned import, or a run this package trained.
        output: the folder to write: new, empty, or (with `overwrite`) an
            earlier checkpoint export of this package; never inside `run`.
        overwrite: replace an earlier checkpoint export at `output`.
        beam_size, alpha, max_length: generation_config.json's `num_beams`,
            `length_penalty` and length (tokens generated, END included)
            instead of the run's decoding settings.
        scores: the JSON file `keras-transformer evaluate --output` wrote, whose
            BLEU and chrF the model card reports.

    Returns:
        `{"output", "model_type", "files", "unchanged"}`: the files written
        (the manifest and `keras_transformer.json` too), and those
        byte-identical to the source checkpoint's.

    Raises:
        ValueError: one line naming `run`, `output`, `scores` or the option
            of the run that the checkpoint's family cannot express.
    """
    run = runs.single_model_run(run, "a checkpoint holds one model. Export one member (e.g. its member-0/ folder)")
    destinations.check_separate(run, output, what="the export")
    if destinations.check_destination(output, destinations.TRANSFORMERS) == "ours" and not overwrite:
        raise destinations.DestinationInUseError(output, "a Hugging Face checkpoint export", ["overwrite"])
    card_scores = None if scores is None else read_scores(scores)
    runs.warn_if_unfinished(run)
    opened = runs.open_run(run)
    family, writer = writer_of(opened.config.pretrained)
    _check_run_fits(run, opened, family, writer)
    decoding = _decoding(opened, beam_size, alpha, max_length)
    files, state = checkpoint_files(opened, writer, decoding)
    card = model_card(opened.config, run.resolve().name, __version__, card_scores, writer.card(state))
    files[CARD] = card.encode("utf-8")
    # What is meant to be uploaded records nothing of this machine's folders (the run's path stays with the run).
    provenance = {"created_by": destinations.CREATOR, "format": destinations.TRANSFORMERS}
    provenance.update(model_type=writer.MODEL_TYPE, version=__version__)

    def write(folder):
        for name, data in files.items():
            (pathlib.Path(folder) / name).parent.mkdir(exist_ok=True)  # a sentence-transformers module's folder
            (pathlib.Path(folder) / name).write_bytes(data)
        (pathlib.Path(folder) / PROVENANCE).write_text(json.dumps(provenance, indent=2) + "\n", encoding="utf-8")
        manifest.write_manifest(folder)

    atomic.replace_dir(write, output, destinations.remove_previous)
    source_files = (opened.config.pretrained or {}).get("files") or {}
    unchanged = sorted(
        name for name, data in files.items() if source_files.get(name) == hashlib.sha256(data).hexdigest()
    )
    written = sorted([*files, PROVENANCE, destinations.MANIFEST])
    return {"output": str(output), "model_type": writer.MODEL_TYPE, "files": written, "unchanged": unchanged}


def checkpoint_files(opened, writer, decoding):
    """`({name: bytes}, state)`: the checkpoint of the opened run (`runs.Run`) in the family of `writer`.

    The source's JSON files, kept by the import, are written back as they
    were where they still read as the run's model, decoding and tokenizers;
    otherwise they are written again from the run, their other fields kept.
    The writer's `tokenizer_files` gives the tokenizer files and the state
    the JSON files are written in (Marian's separate vocabularies, a
    multilingual run's languages).
    """
    from safetensors.numpy import save

    config, model = opened.config, opened.model
    pretrained = config.pretrained or {}
    kept = pretrained.get("json_files") or {}
    tokenizer_files, state = writer.tokenizer_files(opened.tokenizers, model.config, config.languages)
    # What config.json describes: the model (and, for a BERT, the labels its run records).
    described = getattr(writer, "described_model", lambda model_config, run_config: model_config)(model.config, config)
    files = {
        "config.json": _json_file(
            kept.get("config.json"),
            lambda original: writer.reads_as_model(original, described),
            lambda base: writer.hf_config(described, base),
        ),
        "generation_config.json": _json_file(
            kept.get("generation_config.json"),
            lambda original: writer.reads_as_decoding(original, decoding, model.config, state),
            lambda base: writer.generation_config(decoding, model.config, base, state),
        ),
        writer.TOKENIZER_CONFIG: _json_file(
            kept.get(writer.TOKENIZER_CONFIG),
            lambda original: writer.reads_as_tokenizer_config(original, state),
            lambda base: writer.tokenizer_config(model.config, state, base),
        ),
        **tokenizer_files,
        **getattr(writer, "run_files", lambda run_config, model_config: {})(config, model.config),
    }
    files = {name: data for name, data in files.items() if data is not None}  # a BERT has no generation_config.json
    tensors = writer.checkpoint_tensors(model, pretrained.get("tensors"))
    files["model.safetensors"] = save(tensors, metadata={"format": "pt"})
    return files, state


def _json_file(kept_text, reads_as, make):
    """The kept text where it still `reads_as` the run; else `make(the kept fields or None)` as transformers writes."""
    original = None
    if isinstance(kept_text, str):
        try:
            original = json.loads(kept_text)
        except ValueError:
            original = None
    if isinstance(original, dict) and reads_as(original):
        return kept_text.encode("utf-8")
    data = make(original if isinstance(original, dict) else None)
    if data is None:  # a file the family does not have
        return None
    return (json.dumps(data, indent=2, sort_keys=True) + "\n").encode("utf-8")


def _decoding(opened, beam_size, alpha, max_length):
    """The run's decoding settings (its config.json's, else its model's), with the options given instead."""
    decoding = opened.config.decoding or getattr(opened.model, "decoding_config", None) or DecodingConfig()
    changes = dict(beam_size=beam_size, alpha=alpha, max_new_tokens=max_length)
    decoding = decoding.replace(**{name: value for name, value in changes.items() if value is not None})
    model_config = opened.model.config
    return decoding.check(vocab_size=model_config.target_vocab_size, model_max_length=model_config.max_length)


def _check_run_fits(run, opened, family, writer):
    """A one-line `ValueError` where the run's sources or model have no equivalent in the family's checkpoints.

    A run of this package (no `pretrained` source) that fails is told to
    train a new one with `train --marian-compatible`, which has Marian's.
    """
    own = opened.config.pretrained is None
    if own and opened.model.config.architecture != "encoder_decoder":  # gpt-ko, bert-ko: this package's tokenizer
        raise ValueError(
            f"{run} is a {opened.model.config.architecture} run of this package: only imports of GPT-2 "
            "and BERT, and fine-tuned imports, are written back as their checkpoints"
        )
    hint = f"; train a new run with `train {MARIAN_COMPATIBLE}` to export it" if own else ""
    if bool(opened.config.add_source_end) != family.ADD_SOURCE_END:
        raise ValueError(
            f"{run} was trained with add_source_end={bool(opened.config.add_source_end)}, which a {family.FAMILY} "
            f"checkpoint has no equivalent for: its tokenizer {'ends' if family.ADD_SOURCE_END else 'does not end'} "
            f"every source with END{hint}"
        )
    try:
        writer.check_model(opened.model.config)
    except ValueError as error:
        raise ValueError(f"{run}: {error}{hint}") from None
