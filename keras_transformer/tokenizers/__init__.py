"""Tokenizers as `tf.Module`s (tensorflow-text ops), so that a SavedModel holds them.

- `SubwordTokenizer` (`subword`): this package's own, a SentencePiece model
  trained in seconds whose ids are SentencePiece's, with the reserved ids
  `PAD_ID`, `UNK_ID`, `START_ID`, `END_ID` (0-3).
- `MarianTokenizer` (`marian`): an imported OPUS-MT model's: a SentencePiece
  model that cuts the text into pieces, and a `vocab.json` that gives each
  piece its id, as transformers' `MarianTokenizer` does.
- `FairseqTokenizer` (`fairseq`: M2M100, NLLB-200, mBART-50), `T5Tokenizer`
  (`t5`: T5, mT5, MADLAD-400) and `HuggingFaceTokenizer` (`huggingface`:
  GPT-2, BERT), the other imported checkpoints'.

Each is a kind of the registry `kinds` (what a run's `tokenizer.json`
names as its `format`): how it loads, its LiteRT form and its CTranslate2
vocabulary. `load_tokenizer(directory)` loads any of them from what its
`save` wrote.
"""

from keras_transformer.config import END_ID, PAD_ID, START_ID, UNK_ID
from keras_transformer.tokenizers.kinds import load_tokenizer
from keras_transformer.tokenizers.marian import MarianTokenizer
from keras_transformer.tokenizers.subword import (
    CONFIG_FILENAME,
    MODEL_FILENAME,
    NUM_RESERVED_IDS,
    SegmentationSampler,
    SubwordTokenizer,
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
