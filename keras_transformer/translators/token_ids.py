"""A translator's token ids: the tokenizer checked against the model, sentences as ids, ids padded to few shapes.

Every XLA translator (`engines.xla.translator.Translator`) and the CTranslate2
engine read sentences through these: a blank sentence has no ids, and a
batch of sources is padded to a power-of-two batch and a multiple of
`SOURCE_BUCKET` tokens, so that XLA compiles few programs.

Example:

>>> import tensorflow as tf
>>> ids = tf.ragged.constant([[5, 6, 7], [8]])
>>> pad_to_buckets(ids, max_source_length=64, pad_id=0).shape
TensorShape([2, 16])
"""

import tensorflow as tf

SOURCE_BUCKET = 16  # sources are padded to a multiple of this (few XLA programs)


def check_vocab(name, tokenizer, model_vocab):
    """The tokenizer's ids must be the model's rows; fewer where its `detokenize` drops the ids beyond them.

    A checkpoint may have rows its tokenizer never gives: NLLB-200's 256,206
    embedding rows against its tokenizer's 256,204 ids, M2M100's 128,112
    against 128,104. Imported tokenizers (`PieceTokenizer`) serve those.
    """
    vocab = getattr(tokenizer, "vocab_size", model_vocab)
    if vocab > model_vocab or (vocab < model_vocab and not getattr(tokenizer, "drops_ids_beyond_vocab", False)):
        raise ValueError(
            f"`{name}` does not fit the model: its vocab_size is {vocab}, the model's is "
            f"{model_vocab}. Received: {name}={tokenizer!r}"
        )


def pieces_by_id(tokenizer, vocab_size):
    """`tokenizer`'s pieces by id, `(vocab_size,)` `tf.string` ("" where it has none).

    The model may have rows beyond the tokenizer's ids (NLLB-200's padding
    rows, `check_vocab`): those have no piece.
    """
    if not hasattr(tokenizer, "id_to_piece"):
        return tf.fill([vocab_size], "")
    known = min(vocab_size, getattr(tokenizer, "vocab_size", vocab_size))
    pieces = tf.reshape(tokenizer.id_to_piece(tf.range(known)), [known])
    return tf.concat([pieces, tf.fill([vocab_size - known], "")], 0)


def tokenize_words(tokenizer, words):
    """`tokenizer`'s ids of each of `words` (a list of str), as lists."""
    return tokenizer.tokenize(tf.constant(words, tf.string, shape=[len(words)])).to_list()


def texts(strings):
    """A string tensor (or variable) as a list of str."""
    return [text.decode("utf-8") for text in tf.convert_to_tensor(strings).numpy().tolist()]


def tokenized(tokenizer, sentences):
    """The ids of `sentences` as `tokenizer` gives them, none for a blank one.

    Not stripped first: spaces are the tokenizer's to read (NLLB's keeps a trailing one, as transformers' does).
    """
    blank = tf.equal(tf.strings.strip(sentences), "")
    return tokenizer.tokenize(tf.where(blank, "", sentences))


def pad_to_buckets(ids, max_source_length, pad_id):
    """Ragged ids -> dense `(batch', width)` of `pad_id`: batch to a power of two, width to a multiple of 16."""
    batch = tf.shape(ids.row_lengths())[0]
    width = tf.reduce_max(tf.concat([ids.row_lengths(), [1]], 0))
    width = tf.minimum(
        (width + SOURCE_BUCKET - 1) // SOURCE_BUCKET * SOURCE_BUCKET, tf.cast(max_source_length, width.dtype)
    )
    rows = tf.cast(2.0 ** tf.round(tf.math.log(tf.cast(batch, tf.float32)) / tf.math.log(2.0)), tf.int32)
    rows = tf.where(rows < batch, 2 * rows, rows)
    dense = ids.to_tensor(pad_id)
    pad = [[0, rows - batch], [0, tf.cast(width, tf.int32) - tf.shape(dense)[1]]]
    return tf.pad(dense, pad, constant_values=pad_id)


def padded(rows, pad_id):
    """int32 `(len(rows), longest)` of `rows`, `pad_id` after each (at least one column)."""
    width = max([len(row) for row in rows] + [1])
    return tf.constant([row + [pad_id] * (width - len(row)) for row in rows], tf.int32)
