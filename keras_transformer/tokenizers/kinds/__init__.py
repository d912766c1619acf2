"""The registry of tokenizer kinds: one module a kind, chosen by the `format` its `tokenizer.json` names.

A run keeps each tokenizer in a folder with this package's `tokenizer.json`,
whose `format` names the kind. Each kind module says, in the same parts,
what its tokenizers are to the rest of the package:

- `FORMAT`: the `format` its tokenizers write (the registry's key, the
  `FORMAT` of the tokenizer class);
- `load(directory, name=None)`: the tokenizer a run keeps in `directory`;
- `host_text(directory, config)`: its LiteRT form, the tokenizer that the
  host runs beside a `.tflite` in plain Python (texts to lists of ids, ids
  to UTF-8 bytes), whose `not_in_model` says why the `.tflite` cannot hold
  it (None: `litert.fast_text` probes whether it can); a `ValueError` for a
  kind without one;
- `ctranslate2_vocabulary(directory, config, vocab_size)`: its CTranslate2
  vocabulary, a `vocabularies.Vocabulary` (the pieces by id; where a
  source's language token goes; whether it is both sides'); a `ValueError`
  for a kind without one.

A new kind is one module with these parts, added to `KINDS`: `subword`
(`"sentencepiece"`, this package's own), `marian` (OPUS-MT), `fairseq`
(M2M100, NLLB-200, mBART-50), `t5` (T5, flan-T5, mT5, MADLAD-400),
`huggingface` (GPT-2, BERT). A `tokenizer.json` of no kind's `format` is
read as this package's own, whose `load` names what is wrong. Nothing
outside `keras_transformer/tokenizers/` branches on a kind
(`tests/test_architecture.py`): it asks these functions.

Example:

>>> sorted(KINDS)
['fairseq', 'huggingface', 'marian', 'sentencepiece', 't5']
>>> kind_of({"format": "marian"}).__name__, kind_of({"format": "sentencepiece"}).__name__
('keras_transformer.tokenizers.kinds.marian', 'keras_transformer.tokenizers.kinds.subword')
"""

import json
import pathlib

from keras_transformer.tokenizers.kinds import fairseq, huggingface, marian, subword, t5
from keras_transformer.tokenizers.pieces import CONFIG_FILENAME

PARTS = ("FORMAT", "load", "host_text", "ctranslate2_vocabulary")
KINDS = {kind.FORMAT: kind for kind in (subword, marian, fairseq, t5, huggingface)}
OWN = subword  # the kind of a `tokenizer.json` that names no other


def kind_of(config):
    """The kind module of a tokenizer's `tokenizer.json` (a dict): its `format`'s, else this package's own."""
    name = config.get("format") if isinstance(config, dict) else None
    return KINDS.get(name, OWN) if isinstance(name, str) else OWN


def read_config(directory):
    """The `tokenizer.json` of the tokenizer folder `directory`, as a dict (`OSError`, `ValueError` unread)."""
    return json.loads((pathlib.Path(directory) / CONFIG_FILENAME).read_text(encoding="utf-8"))


def load_tokenizer(directory, name=None):
    """The tokenizer saved in `directory`, loaded by the kind its `tokenizer.json` names.

    A folder without a readable `tokenizer.json` is a `ValueError` naming it.
    """
    config_path = pathlib.Path(directory) / CONFIG_FILENAME
    try:
        config = read_config(directory)
    except (OSError, ValueError) as error:
        raise ValueError(f"{config_path}: not a tokenizer of this package ({error})") from None
    return kind_of(config).load(directory, name=name)


def host_text(directory):
    """The LiteRT form of the tokenizer saved in `directory`: its kind's host tokenizer, in plain Python.

    Anything that keeps it from loading is a `ValueError` naming the folder.
    """
    directory = pathlib.Path(directory)
    try:
        config = read_config(directory)
        return kind_of(config).host_text(directory, config)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"{directory} is not a tokenizer folder of this package: {error}") from None


def ctranslate2_vocabulary(directory, vocab_size=None):
    """The CTranslate2 `Vocabulary` of the tokenizer saved in `directory`, up to `vocab_size` rows where given.

    Anything that keeps it from being read is a `ValueError` naming the folder.
    """
    directory = pathlib.Path(directory)
    try:
        config = read_config(directory)
        return kind_of(config).ctranslate2_vocabulary(directory, config, vocab_size)
    except Exception as error:  # noqa: BLE001  (missing file, JSON, proto: all mean "not a tokenizer")
        raise ValueError(f"{directory} is not a tokenizer saved by this package: {error}") from None


def ctranslate2_vocabularies(source_dir, target_dir, vocab_size=None):
    """`(source pieces, target pieces, where a source's language token goes)` of a run's tokenizer folders.

    A tokenizer that is both sides' (M2M100, NLLB, mBART-50, T5) gives both,
    up to `vocab_size` (the model's rows); a run without a target folder
    has the source's pieces on both sides. The language's place is
    `"first"`, `"last"`, or None for a tokenizer without languages.
    """
    source = ctranslate2_vocabulary(source_dir, vocab_size)
    if source.both_sides or not pathlib.Path(target_dir).is_dir():
        return source.pieces, source.pieces, source.source_language
    return source.pieces, ctranslate2_vocabulary(target_dir, vocab_size).pieces, source.source_language


__all__ = [
    "KINDS",
    "OWN",
    "PARTS",
    "ctranslate2_vocabularies",
    "ctranslate2_vocabulary",
    "host_text",
    "kind_of",
    "load_tokenizer",
    "read_config",
]
