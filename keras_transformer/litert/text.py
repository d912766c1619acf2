"""A run's tokenizers in plain Python: the LiteRT export's tokenizer outside the model.

A LiteRT export copies the run's `tokenizers/` folders. Where the `.tflite`
cannot tokenize exactly as the run does (see `docs/litert.md`), the host
tokenizes with the LiteRT form of each tokenizer's kind
(`keras_transformer.tokenizers.kinds`), which gives the run's own ids and
strings with the `sentencepiece` library (its C++ library on a device):
`SentencePieceText` for this package's `SubwordTokenizer`, `MarianText` for
an imported OPUS-MT one, `FairseqText` for an imported M2M100's or NLLB's,
with its languages.

`load_text(folder)` reads any of them from a tokenizer folder of a run.

Example:

>>> text = load_text("saved_models/en-de-litert/tokenizers/source")
>>> ids = text.tokenize(["A dog runs."])  # [[...]], lists of ints
>>> text.detokenize(ids)  # [b'A dog runs.']
"""

from keras_transformer.tokenizers.kinds import host_text as load_text
from keras_transformer.tokenizers.subword import NUM_RESERVED_IDS  # this package's pad, unk, START, END

__all__ = ["NUM_RESERVED_IDS", "load_text"]
