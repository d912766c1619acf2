"""A run's `config.json`, typed: `RunConfig`, read with every field checked, written atomically.

Example:

>>> config = RunConfig.read("saved_models/chatbot-ko")  # doctest: +SKIP
>>> config.model.d_model, config.decoding.alpha, config.finished  # doctest: +SKIP
(256, 0.6, True)
"""

import dataclasses
import json
import pathlib
import warnings

from keras_transformer.config import DataConfig, DecodingConfig, ModelConfig, TrainingConfig
from keras_transformer.errors import ArgumentError, KerasTransformerWarning
from keras_transformer.files import atomic
from keras_transformer.presets import Preset
from keras_transformer.runs.layout import CONFIG, MODEL

LANGUAGE_KEYS = ("source_lang", "target_lang")  # what config.json's `languages` holds


class UnfinishedRunWarning(KerasTransformerWarning):
    """A run that has not finished training (interrupted, or still running) is being exported."""


def warn_if_unfinished(path):
    """Warns with `UnfinishedRunWarning` when the run at `path` has not finished: what it holds, how to finish."""
    config = RunConfig.read(path)
    if config.finished:
        return
    epochs, best = config.completed_epochs, config.best_epoch
    held = f"after epoch {epochs}" if isinstance(epochs, int) else "partway"
    best_text = f", its best model is from epoch {best}" if best is not None else ""
    warnings.warn(
        UnfinishedRunWarning(
            f"{path} is an unfinished run (stopped {held}{best_text}): exporting that model; "
            "`keras-transformer train --resume` finishes it"
        ),
        stacklevel=3,
    )


def model_paths(path):
    """The run's `model.keras` files: its own, or one per member of an ensemble.

    An ensemble whose members have not all finished training is a
    `ValueError` that says which member to resume.
    """
    path = pathlib.Path(path)
    members = RunConfig.read(path).members
    if not members:
        return [path / MODEL]
    missing = [member for member in members if not (path / member / MODEL).is_file()]
    if missing:
        raise ArgumentError(
            f"{path} is an unfinished ensemble: {', '.join(missing)} has no {MODEL} yet. Train it with {{resume=True}}."
        )
    return [path / member / MODEL for member in members]


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """A run's config.json, typed: its preset, model and decoding parts, and how far training got.

    `read(path)` checks the file (`read_config`) and types its sections;
    `write(path)` writes it back atomically, with the keys it does not know
    (written by a later version) as they were. Runs written by earlier
    versions read too (`config_fields.LEGACY_NAMES`).

    Example:

    >>> config = RunConfig.read("saved_models/chatbot-ko")  # doctest: +SKIP
    >>> config.model.d_model, config.decoding.alpha, config.finished  # doctest: +SKIP
    (256, 0.6, True)
    """

    preset: Preset = None
    model: ModelConfig = None
    decoding: DecodingConfig = None
    created_by: str = None
    version: str = None
    data_dir: str = None
    seed: int = None
    strategy: str = None
    mixed_precision: str = None
    corpus_files: dict = None
    init_from: dict = None
    pretrained: dict = None  # an imported checkpoint's source, revision and files (`keras_transformer.pretrained`)
    members: tuple = ()
    add_source_end: bool = False
    languages: dict = None  # a multilingual model fine-tuned on one pair: its `source_lang` and `target_lang`
    train_data_sha256: str = None
    finished: bool = False
    completed_epochs: object = 0  # an int; an ensemble's: one per member
    best_val_loss: object = None
    best_epoch: object = None  # an epoch, or "averaged"
    train_minutes: float = 0.0
    cooldown: tuple = None  # (first step, last step) of the learning rate's cooldown
    averaged: dict = None
    classifier: dict = None  # an encoder-only preset's fine-tuned classifier: its held-out accuracy (`bert-ko`)
    perplexity: dict = None  # a fine-tuned language model's held-out perplexity, before and after (GPT-2)
    files: dict = None  # the record of the files the run wrote (`files.run_files`)
    extra: dict = dataclasses.field(default_factory=dict)  # keys of a later version, kept

    _SECTIONS = {"preset": Preset, "model": ModelConfig, "decoding": DecodingConfig}

    @classmethod
    def read(cls, path):
        """The config.json of the run at `path`; a missing, corrupt or malformed one is an error naming it."""
        config_path = pathlib.Path(path) / CONFIG
        return cls.from_dict(read_config(path), str(config_path))

    @classmethod
    def from_dict(cls, data, where=CONFIG):
        fields = {field.name for field in dataclasses.fields(cls)} - {"extra"}
        known = {}
        for name, value in data.items():
            if name in cls._SECTIONS and value is not None:
                value = cls._SECTIONS[name].from_dict(value, f"{where}: `{name}`")
            elif name in ("members", "cooldown") and isinstance(value, list):
                value = tuple(value)
            known[name] = value
        extra = {name: known.pop(name) for name in list(known) if name not in fields}
        return cls(**known, extra=extra)

    def to_dict(self):
        """The JSON object config.json holds (None fields left out, the unknown keys kept)."""
        data = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name == "extra" or value is None:
                continue
            if hasattr(value, "to_dict"):
                value = value.to_dict()
            data[field.name] = list(value) if isinstance(value, tuple) else value
        return {**data, **self.extra}

    def replace(self, **changes):
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)

    def write(self, path):
        """Writes this as the config.json of the run at `path`, atomically."""
        atomic.write_json(pathlib.Path(path) / CONFIG, self.to_dict())


def update_config(path, **changes):
    """`RunConfig.read(path).replace(**changes).write(path)`: updates fields of the run's config.json."""
    config = RunConfig.read(path).replace(**changes)
    config.write(path)
    return config


# The sections of config.json the commands read, and the parts of the configuration that type them.
SECTIONS = {
    "model": (ModelConfig,),
    "decoding": (DecodingConfig,),
    "preset": (ModelConfig, DataConfig, TrainingConfig, DecodingConfig),
}


def check_config_fields(config, config_path):
    """`ValueError` naming `config_path` and the field, for a field of a section that its kind refuses.

    Each field is checked by the kind the configuration table gives it
    (`keras_transformer.config`); absent fields pass (runs of earlier
    versions wrote fewer), and so do fields no part knows (`from_dict` names
    those).

    Example:

    >>> check_config_fields({"decoding": {"beam_size": "abc"}}, "runs/a/config.json")
    Traceback (most recent call last):
    ...
    ValueError: runs/a/config.json: `decoding.beam_size` must be an int in [1, 128]. Received: 'abc'
    """
    for section, parts in SECTIONS.items():
        values = config.get(section)
        if not isinstance(values, dict):
            continue
        for name, value in values.items():
            part = next((part for part in parts if part.field(name) is not None), None)
            if part is not None and not part.takes(name, value):
                received = repr(value) if not isinstance(value, int) or abs(value) < 10**80 else "a huge int"
                received = received if len(received) <= 80 else received[:77] + "..."
                words = part.field(name).metadata["kind"].words
                raise ValueError(f"{config_path}: `{section}.{name}` must be {words}. Received: {received}")


def read_config(path):
    """The run's `config.json` as a dict; a clear error when it is missing or corrupt.

    Besides its JSON, the sections the commands read (`preset`, `model`,
    `decoding`, `members`) must have their shape, and their fields their
    kind (`check_config_fields`): a `ValueError` names the file and the field.
    """
    config_path = pathlib.Path(path) / CONFIG
    if not config_path.is_file():
        raise FileNotFoundError(f"{path} is not a training run: it has no {CONFIG}")
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except ValueError as error:  # not JSON, not UTF-8, or an integer of more digits than Python reads
        raise ValueError(f"{config_path} is corrupt: {error}") from None
    if not isinstance(config, dict):
        raise ValueError(f"{config_path} is corrupt: expected a JSON object, found {type(config).__name__}")
    for section in ("preset", "model", "decoding"):
        if section in config and not isinstance(config[section], dict):
            raise ValueError(
                f"{config_path} is corrupt: `{section}` must be a JSON object. Received: {section}={config[section]!r}"[
                    :300
                ]
            )
    members = config.get("members")
    if members is not None and not (isinstance(members, list) and all(isinstance(m, str) for m in members)):
        raise ValueError(
            f"{config_path} is corrupt: `members` must be a list of folder names. Received: members={members!r}"[:300]
        )
    languages = config.get("languages")
    if languages is not None and not (
        isinstance(languages, dict)
        and all(isinstance(languages.get(key), (str, type(None))) for key in LANGUAGE_KEYS)
        and set(languages) <= set(LANGUAGE_KEYS)
    ):
        raise ValueError(
            f"{config_path} is corrupt: `languages` must be an object of `source_lang` and `target_lang` codes. "
            f"Received: languages={languages!r}"[:300]
        )
    check_config_fields(config, config_path)
    return config
