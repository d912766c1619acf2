"""Fine-tuning: starting a run from another run's model and tokenizer (`train(init_from=...)`).

The run fine-tuned from must be one model's finished run of this package; the
new run's model has its shape (`SHAPE_FIELDS`) and starts from its weights, and
config.json records it (`record`). A multilingual model (an imported M2M100
or NLLB-200) is fine-tuned on one language pair, which the run names
(`languages`) and records, so that it translates into it by default.
"""

import hashlib
import pathlib

from keras_transformer import runs
from keras_transformer.errors import ArgumentError, literal

# What must match between a preset and the run it fine-tunes: the model's shape, and the vocabulary.
SHAPE_FIELDS = (
    "num_layers",
    "num_decoder_layers",
    "d_model",
    "num_heads",
    "d_ff",
    "max_length",
    "norm_first",
    "share_embeddings",
    "tie_output_embedding",
    "vocab_size",
)


def init_run_config(init_from):
    """The `RunConfig` of the run that `init_from` names; a run it cannot start from is a ValueError."""
    path = pathlib.Path(init_from)
    if not runs.is_run_dir(path):
        raise ValueError(
            f"`init_from` must be a run directory of this package (with {runs.CONFIG} and "
            f"{runs.MODEL}). Received: init_from={str(init_from)!r}"
        )
    config = runs.RunConfig.read(path)
    if config.members:
        raise ValueError(
            f"`init_from` must be one model's run, not an ensemble. Received: init_from={str(init_from)!r}"
        )
    if not (path / runs.MODEL).is_file() or config.preset is None:
        raise ValueError(
            f"`init_from` must be a run with a trained {runs.MODEL} and its preset in "
            f"{runs.CONFIG}. Received: init_from={str(init_from)!r}"
        )
    return config


def _shape_setting(preset, field):
    return getattr(preset.data if field == "vocab_size" else preset.model, field)


def check_same_shape(preset, init_config, init_from):
    """A preset whose model differs from the run being fine-tuned is a ValueError naming the fields."""
    recorded = init_config.preset
    differing = [
        f"{field} {_shape_setting(preset, field)!r} (run: {_shape_setting(recorded, field)!r})"
        for field in SHAPE_FIELDS
        if _shape_setting(preset, field) != _shape_setting(recorded, field)
    ]
    if differing:
        raise ValueError(
            f"`preset` {preset.name!r} gives a model other than the one in `init_from`: {', '.join(differing)}. "
            f"Leave `preset` out to fine-tune with the run's ({recorded.name!r}), or change those fields. "
            f"Received: preset={preset.name!r}, init_from={str(init_from)!r}"
        )


def initial_weights(init_from):
    """The weights of `init_from`'s model (its best or averaged epoch); a model that does not load is a ValueError."""
    import keras

    path = pathlib.Path(init_from) / runs.MODEL
    try:
        return keras.saving.load_model(path, compile=False).get_weights()
    except Exception as error:  # noqa: BLE001  (zip, HDF5, JSON, Keras: all mean "corrupt")
        message = (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
        raise ValueError(f"{path}: cannot fine-tune from it, the model does not load: {message}") from None


def set_initial_weights(model, weights, init_from):
    """Sets `model`'s weights to `weights` (`initial_weights`); weights of other shapes are a ValueError."""
    shapes = [tuple(w.shape) for w in weights], [tuple(w.shape) for w in model.get_weights()]
    if shapes[0] != shapes[1]:
        raise ValueError(
            f"`init_from`'s {runs.MODEL} does not fit the model its {runs.CONFIG} describes. "
            f"Received: init_from={str(init_from)!r}"
        )
    model.set_weights(weights)


def record(init_from):
    """What config.json records of the run fine-tuned from: its absolute path and its model's sha256."""
    return {
        "run": str(pathlib.Path(init_from).resolve()),
        "model_sha256": _file_sha256(pathlib.Path(init_from) / runs.MODEL),
    }


def inherited_fields(init_from):
    """What a fine-tuned run keeps of `init_from`'s config.json: how sources end, and the checkpoint it came from."""
    config = runs.RunConfig.read(init_from)
    fields = {"add_source_end": config.add_source_end}
    if config.pretrained is not None:
        fields["pretrained"] = config.pretrained
    return fields


def _file_sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def languages(init_from, source_lang=None, target_lang=None):
    """`{"source_lang", "target_lang"}` of the pairs a run fine-tuned from `init_from` trains on; None: one pair.

    A multilingual model (its tokenizer has language tokens) needs both,
    each one of its codes; a model of one language pair (or a run trained
    from scratch: `init_from` None) takes neither. Anything else is a
    one-line `ArgumentError` that says what to give. Reads `init_from`'s
    tokenizers: call it after the checks that need no TensorFlow.
    """
    given = {"source_lang": source_lang, "target_lang": target_lang}
    named = ", ".join(f"{{{key}={literal(value)}}}" for key, value in given.items() if value is not None)
    if init_from is None:
        if named:
            raise ArgumentError(
                "`source_lang` and `target_lang` choose the pair a multilingual model (an imported M2M100 or NLLB-200 "
                f"run, {{init_from=RUN}}) is fine-tuned on; a run trained from scratch has one. Received: {named}"
            )
        return None
    tokenizers = runs.load_tokenizers(init_from)
    codes = tokenizers.languages
    if not codes:
        if named:
            raise ArgumentError(
                f"{literal(init_from)} translates one language pair: it takes no source or target language. "
                f"Received: {named}"
            )
        return None
    from keras_transformer.translators.controls import Languages, example_code

    ordered = tuple(sorted(codes, key=codes.get))
    if getattr(tokenizers.target, "target_in_source", False):  # MADLAD: the target alone, as its <2xx> token
        if target_lang is None:
            raise ArgumentError(
                f"{literal(init_from)} translates into {len(ordered)} languages, each named by a <2xx> token of its "
                f"source: name the one it is fine-tuned into with {{target_lang={ordered[0]}}}"
            )
        try:
            Languages(ordered, target_in_source=True).check(target_lang, "target_lang")
        except ValueError as error:
            raise ArgumentError(literal(str(error))) from None
        return {"source_lang": None, "target_lang": target_lang}
    if source_lang is None or target_lang is None:
        source_example = source_lang or getattr(tokenizers.source, "source_lang", None) or example_code(ordered)
        target_example = target_lang or example_code(ordered, other_than=source_example)
        example = f"{{source_lang={source_example}}} {{target_lang={target_example}}}"
        raise ArgumentError(
            f"{literal(init_from)} is a multilingual model ({len(ordered)} languages): name the pair it is "
            f"fine-tuned on with both {example} (its own codes). Received: {named or 'neither'}"
        )
    try:
        for key, code in given.items():
            Languages(ordered).check(code, key)
    except ValueError as error:
        raise ArgumentError(literal(str(error))) from None
    return given
