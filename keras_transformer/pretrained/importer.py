"""`import_pretrained`: a Hugging Face checkpoint as a run directory that every command accepts."""

import math
import pathlib

from keras_transformer import __version__, runs
from keras_transformer.config import DataConfig, TrainingConfig
from keras_transformer.files import atomic, destinations
from keras_transformer.models import build_transformer
from keras_transformer.presets import Preset
from keras_transformer.pretrained import weight_blocks
from keras_transformer.pretrained.checkpoints import Checkpoint
from keras_transformer.pretrained.families import family_of
from keras_transformer.pretrained.families.generation import checkpoint_generation
from keras_transformer.pretrained.model_card import MAX_CARD_BYTES, license_of
from keras_transformer.pretrained.sources import resolve
from keras_transformer.pretrained.tensor_names import PLAIN

# Fine-tuning an imported model (`train --init-from RUN`): the peak rate of 5e-5 at the first step (as
# transformers fine-tunes without warmup), then the schedule's slow decay; small batches.
FINE_TUNING_PEAK_RATE = 5e-5
FINE_TUNING = TrainingConfig(warmup_steps=1, label_smoothing=0.1, epochs=3)
# Its batches: pairs up to 128 tokens (or the model's positions, if fewer), padded to the nearest of these.
FINE_TUNING_BUCKETS = (16, 32, 48, 64, 96, 128)
# The source's JSON files a run keeps as their text (each at most this long), so that an export writes them back.
MAX_KEPT_JSON_BYTES = 2**16


def import_pretrained(source, output, *, overwrite=False):
    """Imports the checkpoint at `source` as a run directory at `output`; returns what its config.json records.

    Args:
        source: a folder laid out as a Hugging Face repository (config.json,
            weights, tokenizer files, generation_config.json), or
            `hf://ORG/NAME[@REVISION]`, fetched through huggingface_hub into
            its cache (the `pretrained` extra).
        output: the run directory to write: new, empty, or (with
            `overwrite`) a run of this package, as for `train`.
        overwrite: replace a run of this package at `output`.

    The run holds `model.keras` (the checkpoint's weights in
    `build_transformer`'s layers), the checkpoint's tokenizers, and a
    config.json recording the model, the checkpoint's generation settings
    (`decoding`: generation_config.json's, else those in config.json, as
    transformers reads them), a preset to fine-tune it with, and what it records of the
    checkpoint (`pretrained`): the source, its revision, the sha256 of each
    file read, the text of its JSON files, the names of its tensors beyond
    the layers', and the license its model card states, which an export
    back to the family's format (`export_checkpoint`) writes again. It is
    written beside `output` and swapped in whole: an error or an interrupt
    leaves nothing.

    Raises:
        ValueError: one line naming the problem: an `output` that is not
            this package's to write, a `model_type` this package does not
            import (the supported ones named), a missing file, a pickle that
            names anything but tensors, a stored copy or table that differs
            from what it stands for, a vocabulary that does not cover the
            embedding rows.

    Example:

    >>> import_pretrained("hf://Helsinki-NLP/opus-mt-en-de", "saved_models/opus-mt-en-de")  # doctest: +SKIP
    """
    output = pathlib.Path(output)
    if destinations.check_destination(output, destinations.RUN) == "ours" and not overwrite:
        raise destinations.DestinationInUseError(output, "a run", ["overwrite"])
    origin = resolve(source)
    checkpoint = Checkpoint(origin.folder)
    config_path = origin.folder / "config.json"
    hf_config = checkpoint.json("config.json")
    family = family_of(hf_config, config_path)
    checkpoint.read_as(getattr(family, "LAYOUT", PLAIN))  # the family's names: prefixes, legacy names, buffers
    tensors = checkpoint.tensors()  # the header's shapes: nothing is allocated from the config's numbers alone
    weights = origin.folder / checkpoint.weights_file
    config = family.model_config(hf_config, tensors, str(config_path), str(weights))
    family.check_tensors(config, tensors, str(weights))
    if hasattr(family, "check_buffers"):  # stored copies and tables equal what they stand for
        family.check_buffers(config, checkpoint)
    tokenizers = family.tokenizers(checkpoint, config)
    if hasattr(family, "config_with_tokenizers"):  # special ids that only the tokenizer names (BERT's [CLS])
        config = family.config_with_tokenizers(config, tokenizers)
    if tokenizers.target.pad_id != config.pad_id:
        config = config.replace(target_pad_id=tokenizers.target.pad_id).check()
    generation, where = checkpoint_generation(checkpoint)  # generation_config.json, else config.json's settings
    decoding = family.decoding_config(generation, config, where)
    build = getattr(family, "build_model", build_transformer)
    model = weight_blocks.zero_initialized(lambda: build(config=config))  # the checkpoint sets each weight
    model.decoding_config = decoding  # the checkpoint's generation settings travel with its model.keras
    family.assign_weights(model, checkpoint)
    name = origin.uri.rstrip("/").rsplit("/", 1)[-1]
    license_name = license_of(checkpoint.text("README.md", MAX_CARD_BYTES)) or _family_license(family, checkpoint)
    record = dict(
        source=origin.uri,
        revision=origin.revision,
        model_type=family.MODEL_TYPE,
        files=checkpoint.files,
        json_files={file: text for file, text in checkpoint.texts.items() if len(text) <= MAX_KEPT_JSON_BYTES},
        **({"tensors": family.outer_names(tensors)} if hasattr(family, "outer_names") else {}),
        **({"license": license_name} if license_name else {}),
    )
    run_config = runs.RunConfig(
        created_by=destinations.CREATOR,
        version=__version__,
        preset=_preset(name, config, decoding),
        model=config,
        decoding=decoding,
        add_source_end=family.ADD_SOURCE_END,
        pretrained=record,
        finished=True,
        completed_epochs=0,
    )

    def write(folder):
        runs.write_run(folder, model, run_config, tokenizers)

    atomic.replace_dir(write, output, destinations.remove_previous)
    return run_config


def _family_license(family, checkpoint):
    """The license the family's checkpoints are published under (`license_of`), where it names one."""
    return getattr(family, "license_of", lambda checkpoint: None)(checkpoint)


def _preset(name, config, decoding):
    """The preset `train --init-from` fine-tunes the imported model with: its model, small batches, a low rate."""
    scale = FINE_TUNING_PEAK_RATE * math.sqrt(config.d_model * FINE_TUNING.warmup_steps)
    return Preset(
        name=name,
        model=config,
        data=DataConfig(
            corpus="own-files",
            vocab_size=config.target_vocab_size,
            token_budget=512,
            bucket_boundaries=_buckets(config.max_length),
        ),
        training=FINE_TUNING.replace(learning_rate_scale=scale),
        decoding=decoding,
    )


def _buckets(max_length):
    """`FINE_TUNING_BUCKETS` up to the model's positions: `(16, 32, 48, 64, 96, 128)` for OPUS-MT's 512."""
    longest = min(max_length, FINE_TUNING_BUCKETS[-1])
    return tuple(length for length in FINE_TUNING_BUCKETS if length < longest) + (longest,)
