"""What a stepped decode of an XLA `Translator` reads besides its steps: its noise, its word starts, its texts.

A translator's streams (`engines.xla.stream_decoder`) and the server's
in-flight rows (`serving.inflight`) both cut ids into words with these, from the translator's
public members, so that a sentence gives the same pieces either way.

Example:

>>> noise = sampling_noise(2, 8, 7)  # doctest: +SKIP
>>> noise.shape  # doctest: +SKIP
TensorShape([2, 8])
"""

import random

import tensorflow as tf

from keras_transformer import decoding
from keras_transformer.translators.streaming import word_starts

SEED_LIMIT = 2**62  # a random seed is drawn below it, as a `Translator`'s `sample` draws one


def sampling_noise(rows, length, seed):
    """A `Translator`'s sampling noise `(rows, length)`: the same draws for the same seed; a random seed for -1."""
    seed = tf.cast(seed, tf.int64)
    if int(seed) < 0:
        seed = tf.constant(random.randrange(SEED_LIMIT), tf.int64)
    return tf.random.stateless_uniform(tf.stack([rows, length]), tf.stack([seed, tf.constant(0, tf.int64)]))


def starts_word_of(translator):
    """Boolean `(vocab,)`: which of `translator`'s target pieces begin a word (`streaming.word_starts`)."""
    vocab = decoding.ensemble_members(translator.model)[0].outputs[0].shape[-1]
    pieces = translator.target_tokenizer.id_to_piece(tf.range(vocab, dtype=tf.int32)).numpy()
    return word_starts(piece.decode("utf-8", errors="replace") for piece in pieces)


def text_of(translator, length, ids):
    """`translator`'s detokenization of `ids` (a list), padded to `length` (one traced shape)."""
    row = tf.constant([list(ids) + [translator.target_pad_id] * (length - len(ids))], tf.int32)
    return translator.detokenize(row).numpy()[0].decode("utf-8", errors="replace")
