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
it: each file's path, size and sha256 (`record_files`, after every epoch).
Only those files are ever deleted or replaced (`ownership`).

An ensemble preset (`Preset.ensemble = n`) writes one run directory per
member, `member-0/` ... `member-{n-1}/` (each as above), beside the
ensemble's own `config.json` (listing them under `"members"`) and
`tokenizers/`; the commands load all members from the ensemble's directory.

`keras-transformer export --model saved_models/NAME --output saved_models/NAME-export`
writes a SavedModel directory (`saved_model.pb`) that needs no project code.
"""

import json
import math
import os
import pathlib
import re
import stat
import warnings

from keras_transformer import atomic, ownership
from keras_transformer.errors import ArgumentError, KerasTransformerWarning

CONFIG = "config.json"
MODEL = "model.keras"
SOURCE_TOKENIZER = "tokenizers/source"
TARGET_TOKENIZER = "tokenizers/target"
HISTORY = "history.csv"
LOGS = "logs"
BACKUP = "backup"
SNAPSHOTS = "snapshots"
FILES = "files"  # config.json's record of the run's files
MEMBER = re.compile(r"member-\d+")  # an ensemble's members, each a run of its own
# The files that training rewrites until the run finishes; a run killed after writing one and before
# recording it still owns it.
REWRITTEN = re.compile(
    r"model\.keras|history\.csv|snapshots/epoch-\d+\.weights\.h5"
    r"|backup/(worker-\d+/)?(latest\.weights\.h5|training_metadata\.json)(\.bkp)?"
    r"|logs/(train|validation)/events\.out\.tfevents\.[^/]+"
)
# Every file a run writes, by its path in the run.
WRITTEN = re.compile(rf"config\.json|tokenizers/(source|target)/tokenizer\.(model|json)|{REWRITTEN.pattern}")
# The folders a run makes, which may be empty.
FOLDERS = re.compile(r"tokenizers(/source|/target)?|logs(/train|/validation)?|snapshots|backup(/worker-\d+)?")


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
    """Writes `data` as JSON to `path` atomically (`atomic.write_bytes`)."""
    text = json.dumps(data, indent=2, ensure_ascii=False)
    atomic.write_bytes(path, text.encode("utf-8"))


def config_setting(config, key, default):
    """`config[key]`, or `config[section][key]` for a nested section, or `default`."""
    if key in config:
        return config[key]
    for value in config.values():
        if isinstance(value, dict) and key in value:
            return value[key]
    return default


def files_record(path):
    """What the run at `path` records of its files (`ownership.Record`), or None where it has no such record.

    A `config.json` that does not parse, is not a JSON object, or was not
    written by this package means "not a run of this package". A run of an
    earlier version, whose config.json lists no files, owns the files a run
    writes (`WRITTEN`) by their names; a run that has not finished also owns
    the files its training rewrites (`REWRITTEN`) whatever their content.
    """
    path = pathlib.Path(path)
    config = _parsed_config(path)
    if config is None or not _written_by_this_package(config):
        return None
    members = config.get("members") or []
    if not isinstance(members, list) or not all(isinstance(m, str) and MEMBER.fullmatch(m) for m in members):
        return None
    member_records = {member: files_record(path / member) for member in members}
    files = config.get(FILES)
    if files is None:
        return ownership.Record({CONFIG: (None, None)}, by_name=WRITTEN, folders=FOLDERS, members=member_records)
    entries = _file_entries(files)
    if entries is None:
        return None
    by_name = None if config.get("finished") is True else REWRITTEN
    return ownership.Record({**entries, CONFIG: (None, None)}, by_name=by_name, folders=FOLDERS, members=member_records)


def _parsed_config(path):
    config_path = path / CONFIG
    if config_path.is_symlink() or not config_path.is_file():
        return None
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError, OSError):
        return None
    return config if isinstance(config, dict) else None


def _written_by_this_package(config):
    if config.get("created_by") == ownership.CREATOR:
        return True
    return isinstance(config.get("preset"), dict) and isinstance(config.get("model"), dict)  # an earlier version


def _file_entries(files):
    """`{path: (size, sha256)}` from config.json's `"files"`, or None where it is malformed."""
    if not isinstance(files, dict):
        return None
    entries = {}
    for relative, entry in files.items():
        if not (isinstance(entry, dict) and WRITTEN.fullmatch(relative)):
            return None
        size, digest = entry.get("size"), entry.get("sha256")
        if not (isinstance(size, int) and not isinstance(size, bool) and size >= 0):
            return None
        if not (isinstance(digest, str) and re.fullmatch(r"[0-9a-f]{64}", digest)):
            return None
        entries[relative] = (size, digest)
    return entries


class FileRecorder:
    """Records in a run's config.json the size and sha256 of every file the run wrote there.

    The files are those at the paths a run writes (`WRITTEN`), found without
    following links; an ensemble's members keep records of their own. A file
    whose size and modification time have not changed since the last call is
    not read again.

    Example:

    >>> recorder = FileRecorder("saved_models/chatbot-ko")
    >>> recorder.record()  # after each epoch
    """

    def __init__(self, path):
        self.path = pathlib.Path(path)
        self._known = {}  # relative path -> (size, mtime_ns, sha256)

    def record(self):
        """Writes config.json's `"files"` for what is on disk now."""
        config = read_config(self.path)
        config[FILES] = self.files()
        write_json_atomic(self.path / CONFIG, config)

    def files(self):
        """`{relative path: {"size": ..., "sha256": ...}}` of the run's files on disk now."""
        files = {}
        for relative, info in self._written_files():
            key = (info.st_size, info.st_mtime_ns)
            known = self._known.get(relative)
            digest = known[2] if known and known[:2] == key else ownership.sha256(self.path / relative)
            self._known[relative] = (*key, digest)
            files[relative] = {"size": info.st_size, "sha256": digest}
        return files

    def _written_files(self):
        for parent, folders, names in os.walk(self.path):
            relative_parent = pathlib.Path(parent).relative_to(self.path).as_posix()
            prefix = "" if relative_parent == "." else relative_parent + "/"
            folders[:] = [f for f in folders if FOLDERS.fullmatch(prefix + f)]  # os.walk follows no links here
            for name in sorted(names):
                relative = prefix + name
                if relative == CONFIG or not WRITTEN.fullmatch(relative):
                    continue
                info = os.lstat(os.path.join(parent, name))
                if stat.S_ISREG(info.st_mode):  # not a link
                    yield relative, info
