"""The kind `"huggingface"`: an imported GPT-2's or BERT's `HuggingFaceTokenizer`, run by the `tokenizers` library.

Its models are not translation models: it has neither a LiteRT form nor a
CTranslate2 vocabulary (a BERT SavedModel holds tensorflow-text's WordPiece
instead, `tokenizers.wordpiece_graph`).
"""

from keras_transformer.tokenizers.huggingface import HuggingFaceTokenizer

FORMAT = HuggingFaceTokenizer.FORMAT
load = HuggingFaceTokenizer.load


def host_text(directory, config):
    """Always a `ValueError`: this kind has no such form."""
    raise ValueError("a Hugging Face tokenizer (GPT-2's, BERT's) has no LiteRT form")


def ctranslate2_vocabulary(directory, config, vocab_size=None):
    """Always a `ValueError`: this kind has no such form."""
    raise ValueError("a Hugging Face tokenizer (GPT-2's, BERT's) has no CTranslate2 vocabulary")
