"""The kind `"t5"`: an imported T5's, flan-T5's, mT5's or MADLAD-400's `T5Tokenizer`.

One tokenizer is both sides'. It has no LiteRT form (LiteRT refuses T5's
relative positions before it reads a tokenizer); its CTranslate2 vocabulary
is the vocabulary's pieces by id, MADLAD's `<2xx>` languages and the
`<extra_id_N>` sentinels included, completed up to the model's rows.
"""

from keras_transformer.tokenizers.kinds.vocabularies import one_for_both_sides
from keras_transformer.tokenizers.t5 import T5Tokenizer

FORMAT = T5Tokenizer.FORMAT
load = T5Tokenizer.load


def host_text(directory, config):
    """Always a `ValueError`: this kind has no such form."""
    raise ValueError("a T5 tokenizer has no LiteRT form")


def ctranslate2_vocabulary(directory, config, vocab_size=None):
    """The pieces by id up to `vocab_size` (the model's embedding rows), and where MADLAD's language goes."""
    return one_for_both_sides(load(directory), vocab_size)
