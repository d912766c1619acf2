"""A run's tokenizers: the source's and the target's, one object twice where the vocabulary is shared."""

import pathlib
from typing import NamedTuple

from keras_transformer.errors import first_line
from keras_transformer.runs.layout import CONFIG, SOURCE_TOKENIZER, TARGET_TOKENIZER


class Tokenizers(NamedTuple):
    """A run's source and target tokenizers (one object twice for a shared vocabulary)."""

    source: object
    target: object

    @property
    def shared(self):
        """True where both sides use one tokenizer."""
        return self.source is self.target

    @property
    def languages(self):
        """`{code: id}` of a multilingual model's language tokens (the target's); empty for one language pair."""
        return dict(getattr(self.target, "languages", None) or {})


def load_tokenizers(path):
    """The `Tokenizers` that the run directory `path` saved (`SubwordTokenizer`s, or an import's own).

    A run whose target tokenizer is a copy of its source tokenizer (this
    package's own runs) gets one object twice. A multilingual model
    fine-tuned on one pair records its languages in config.json
    (`languages`): they become the tokenizers' default `source_lang` and
    `target_lang` (`with_languages`), so that every engine translates the
    run into them unless told otherwise, while the tokenizer files stay the
    checkpoint's. A folder that does not load is a one-line `ValueError`
    naming it.
    """
    path = pathlib.Path(path)
    source_dir, target_dir = path / SOURCE_TOKENIZER, path / TARGET_TOKENIZER
    source = _load(source_dir)
    if not target_dir.is_dir() or _same_files(source_dir, target_dir):
        tokenizers = Tokenizers(source, source)
    else:
        tokenizers = Tokenizers(source, _load(target_dir))
    if (path / CONFIG).is_file():
        from keras_transformer.runs.run_config import RunConfig

        tokenizers = with_languages(tokenizers, RunConfig.read(path).languages, path / CONFIG)
    return tokenizers


def with_languages(tokenizers, languages, where="config.json"):
    """`tokenizers` whose default languages are `languages` (`{"source_lang", "target_lang"}`, or None: unchanged).

    A code the tokenizers do not have is a one-line `ValueError` naming `where`.
    """
    for key, tokenizer in (("source_lang", tokenizers.source), ("target_lang", tokenizers.target)):
        code = (languages or {}).get(key)
        if code is None or (key == "source_lang" and getattr(tokenizer, "target_in_source", False)):
            continue  # none given; or MADLAD's, whose source language is the model's to find
        if code not in (getattr(tokenizer, "languages", None) or {}):
            raise ValueError(f"{where}: `languages.{key}` {code!r} is not a language of the run's tokenizer")
        setattr(tokenizer, key, code)
    return tokenizers


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
