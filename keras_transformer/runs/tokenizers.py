"""A run's tokenizers: the source's and the target's, one object twice where the vocabulary is shared."""

import pathlib
from typing import NamedTuple

from keras_transformer.errors import first_line
from keras_transformer.runs.layout import SOURCE_TOKENIZER, TARGET_TOKENIZER


class Tokenizers(NamedTuple):
    """A run's source and target tokenizers (one object twice for a shared vocabulary)."""

    source: object
    target: object

    @property
    def shared(self):
        """True where both sides use one tokenizer."""
        return self.source is self.target


def load_tokenizers(path):
    """The `Tokenizers` that the run directory `path` saved (`SubwordTokenizer`s, or an import's `MarianTokenizer`s).

    A run whose target tokenizer is a copy of its source tokenizer (this
    package's own runs) gets one object twice. A folder that does not load is
    a one-line `ValueError` naming it.
    """
    path = pathlib.Path(path)
    source_dir, target_dir = path / SOURCE_TOKENIZER, path / TARGET_TOKENIZER
    source = _load(source_dir)
    if not target_dir.is_dir() or _same_files(source_dir, target_dir):
        return Tokenizers(source, source)
    return Tokenizers(source, _load(target_dir))


def _load(folder):
    from keras_transformer.tokenizers import load_tokenizer

    try:
        return load_tokenizer(folder)
    except Exception as error:  # noqa: BLE001  (SentencePiece, JSON, TensorFlow: all mean "corrupt")
        raise ValueError(
            f"{folder}: could not load the tokenizer (corrupt or incompatible?): {first_line(error)}"
        ) from None


def _same_files(first, second):
    names = sorted(p.name for p in first.iterdir() if p.is_file())
    return names == sorted(p.name for p in second.iterdir() if p.is_file()) and all(
        (first / name).read_bytes() == (second / name).read_bytes() for name in names
    )
