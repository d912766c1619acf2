"""The layout of a training run's output directory, shared by all commands.

`keras-transformer train --output saved_models/NAME` writes::

    saved_models/NAME/
      config.json           preset, model hyper-parameters, max lengths, decoding defaults
      model.keras           the best model by validation loss (written atomically)
      tokenizers/source/    the source tokenizer (`SubwordTokenizer.save`)
      tokenizers/target/    the target tokenizer (the same files when shared)
      history.csv           one row per epoch
      logs/                 TensorBoard
      backup/               `--resume` state (removed when the run finishes)
      snapshots/            the last epochs' weights, for averaging (removed when the run finishes)

config.json's `"files"` is the run's record of what this package wrote in
it: each file's path, size and sha256 (`files.run_files.FileRecorder`,
after every epoch). Only those files are ever deleted or replaced.

An ensemble preset (`Preset.ensemble = n`) writes one run directory per
member, `member-0/` ... `member-{n-1}/` (each as above), beside the
ensemble's own `config.json` (listing them under `"members"`) and
`tokenizers/`; the commands load all members from the ensemble's directory.

`keras-transformer export --model saved_models/NAME --output saved_models/NAME-export`
writes a SavedModel directory (`saved_model.pb`) that needs no project code.
"""

import json
import math
import pathlib
import warnings

from keras_transformer.errors import ArgumentError, KerasTransformerWarning
from keras_transformer.files import atomic, run_files

CONFIG = run_files.CONFIG
MODEL = "model.keras"
SOURCE_TOKENIZER = "tokenizers/source"
TARGET_TOKENIZER = "tokenizers/target"
HISTORY = "history.csv"
LOGS = "logs"
BACKUP = "backup"
SNAPSHOTS = "snapshots"
FILES, REWRITTEN = run_files.FILES, run_files.REWRITTEN  # the record of the files a run wrote


class UnfinishedRunWarning(KerasTransformerWarning):
    """A run that has not finished training (interrupted, or still running) is being exported."""


def warn_if_unfinished(path):
    """Warns with `UnfinishedRunWarning` when the run at `path` has not finished: what it holds, how to finish."""
    config = read_config(path)
    if config.get("finished") is not False:
        return
    epochs, best = config.get("completed_epochs"), config.get("best_epoch")
    held = f"after epoch {epochs}" if isinstance(epochs, int) else "partway"
    best_text = f", its best model is from epoch {best}" if best is not None else ""
    warnings.warn(
        UnfinishedRunWarning(
            f"{path} is an unfinished run (stopped {held}{best_text}): exporting that model; "
            "`keras-transformer train --resume` finishes it"
        ),
        stacklevel=3,
    )


def is_run_dir(path):
    """Whether `path` holds a training run (a `config.json` and a `model.keras`, or members with one)."""
    path = pathlib.Path(path)
    return (path / CONFIG).is_file() and ((path / MODEL).is_file() or any(path.glob(f"member-*/{MODEL}")))


def model_paths(path):
    """The run's `model.keras` files: its own, or one per member of an ensemble.

    An ensemble whose members have not all finished training is a
    `ValueError` that says which member to resume.
    """
    path = pathlib.Path(path)
    members = read_config(path).get("members")
    if not members:
        return [path / MODEL]
    missing = [member for member in members if not (path / member / MODEL).is_file()]
    if missing:
        raise ArgumentError(
            f"{path} is an unfinished ensemble: {', '.join(missing)} has no {MODEL} yet. Train it with {{resume=True}}."
        )
    return [path / member / MODEL for member in members]


def is_saved_model(path):
    """Whether `path` is an exported SavedModel directory."""
    return (pathlib.Path(path) / "saved_model.pb").is_file()


def _positive_int(value):
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value < 2**31


def _rate(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < 1


def _length_penalty(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(float(value)) and value >= 0
    except OverflowError:  # an int past the float range
        return False


_POSITIVE_INT = ("a positive integer", _positive_int)
_RATE = ("a number in [0, 1)", _rate)
_BOOL = ("true or false", lambda value: isinstance(value, bool))
_DECODING_FIELDS = {
    "beam_size": _POSITIVE_INT,
    "max_length": _POSITIVE_INT,
    "length_penalty": ("a finite number >= 0", _length_penalty),
}
_SHAPE_FIELDS = {
    **{name: _POSITIVE_INT for name in ("num_layers", "d_model", "num_heads", "d_ff", "max_length")},
    **{name: _RATE for name in ("dropout", "attention_dropout", "activation_dropout")},
    "norm_first": _BOOL,
}
# The fields of config.json that the commands read, by section: (what they must be, the check).
CONFIG_FIELDS = {
    "decoding": _DECODING_FIELDS,
    "model": {
        **_SHAPE_FIELDS,
        "input_vocab_size": _POSITIVE_INT,
        "target_vocab_size": _POSITIVE_INT,
        "share_embeddings": _BOOL,
        "tie_output_embedding": _BOOL,
    },
    "preset": {
        **_SHAPE_FIELDS,
        "vocab_size": _POSITIVE_INT,
        "beam_size": _POSITIVE_INT,
        "length_penalty": _DECODING_FIELDS["length_penalty"],
    },
}


def check_config_fields(config, config_path):
    """`ValueError` naming `config_path` and the field, for a field of `CONFIG_FIELDS` of the wrong kind.

    Fields that are absent pass (runs of earlier versions wrote fewer).

    Example:

    >>> check_config_fields({"decoding": {"max_length": "abc"}}, "runs/a/config.json")
    Traceback (most recent call last):
    ...
    ValueError: runs/a/config.json: `decoding.max_length` must be a positive integer. Received: 'abc'
    """
    for section, fields in CONFIG_FIELDS.items():
        values = config.get(section)
        if not isinstance(values, dict):
            continue
        for field, (expected, valid) in fields.items():
            if field in values and not valid(values[field]):
                received = repr(values[field])
                received = received if len(received) <= 80 else received[:77] + "..."
                raise ValueError(f"{config_path}: `{section}.{field}` must be {expected}. Received: {received}")


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
    check_config_fields(config, config_path)
    return config


def write_json_atomic(path, data):
    """Writes `data` as JSON to `path` atomically (`atomic.write_json`)."""
    atomic.write_json(path, data)


def config_setting(config, key, default):
    """`config[key]`, or `config[section][key]` for a nested section, or `default`."""
    if key in config:
        return config[key]
    for value in config.values():
        if isinstance(value, dict) and key in value:
            return value[key]
    return default
