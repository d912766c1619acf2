"""Tokenizers as `tf.Module`s (tensorflow-text ops), so that a SavedModel holds them.

- `SubwordTokenizer` (`subword`): this package's own, a SentencePiece model
  trained in seconds whose ids are SentencePiece's, with the reserved ids
  `PAD_ID`, `UNK_ID`, `START_ID`, `END_ID` (0-3).
- `MarianTokenizer` (`marian`): an imported OPUS-MT model's: a SentencePiece
  model that cuts the text into pieces, and a `vocab.json` that gives each
  piece its id, as transformers' `MarianTokenizer` does.

`load_tokenizer(directory)` loads either from what its `save` wrote.
"""

from keras_transformer.config import END_ID, PAD_ID, START_ID, UNK_ID
from keras_transformer.tokenizers.marian import MarianTokenizer
from keras_transformer.tokenizers.subword import (
    CONFIG_FILENAME,
    MODEL_FILENAME,
    NUM_RESERVED_IDS,
    SegmentationSampler,
    SubwordTokenizer,
    load_tokenizer,
)

__all__ = [
    "CONFIG_FILENAME",
    "END_ID",
    "MODEL_FILENAME",
    "MarianTokenizer",
    "NUM_RESERVED_IDS",
    "PAD_ID",
    "START_ID",
    "SegmentationSampler",
    "SubwordTokenizer",
    "UNK_ID",
    "load_tokenizer",
]
