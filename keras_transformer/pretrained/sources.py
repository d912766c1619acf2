"""Where a pretrained checkpoint comes from: a local folder, or `hf://ORG/NAME[@REVISION]` through huggingface_hub.

`resolve(source)` returns a `Source`: the folder that holds the checkpoint's
files, and what a run records of it. A Hugging Face repository is fetched by
huggingface_hub's `snapshot_download` into its usual cache (`HF_HOME`,
`HF_HUB_CACHE`), which also honours `HF_HUB_OFFLINE=1` and checks what it
downloads; only the files an import reads are fetched. huggingface_hub is the
`pretrained` extra: without it, an `hf://` source is a one-line error that
says how to install it.

Example:

>>> resolve("hf://Helsinki-NLP/opus-mt-en-de@main").uri  # doctest: +SKIP
'hf://Helsinki-NLP/opus-mt-en-de'
"""

import dataclasses
import pathlib
import re

HF_PREFIX = "hf://"
# What an import reads of a repository; the weights in one of three formats, the tokenizer files.
ALLOW_PATTERNS = (
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "tf_model.h5",
    "pytorch_model.bin",
    "*.spm",
    "*vocab.json",
    "tokenizer_config.json",
)
_REPO = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")
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
        ValueError: a folder that does not exist, a malformed `hf://` name,
            huggingface_hub missing, or a download that failed (one line
            naming the repository).
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
    if not _REPO.fullmatch(repo) or (revision and not re.fullmatch(r"[\w./-]+", revision)):
        raise ValueError(f"`source` must be hf://ORG/NAME or hf://ORG/NAME@REVISION. Received: {text!r}")
    return _download(repo, revision or None)


def _download(repo, revision):
    try:
        import huggingface_hub
    except ModuleNotFoundError:
        raise ValueError(f"hf:// sources need huggingface_hub: {INSTALL}") from None
    from huggingface_hub.utils import HfHubHTTPError, LocalEntryNotFoundError

    try:
        folder = huggingface_hub.snapshot_download(repo, revision=revision, allow_patterns=list(ALLOW_PATTERNS))
    except (LocalEntryNotFoundError, HfHubHTTPError, OSError, ValueError) as error:
        first = (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
        raise ValueError(f"hf://{repo}{'@' + revision if revision else ''} cannot be fetched: {first}") from None
    folder = pathlib.Path(folder)
    return Source(folder, f"{HF_PREFIX}{repo}", revision=folder.name)  # the snapshot folder is named by commit
