"""BERT's recipe for an encoder-only preset (`bert-ko`): masked-LM pretraining, then a classifier fine-tuned.

Pretraining reads each pair of the corpus as BERT reads a sentence pair,
`[START] question [END] answer [END]` with segments 0 and 1 (START and END
are this package's `[CLS]` and `[SEP]`), and hides 15% of the real tokens
(never a special one), drawn anew for every batch: 80% of those become
`[MASK]` (the id after the tokenizer's last piece, `mask_id`), 10% a random
piece, 10% stay as they are, and the model learns to give back the tokens
at exactly those positions (the labels are 0, padding, everywhere else).
The batches are bucketed by length and sized by the preset's token budget,
as the translation pipeline's are.

Then `fine_tune_classifier` takes the best pretrained weights into a model
with a classification head (`encoder_head="classifier"`), trains it to the
corpus's own label column from `[START] question [END]`, and measures its
accuracy on the held-out (validation) questions against always answering
the training split's most common class.

Example:

>>> import tensorflow as tf
>>> tf.random.set_seed(0)
>>> inputs, labels = masked_tokens(tf.fill((4, 100), 10), vocab_size=50, mask=49)
>>> int(tf.reduce_sum(tf.cast(labels == 10, tf.int32))) in range(30, 100)
True
"""

import collections
import pathlib

from keras_transformer.config import END_ID, PAD_ID, START_ID

MASK_RATE = 0.15
MASK_SHARES = (0.8, 0.1, 0.1)  # of the hidden tokens: [MASK], a random piece, unchanged
FIRST_PIECE = 4  # ids 0-3 are PAD, UNK, START and END: never hidden, never drawn
FINE_TUNE_EPOCHS = 4
FINE_TUNE_RATE = 1e-4
CLASSIFIER = "classifier.keras"  # beside model.keras in the run directory
CLASSES = 3  # the chatbot corpus's labels: 0 everyday, 1 parting (negative), 2 love (positive)


def mask_id(config):
    """The `[MASK]` id of an encoder-only run: its last row, after the tokenizer's pieces."""
    return config.source_vocab_size - 1


def masked_tokens(token_ids, vocab_size, mask, rate=MASK_RATE, shares=MASK_SHARES):
    """`(inputs, labels)` of a batch of ids: 15% of the real tokens hidden (see the module); TensorFlow ops."""
    import tensorflow as tf

    shape = tf.shape(token_ids)
    hidden = tf.logical_and(token_ids >= FIRST_PIECE, tf.random.uniform(shape) < rate)
    draw = tf.random.uniform(shape)
    to_mask = tf.logical_and(hidden, draw < shares[0])
    to_random = tf.logical_and(hidden, tf.logical_and(draw >= shares[0], draw < shares[0] + shares[1]))
    random_ids = tf.random.uniform(shape, FIRST_PIECE, mask, dtype=tf.int32)
    inputs = tf.where(to_mask, mask, tf.where(to_random, random_ids, token_ids))
    return inputs, tf.where(hidden, token_ids, PAD_ID)


def _pair_ids(tokenizer, max_length):
    """A map from `{"source", "target"}` strings to `(token_ids, segment_ids)`: the pair as BERT reads it."""
    import tensorflow as tf

    half = (max_length - 3) // 2

    def ids(example):
        question = tf.cast(tokenizer.tokenize(example["source"]), tf.int32)[:, :half]
        answer = tf.cast(tokenizer.tokenize(example["target"]), tf.int32)
        answer = answer[:, : max_length - 3 - half]
        rows = tf.shape(question.row_lengths())[0]
        start, end = tf.fill([rows, 1], START_ID), tf.fill([rows, 1], END_ID)
        tokens = tf.concat([start, question, end, answer, end], axis=1)
        first = tf.zeros_like(tf.concat([start, question, end], axis=1))
        second = tf.ones_like(tf.concat([answer, end], axis=1))
        return tokens, tf.concat([first, second], axis=1)

    return ids


def _batched(dataset, lengths, data, drop_remainder):
    """Bucketed by length, padded to each bucket's boundary, `token_budget` tokens a batch."""
    boundaries = [b + 1 for b in data.bucket_boundaries]
    sizes = [max(1, data.token_budget // b) for b in data.bucket_boundaries] + [1]
    return dataset.bucket_by_sequence_length(
        lengths, boundaries, sizes, pad_to_bucket_boundary=True, drop_remainder=drop_remainder
    )


def make_datasets(preset, splits, tokenizers, seed, vocab_size):
    """`(train, validation)` masked-LM batches `({"token_ids", "segment_ids"}, labels)` of `splits`' pairs."""
    import tensorflow as tf

    data, mask = preset.data, vocab_size - 1
    ids = _pair_ids(tokenizers.source, min(preset.model.max_length, max(data.bucket_boundaries)))

    def batches(pairs, shuffle):
        sources, targets = zip(*pairs)
        dataset = tf.data.Dataset.from_tensor_slices({"source": list(sources), "target": list(targets)})
        dataset = dataset.batch(1024).map(ids).unbatch()
        dataset = dataset.map(lambda tokens, segments: (_dense(tokens), _dense(segments))).cache()
        if shuffle:
            dataset = dataset.shuffle(20_000, seed=seed, reshuffle_each_iteration=True)
        dataset = _batched(dataset, lambda tokens, segments: tf.shape(tokens)[0], data, drop_remainder=shuffle)

        def masked(tokens, segments):
            inputs, labels = masked_tokens(tokens, vocab_size, mask)
            return {"token_ids": inputs, "segment_ids": segments}, labels

        return dataset.map(masked).prefetch(tf.data.AUTOTUNE)

    return batches(splits["train"], True), batches(splits["validation"], False)


def _dense(row):
    """A row that `unbatch` left ragged (of ragged rank 0) as a plain vector."""
    import tensorflow as tf

    return row.flat_values if isinstance(row, tf.RaggedTensor) else tf.reshape(row, [-1])


def chatbot_labels():
    """`{(question, answer): label}` of the bundled chatbot corpus (its third column)."""
    from keras_transformer.datasets import corpora

    rows = corpora.read_chatbot(corpora.BUNDLED_DIR / "korean_chatbot" / corpora.CHATBOT_FILE)
    return {(question.strip(), answer.strip()): label for question, answer, label in rows}


def classification_batches(pairs, labels, tokenizer, max_length, batch_size=64, shuffle_seed=None):
    """`({"token_ids", "segment_ids"}, label)` batches of `[START] question [END]`, padded per batch."""
    import tensorflow as tf

    questions = [question for question, _ in pairs]
    classes = [labels[(question.strip(), answer.strip())] for question, answer in pairs]
    dataset = tf.data.Dataset.from_tensor_slices((questions, classes))

    def encode(texts, classes):
        tokens = tf.cast(tokenizer.tokenize(texts), tf.int32)[:, : max_length - 2]
        rows = tf.shape(tokens.row_lengths())[0]
        tokens = tf.concat([tf.fill([rows, 1], START_ID), tokens, tf.fill([rows, 1], END_ID)], axis=1)
        token_ids = tokens.to_tensor(PAD_ID)
        return {"token_ids": token_ids, "segment_ids": tf.zeros_like(token_ids)}, classes

    if shuffle_seed is not None:
        dataset = dataset.shuffle(len(questions), seed=shuffle_seed, reshuffle_each_iteration=True)
    return dataset.batch(batch_size).map(encode).prefetch(tf.data.AUTOTUNE)


def classifier_from(pretrained, num_classes=CLASSES):
    """An encoder-only classifier with every weight `pretrained` (a masked-LM model) has of the same path."""
    from keras_transformer.models import build_encoder_only

    config = pretrained.config.replace(encoder_head="classifier", num_classes=num_classes)
    classifier = build_encoder_only(config=config)
    weights = {weight.path: weight for weight in pretrained.weights}
    for weight in classifier.weights:
        source = weights.get(weight.path)
        if source is not None and tuple(source.shape) == tuple(weight.shape):
            weight.assign(source)
    return classifier


def fine_tune_classifier(run_dir, splits, tokenizer, seed=0, epochs=FINE_TUNE_EPOCHS, verbose=0):
    """Fine-tunes the run's best masked-LM model to the chatbot labels; returns the held-out figures.

    Writes `classifier.keras` beside `model.keras`. Returns `{"accuracy",
    "majority", "majority_class", "held_out", "epochs"}`: the accuracy on
    the validation questions, and that of always answering the training
    split's most common class.
    """
    import keras

    from keras_transformer import runs
    from keras_transformer.files import atomic

    run_dir = pathlib.Path(run_dir)
    pretrained = keras.saving.load_model(run_dir / runs.MODEL, compile=False)
    labels = chatbot_labels()
    max_length = pretrained.config.max_length
    train = classification_batches(splits["train"], labels, tokenizer, max_length, shuffle_seed=seed)
    held_out = classification_batches(splits["validation"], labels, tokenizer, max_length)
    # Not reseeded here: `keras.utils.set_random_seed` would drop the tokenizer's resources (see `SubwordTokenizer`);
    # the run seeded everything at its start.
    classifier = classifier_from(pretrained)
    classifier.compile(
        optimizer=keras.optimizers.Adam(FINE_TUNE_RATE),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    classifier.fit(train, epochs=epochs, verbose=verbose, shuffle=False)  # the dataset shuffles itself
    accuracy = float(classifier.evaluate(held_out, verbose=0, return_dict=True)["accuracy"])
    counts = collections.Counter(labels[(q.strip(), a.strip())] for q, a in splits["train"])
    majority_class = counts.most_common(1)[0][0]
    validation = [labels[(q.strip(), a.strip())] for q, a in splits["validation"]]
    majority = sum(label == majority_class for label in validation) / len(validation)

    with atomic.atomic_path(run_dir / CLASSIFIER, ".keras") as tmp:
        classifier.save(tmp)
    return {
        "accuracy": round(accuracy, 4),
        "majority": round(majority, 4),
        "majority_class": majority_class,
        "held_out": len(validation),
        "epochs": epochs,
    }
