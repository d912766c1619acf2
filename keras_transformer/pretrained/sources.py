"""Where a pretrained checkpoint comes from: a local folder, or `hf://ORG/NAME[@REVISION]` through huggingface_hub.

`resolve(source)` returns a `Source`: the folder that holds the checkpoint's
files, and what a run records of it. A Hugging Face repository is fetched
through huggingface_hub into its usual cache (`HF_HOME`, `HF_HUB_CACHE`),
which checks what it downloads; only the files an import reads are fetched
(of the weights, the first format present in `checkpoints.WEIGHT_FILES`'s
order, with the shards its index names), one after the other in the calling thread, so that Ctrl-C stops a download
at once. Every request gives up when nothing arrives for
`$KERAS_TRANSFORMER_DOWNLOAD_TIMEOUT` seconds (60 by default), as the
corpora's downloads do. Without the network (`HF_HUB_OFFLINE=1`, or a Hub
that cannot be reached), the cache is read as huggingface_hub reads it.
huggingface_hub is the `pretrained` extra: without it, an `hf://` source is
a one-line error that says how to install it.

A revision is a branch, a tag or a commit id, checked before any request or
file is touched: huggingface_hub stores a revision's commit under
`refs/REVISION` in its cache, so a revision such as `../../notes.txt` would
write outside it.

Example:

>>> resolve("hf://Helsinki-NLP/opus-mt-en-de@main").uri  # doctest: +SKIP
'hf://Helsinki-NLP/opus-mt-en-de'
>>> check_revision("../../home/me/notes.txt")
Traceback (most recent call last):
...
ValueError: `revision` must be a branch, a tag or a commit id (letters, digits, '_', '-', '.' and '/' between parts, no '..'). Received: '../../home/me/notes.txt'
"""  # noqa: E501  (a doctest's output is one line)

import dataclasses
import fnmatch
import functools
import os
import pathlib
import re

from keras_transformer.files.json_files import read_json_object
from keras_transformer.pretrained.checkpoints import WEIGHT_FILES

HF_PREFIX = "hf://"
# What an import reads of a repository besides its weights: the configs, the tokenizer files, the card.
FILE_PATTERNS = (
    "config.json",
    "generation_config.json",
    "*.spm",
    "*vocab.json",
    "vocab.txt",
    "merges.txt",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "tokenizer.json",
    "sentencepiece.bpe.model",
    "README.md",  # the model card, for its license
)
# The weights: only the first of `checkpoints.WEIGHT_FILES` the repository holds is fetched (with its shards).
SHARD_PATTERNS = ("model-*-of-*.safetensors", "pytorch_model-*-of-*.bin")
ALLOW_PATTERNS = FILE_PATTERNS + WEIGHT_FILES + SHARD_PATTERNS  # what an offline import finds in the cache
_REPO = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")
_REVISION_PART = re.compile(r"[A-Za-z0-9_][\w.-]*")
INSTALL = "pip install 'keras-transformer[pretrained]'"


@dataclasses.dataclass(frozen=True)
class Source:
    """A checkpoint's folder, and its origin: `uri` as given (without the revision), `revision` or None."""

    folder: pathlib.Path
    uri: str
    revision: str = None


def resolve(source):
    """The `Source` of `source`: a folder laid out as a Hugging Face repository, or `hf://ORG/NAME[@REVISION]`.

    Raises:
        ValueError: a folder that does not exist, a malformed `hf://` name or
            revision, huggingface_hub missing, or a download that failed or
            stalled (one line naming the repository).
    """
    text = str(source)
    if not text.startswith(HF_PREFIX):
        folder = pathlib.Path(source)
        if not folder.is_dir():
            raise ValueError(
                f"{source} is not a folder: pass a local copy of a Hugging Face repository, or hf://ORG/NAME"
            )
        return Source(folder.resolve(), str(folder))
    repo, _, revision = text[len(HF_PREFIX) :].partition("@")
    if not _REPO.fullmatch(repo) or ".." in repo or "--" in repo:
        raise ValueError(f"`source` must be hf://ORG/NAME or hf://ORG/NAME@REVISION. Received: {text!r}")
    return _download(repo, check_revision(revision) if revision else None)


def check_revision(revision):
    """`revision` if it is a branch, a tag or a commit id, else a `ValueError`: never a path of its own.

    Parts of letters, digits, `_`, `-` and `.`, joined by single `/` (as in
    `refs/pr/1`); no `..`, no part that starts with `.` or `-` or ends with
    `.lock` or `.` (git's own rules for a ref), at most 255 characters.
    """
    parts = revision.split("/") if isinstance(revision, str) else [""]
    valid = (
        0 < len(revision or "") <= 255
        and ".." not in revision
        and all(_REVISION_PART.fullmatch(part) and not part.endswith((".lock", ".")) for part in parts)
    )
    if not valid:
        raise ValueError(
            "`revision` must be a branch, a tag or a commit id (letters, digits, '_', '-', '.' and '/' between "
            f"parts, no '..'). Received: {revision!r}"[:400]
        )
    return revision


def _download(repo, revision):
    """The snapshot folder of `repo` at `revision`: fetched file by file, else found in the cache."""
    try:
        import huggingface_hub
        import huggingface_hub.constants
        import huggingface_hub.errors
    except ModuleNotFoundError:
        raise ValueError(f"hf:// sources need huggingface_hub: {INSTALL}") from None
    from keras_transformer.datasets.http_transport import TIMEOUT_ENV, download_timeout

    timeout = download_timeout()
    name = f"hf://{repo}{'@' + revision if revision else ''}"
    try:
        folder = _fetch(huggingface_hub, repo, revision, timeout)
    except huggingface_hub.errors.RepositoryNotFoundError:
        raise ValueError(f"{name} cannot be fetched: the Hub has no such repository (or it is private)") from None
    except huggingface_hub.errors.RevisionNotFoundError:
        raise ValueError(f"{name} cannot be fetched: the repository has no revision {revision!r}") from None
    except Exception as error:  # noqa: BLE001  (no network, a stall, a server error: the cache may still serve)
        folder = _cached(huggingface_hub, repo, revision)
        if folder is None:
            stalled = "timed out" in str(error).lower() or "timeout" in type(error).__name__.lower()
            reason = (
                f"nothing received for {timeout:g} s (${TIMEOUT_ENV} sets how long to wait)"
                if stalled
                else _first_line(error)
            )
            raise ValueError(f"{name} cannot be fetched: {reason}") from None
    return Source(folder, f"{HF_PREFIX}{repo}", revision=folder.name)  # the snapshot folder is named by commit


def _fetch(hub, repo, revision, timeout):
    """Downloads the files an import reads, one by one in this thread, each request bounded by `timeout`."""
    constants = hub.constants
    if getattr(constants, "is_offline_mode", lambda: constants.HF_HUB_OFFLINE)():
        raise hub.errors.OfflineModeIsEnabled("HF_HUB_OFFLINE is set")
    endpoint = os.environ.get("HF_ENDPOINT", "").rstrip("/") or constants.ENDPOINT  # read now, not at import
    info = hub.HfApi(endpoint=endpoint).model_info(repo, revision=revision, timeout=timeout)
    present = {s.rfilename for s in info.siblings or ()}
    names = sorted(name for name in present if _wanted(name))
    if "config.json" not in names:
        raise ValueError(f"hf://{repo} holds no config.json at the top of the repository")
    names.remove("config.json")
    # config.json first, by the revision asked for: huggingface_hub records that revision's commit (refs/), so
    # that the same name works offline later; the rest by that commit, so that all files come from one snapshot.
    fetch = functools.partial(hub.hf_hub_download, repo, endpoint=endpoint, etag_timeout=timeout)
    config = pathlib.Path(fetch("config.json", revision=revision))
    for name in names:
        fetch(name, revision=config.parent.name)
    weights = next((name for name in WEIGHT_FILES if name in present), None)  # the one format an import reads
    if weights is not None:
        path = pathlib.Path(fetch(weights, revision=config.parent.name))
        for shard in _shards(path) if weights.endswith(".index.json") else ():
            if shard in present:  # a shard the repository lacks is the import's to name
                fetch(shard, revision=config.parent.name)
    return config.parent


def _shards(index):
    """The shards a weights index names, in order; only plain file names (any other is the import's to refuse)."""
    try:
        weight_map = read_json_object(index).get("weight_map")
    except ValueError:
        return []  # the import names what is wrong with it
    files = weight_map.values() if isinstance(weight_map, dict) else ()
    return sorted({f for f in files if isinstance(f, str) and pathlib.PurePosixPath(f).name == f and "\\" not in f})


def _cached(hub, repo, revision):
    """The snapshot folder of `repo` at `revision` in huggingface_hub's cache, or None."""
    try:
        folder = hub.snapshot_download(
            repo, revision=revision, allow_patterns=list(ALLOW_PATTERNS), local_files_only=True
        )
    except Exception:  # noqa: BLE001  (LocalEntryNotFoundError and its kin: not cached)
        return None
    return pathlib.Path(folder)


def _wanted(filename):
    return "/" not in filename and any(fnmatch.fnmatchcase(filename, pattern) for pattern in FILE_PATTERNS)


def _first_line(error):
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
