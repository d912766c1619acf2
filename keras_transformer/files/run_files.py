"""The record of the files a training run wrote: config.json's `"files"`.

A run directory lists, in its `config.json`, the path, size and sha256 of
every file it wrote (`FileRecorder`, after each epoch and when it finishes).
`files_record` reads that record as an `ownership.Record`, so that
`destinations` deletes or replaces only those files. The paths a run writes
are fixed (`WRITTEN`); while a run has not finished, those that training
rewrites (`REWRITTEN`) are its own whatever their content.

Example:

>>> recorder = FileRecorder("saved_models/chatbot-ko")
>>> recorder.record()  # doctest: +SKIP
>>> files_record("saved_models/chatbot-ko").files["model.keras"]  # doctest: +SKIP
(779247, 'b75f37e1...')
"""

import json
import os
import pathlib
import re
import stat

from keras_transformer.files import atomic, ownership

CONFIG = "config.json"
FILES = "files"  # config.json's record of the run's files
MEMBER = re.compile(r"member-\d+")  # an ensemble's members, each a run of its own
# The files that training rewrites until the run finishes; a run killed after writing one and before
# recording it still owns it.
REWRITTEN = re.compile(
    r"model\.keras|classifier\.keras|history\.csv|snapshots/epoch-\d+\.weights\.h5"
    r"|backup/(worker-\d+/)?(latest\.weights\.h5|training_metadata\.json)(\.bkp)?"
    r"|logs/(train|validation)/events\.out\.tfevents\.[^/]+"
)
# Every file a run writes, by its path in the run (an imported M2M100, NLLB, mBART-50, T5, BERT or GPT-2
# tokenizer keeps the checkpoint's own files in `files/`).
WRITTEN = re.compile(
    r"config\.json|tokenizers/(source|target)/(tokenizer\.(model|json)|(source|target)\.spm|(target_)?vocab\.json"
    r"|hf_tokenizer\.json)"
    r"|tokenizers/(source|target)/files/(tokenizer(_config)?\.json|vocab\.(json|txt)|sentencepiece\.bpe\.model"
    r"|spiece\.model|merges\.txt|special_tokens_map\.json|added_tokens\.json)"
    rf"|{REWRITTEN.pattern}"
)
# The folders a run makes, which may be empty.
FOLDERS = re.compile(
    r"tokenizers(/source|/target)?|tokenizers/(source|target)/files|logs(/train|/validation)?|snapshots"
    r"|backup(/worker-\d+)?"
)


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
    >>> recorder.record()  # after each epoch  # doctest: +SKIP
    """

    def __init__(self, path):
        self.path = pathlib.Path(path)
        self._known = {}  # relative path -> (size, mtime_ns, sha256)

    def record(self):
        """Writes config.json's `"files"` for what is on disk now."""
        config = _parsed_config(self.path)
        if config is None:
            raise ValueError(f"{self.path / CONFIG} is not a run's config.json: its files cannot be recorded")
        config[FILES] = self.files()
        atomic.write_json(self.path / CONFIG, config)

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
