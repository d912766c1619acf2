"""The kind `"fairseq"`: an imported M2M100's, NLLB-200's or mBART-50's `FairseqTokenizer`, with its languages.

One tokenizer is both sides'. Its LiteRT form is `FairseqText`, on the host
only; its CTranslate2 vocabulary is the vocabulary's pieces by id, the
language tokens (`__de__`, `deu_Latn`, `en_XX`) included, completed up to
the model's rows.
"""

import tensorflow as tf

from keras_transformer.tokenizers.fairseq import FairseqTokenizer
from keras_transformer.tokenizers.kinds.vocabularies import one_for_both_sides

FORMAT = FairseqTokenizer.FORMAT
load = FairseqTokenizer.load


def host_text(directory, config):
    """`FairseqText` of the tokenizer saved in `directory`."""
    return FairseqText(directory)


def ctranslate2_vocabulary(directory, config, vocab_size=None):
    """The pieces by id up to `vocab_size` (the model's embedding rows), and where a source's language goes."""
    return one_for_both_sides(load(directory), vocab_size)


class FairseqText:
    """An imported M2M100 or NLLB-200 run's `FairseqTokenizer` on the LiteRT host, with its languages.

    It runs that tokenizer itself (its tensorflow-text ops, on the host):
    its ids are a vocabulary's, not SentencePiece's, and NLLB's
    SentencePiece model is rebuilt from its `tokenizer.json`, so a second
    implementation could only drift from it. Unlike the others, it reads a
    text as it comes: NLLB's tokenizer keeps a trailing space as a piece, as
    transformers' does (`keeps_spaces`; the translator strips nothing but
    blank texts).

    Args:
        folder: the tokenizer folder (`tokenizer.json` of format
            `"fairseq"`, the checkpoint's files in `files/`).

    Attributes:
        languages: `{code: id}` of the language tokens.
        source_lang, target_lang: the tokenizer's default languages, or None.
        source_position: `"first"` (`[src_lang] X </s>`) or `"last"` (`X </s> [src_lang]`).
    """

    keeps_spaces = True
    not_in_model = (
        "is an imported M2M100 or NLLB one (SentencePiece pieces mapped to ids by a vocabulary, language tokens), "
        "which FastSentencepieceTokenizer cannot reproduce"
    )

    def __init__(self, folder):
        self._tokenizer = tokenizer = FairseqTokenizer.load(folder)
        self.vocab_size, self.unk_id = tokenizer.vocab_size, tokenizer.unk_id
        self.special_tokens = tokenizer.special_tokens
        self.byte_ids = self.blank_ids = frozenset()
        self.languages = dict(tokenizer.languages)
        self.source_lang, self.target_lang = tokenizer.source_lang, tokenizer.target_lang
        self.source_position = tokenizer.source_position

    def pieces_by_id(self):
        """Every piece by id (a list of str)."""
        pieces = self._tokenizer.id_to_piece(tf.range(self.vocab_size)).numpy().tolist()
        return [piece.decode("utf-8") for piece in pieces]

    def tokenize(self, texts):
        """Lists of ids, one per text (no language token, no `</s>`)."""
        texts = list(texts)
        return self._tokenizer.tokenize(tf.constant(texts, tf.string, shape=[len(texts)])).to_list() if texts else []

    def detokenize(self, rows):
        """UTF-8 bytes, one per row of ids; the special ids (and NLLB's language tokens) are dropped."""
        rows = [[int(i) for i in row] for row in rows]
        if not rows:
            return []
        ids = tf.RaggedTensor.from_row_lengths(tf.constant(sum(rows, []), tf.int32), [len(row) for row in rows])
        return self._tokenizer.detokenize(ids).numpy().tolist()
