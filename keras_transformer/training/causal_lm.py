"""A causal language model's text: pairs joined as texts, and texts packed into blocks of tokens.

A decoder-only preset (`gpt-ko`) trains on the same corpora as the
translation presets: each pair `(question, answer)` becomes one text,
`"question answer"`, and the batches are the teacher-forced decoder's:
`token_ids = [START] + text`, labels `text + [END]` (padding 0, which the
loss skips). They come from the same pipeline as a translation model's
(`datasets.make_batches`: length buckets, a token budget), with the text on
both sides, of which the model reads the target side alone. A file of texts
(`train --train-text`, one text a line) gives each text as the pair
`(text, "")`, whose joined text is the text itself.

An imported GPT-2 has one id for START, END and padding (`<|endoftext|>`),
so its labels cannot be padded without hiding its END: it continues its
training as it was trained, and as transformers' `run_clm` fine-tunes it,
on packed blocks (`packed_batches`). Every text, END after it, follows the
one before in one stream of tokens (which starts with START), cut into
blocks of the same length: no padding at all, every label counts, and the
held-out blocks give the model's perplexity (`perplexity`).

Example:

>>> as_texts({"train": [("배고파", "밥 먹어요.")]})["train"]
[('배고파 밥 먹어요.', '배고파 밥 먹어요.')]
>>> blocks([[5, 6], [7]], start_id=9, end_id=9, length=2).tolist()  # the stream 9 5 6 9 7 9
[[9, 5, 6], [6, 9, 7]]
"""

import math

import numpy as np


def joined(pair):
    """One pair's text: the question and the answer, a space between."""
    return " ".join(part.strip() for part in pair if part.strip())


def as_texts(splits):
    """`splits` (name -> pairs) with every pair `(text, text)`, its `joined` text on both sides."""
    return {name: [(joined(pair), joined(pair)) for pair in pairs] for name, pairs in splits.items()}


def language_model_batches(batches):
    """Translation batches `({"encoder_inputs", "decoder_inputs"}, labels)` as `({"token_ids"}, labels)`."""
    return batches.map(lambda inputs, labels: ({"token_ids": inputs["decoder_inputs"]}, labels))


def blocks(rows, start_id, end_id, length):
    """The token stream of `rows` (each text's ids) in `(count, length + 1)` blocks: inputs and labels, shifted.

    The stream is START, then each row and END after it; block `i` is the
    stream's tokens `i * length` to `(i + 1) * length` (one more: the last
    label), the tokens after the last whole block left out. A stream shorter
    than one block is one block of its own length.
    """
    stream = [start_id]
    for row in rows:
        stream += (row[1:] if row[:1] == [start_id] else row) + [end_id]  # a tokenizer that adds START: once
    length = min(length, len(stream) - 1)
    count = (len(stream) - 1) // length
    stream = np.asarray(stream[: count * length + 1], np.int32)
    starts = np.arange(count)[:, None] * length + np.arange(length + 1)[None]
    return stream[starts]


def packed_batches(texts, tokenizer, config, length, rows, seed=None):
    """`({"token_ids"}, labels)` batches of `texts` packed into blocks of `length` tokens (`blocks`), `rows` a batch.

    With a `seed` (training) the blocks are shuffled anew every epoch and
    every batch is full (one compiled shape; fewer blocks than `rows` make
    one batch of them all); without, every block is kept, in order.
    """
    import tensorflow as tf

    ids = tokenizer.tokenize(list(texts))
    ids = ids.to_list() if hasattr(ids, "to_list") else [list(row) for row in ids]
    packed = blocks(ids, config.start_id, config.end_id, length)
    dataset = tf.data.Dataset.from_tensor_slices(({"token_ids": packed[:, :-1]}, packed[:, 1:]))
    if seed is not None:
        dataset = dataset.shuffle(len(packed), seed=seed, reshuffle_each_iteration=True)
    return dataset.batch(min(rows, len(packed)), drop_remainder=seed is not None).prefetch(tf.data.AUTOTUNE)


def perplexity(model, batches):
    """`(perplexity, tokens)` of `model` on `batches`: e to the mean negative log-likelihood of every label."""
    import keras

    total, count = 0.0, 0
    for inputs, labels in batches:
        logits = keras.ops.cast(model(inputs, training=False), "float32")
        log_probs = keras.ops.log_softmax(logits, axis=-1)
        chosen = keras.ops.take_along_axis(log_probs, keras.ops.expand_dims(labels, -1), axis=-1)
        total -= float(keras.ops.convert_to_numpy(keras.ops.sum(chosen)))
        count += int(np.prod(labels.shape))
    return math.exp(total / max(count, 1)), count
