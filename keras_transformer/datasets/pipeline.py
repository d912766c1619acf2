"""tf.data pipelines: string pairs -> length-bucketed, token-budgeted, padded id batches.

Each batch is `({"encoder_inputs": (B, L), "decoder_inputs": (B, L)}, labels (B, L))`,
all int32, where for a pair of token-id lists `src`, `tgt`:

    encoder_inputs = src              (+ [END] if `add_source_end=True`; off by default)
    decoder_inputs = [START] + tgt    (teacher forcing: the decoder reads the previous token)
    labels         = tgt + [END]      (the next token at every position; padding is ignored by the loss)

A `Frame` adds ids around them: a multilingual model's language tokens
(`[src_lang] src [END]`, `[START] [tgt_lang] tgt`, `[tgt_lang] tgt [END]`,
as transformers' NLLB and M2M100 tokenizers frame a pair).

START, END and the padding are the tokenizers' ids (`pad_id`, `start_id`,
`end_id`: 0, 2 and 3 for this package's own, `keras_transformer.config`; an
imported model's own): the source side is padded with the source
tokenizer's padding id, the decoder inputs and labels with the target's.

An example goes to the smallest bucket length `L` in `bucket_boundaries`
that holds both its encoder and its decoder sequence, and every bucket's
batches have `B = token_budget // L` rows (rounded down to a multiple of
`batch_multiple`), so a training epoch has exactly one shape per bucket
(`bucket_shapes`) and XLA compiles only that many programs. Examples longer
than `max_length` (default: the largest boundary) are dropped (`"filter"`,
training default) or cut (`"truncate"`, evaluation default; the cut target
still ends with END).

Example:

>>> train = load_corpus("multi30k-en-de", split="train")
>>> batches = make_batches(train, tokenizer, token_budget=4096, seed=0)
>>> (inputs, labels) = next(iter(batches))
>>> inputs["encoder_inputs"].shape, labels.shape
(TensorShape([128, 32]), TensorShape([128, 32]))
"""

from typing import NamedTuple

import tensorflow as tf

from keras_transformer.config import END_ID, PAD_ID, START_ID

DEFAULT_BUCKETS = (16, 32, 48, 64, 96, 128)
AUTOTUNE = tf.data.AUTOTUNE
# The autotuner's background thread made `model.fit` stall for up to a minute, at
# 0% CPU, when Keras deleted an epoch's iterator (`benchmarks/epoch_stalls.py`;
# the figures are in docs/performance.md). These pipelines are
# cheap: fixed parallelism does.
_WITHOUT_AUTOTUNING = tf.data.Options()
_WITHOUT_AUTOTUNING.autotune.enabled = False


def _check_buckets(bucket_boundaries, token_budget, batch_multiple):
    boundaries = tuple(bucket_boundaries)
    if not boundaries or list(boundaries) != sorted(set(boundaries)) or boundaries[0] < 2:
        raise ValueError(
            "`bucket_boundaries` must be strictly increasing lengths >= 2. "
            f"Received: bucket_boundaries={bucket_boundaries!r}"
        )
    if not isinstance(batch_multiple, int) or batch_multiple < 1:
        raise ValueError(f"`batch_multiple` must be a positive int. Received: batch_multiple={batch_multiple!r}")
    if not isinstance(token_budget, int) or token_budget < boundaries[-1]:
        raise ValueError(
            "`token_budget` must be an int at least the largest bucket length "
            f"({boundaries[-1]}). Received: token_budget={token_budget!r}"
        )
    return boundaries


def bucket_shapes(token_budget=4096, bucket_boundaries=DEFAULT_BUCKETS, batch_multiple=8):
    """Returns the `(batch_size, length)` of each bucket, shortest first.

    Example:

    >>> bucket_shapes(4096, (16, 32, 64))
    [(256, 16), (128, 32), (64, 64)]
    """
    boundaries = _check_buckets(bucket_boundaries, token_budget, batch_multiple)
    shapes = []
    for length in boundaries:
        size = token_budget // length
        if size >= batch_multiple:
            size -= size % batch_multiple
        shapes.append((size, length))
    return shapes


def tokenize_pairs(dataset, source_tokenizer, target_tokenizer=None, batch_size=1024):
    """Maps `{"source", "target"}` strings to `{"source", "target"}` int32 id vectors (no START/END).

    Tokenizes `batch_size` strings per call (much faster than one by one);
    other keys (e.g. `"label"`) are dropped. `target_tokenizer` defaults to
    `source_tokenizer` (a shared vocabulary).
    """
    target_tokenizer = target_tokenizer or source_tokenizer

    def tokenize(example):
        return {
            "source": tf.cast(source_tokenizer.tokenize(example["source"]), tf.int32),
            "target": tf.cast(target_tokenizer.tokenize(example["target"]), tf.int32),
        }

    return dataset.batch(batch_size).map(tokenize, num_parallel_calls=AUTOTUNE).unbatch()


class Frame(NamedTuple):
    """Ids around every pair beyond START and END: a multilingual model's language tokens.

    Args:
        source_first: ids before each source (NLLB's and M2M100's `[src_lang]`).
        source_last: ids after each source, after its END (NLLB's
            `legacy_behaviour`: `X </s> [src_lang]`).
        target_first: ids that begin each target: the decoder reads them
            after START, and the labels start with them (`[tgt_lang]`).
    """

    source_first: tuple = ()
    source_last: tuple = ()
    target_first: tuple = ()


class _Ids(NamedTuple):
    """The ids that frame and pad a pair: the source's END and padding, the target's START, END and padding."""

    source_end: int
    source_pad: int
    start: int
    end: int
    target_pad: int

    @classmethod
    def of(cls, source_tokenizer, target_tokenizer):
        """The tokenizers' ids; a tokenizer without them (any `tokenize`) has this package's reserved ids."""

        def get(tokenizer, name, default):
            return int(getattr(tokenizer, name, default))

        return cls(
            get(source_tokenizer, "end_id", END_ID),
            get(source_tokenizer, "pad_id", PAD_ID),
            get(target_tokenizer, "start_id", START_ID),
            get(target_tokenizer, "end_id", END_ID),
            get(target_tokenizer, "pad_id", PAD_ID),
        )


def _limit_length(dataset, max_length, policy, add_source_end, frame):
    source_room = max_length - int(add_source_end) - len(frame.source_first) - len(frame.source_last)
    target_room = max_length - 1 - len(frame.target_first)  # room for START (inputs) / END (labels)
    if policy == "filter":
        return dataset.filter(
            lambda ex: tf.logical_and(tf.size(ex["source"]) <= source_room, tf.size(ex["target"]) <= target_room)
        )
    if policy == "truncate":
        return dataset.map(
            lambda ex: {"source": ex["source"][:source_room], "target": ex["target"][:target_room]},
            num_parallel_calls=AUTOTUNE,
        )
    raise ValueError(f"`length_policy` must be 'filter' or 'truncate'. Received: length_policy={policy!r}")


def _to_model_inputs(example, add_source_end, ids, frame):
    source, target = example["source"], example["target"]

    def constant(values):
        return tf.constant(values, tf.int32, shape=[len(values)])

    end = [ids.source_end] if add_source_end else []
    source = tf.concat([constant(frame.source_first), source, constant(end + list(frame.source_last))], axis=0)
    target = tf.concat([constant(frame.target_first), target], axis=0)
    decoder_inputs = tf.concat([[ids.start], target], axis=0)
    labels = tf.concat([target, [ids.end]], axis=0)
    return {"encoder_inputs": source, "decoder_inputs": decoder_inputs}, labels


def _pad_rows(inputs, labels, size, ids):
    """Appends all-padding rows up to `size`: they count in no loss or metric."""
    missing = size - tf.shape(labels, out_type=tf.int64)[0]

    def pad(tensor, value):
        return tf.pad(tensor, [[0, missing], [0, 0]], constant_values=value)

    padded = {"encoder_inputs": pad(inputs["encoder_inputs"], ids.source_pad)}
    padded["decoder_inputs"] = pad(inputs["decoder_inputs"], ids.target_pad)
    return padded, pad(labels, ids.target_pad)


def _bucket_and_batch(dataset, shapes, drop_remainder, ids, pad_batches=False):
    lengths = tf.constant([length for _, length in shapes], tf.int32)
    sizes = tf.constant([size for size, _ in shapes], tf.int64)

    def bucket_id(inputs, labels):
        length = tf.maximum(tf.size(inputs["encoder_inputs"]), tf.size(labels))
        return tf.cast(tf.searchsorted(lengths, [length], side="left")[0], tf.int64)

    def batch_bucket(key, window):
        length = tf.cast(tf.gather(lengths, key), tf.int64)
        size = tf.gather(sizes, key)
        padded = ({"encoder_inputs": [length], "decoder_inputs": [length]}, [length])
        values = ({"encoder_inputs": ids.source_pad, "decoder_inputs": ids.target_pad}, ids.target_pad)
        batches = window.padded_batch(size, padded, padding_values=values, drop_remainder=drop_remainder)
        if pad_batches and not drop_remainder:
            batches = batches.map(lambda inputs, labels: _pad_rows(inputs, labels, size, ids))
        return batches

    return dataset.group_by_window(bucket_id, batch_bucket, window_size_func=lambda key: tf.gather(sizes, key))


def make_batches(
    dataset,
    source_tokenizer,
    target_tokenizer=None,
    *,
    token_budget=4096,
    bucket_boundaries=DEFAULT_BUCKETS,
    batch_multiple=8,
    max_length=None,
    length_policy="filter",
    add_source_end=False,
    frame=None,
    training=True,
    shuffle_buffer=20_000,
    seed=None,
    cache=True,
    pad_batches=False,
):
    """Turns `{"source", "target"}` strings into bucketed, padded batches for `model.fit`.

    Args:
        dataset: a `tf.data.Dataset` of `{"source": str, "target": str}`,
            e.g. from `load_corpus` or a tensorflow-datasets builder.
        source_tokenizer: anything with `tokenize(strings) -> RaggedTensor`,
            e.g. a `SubwordTokenizer`, or its `sampler()` for subword
            regularization (a new segmentation every epoch).
        target_tokenizer: the target side's tokenizer; defaults to `source_tokenizer`.
        token_budget: int, about this many tokens (rows x length) per batch.
        bucket_boundaries: increasing padded lengths, one per bucket.
        batch_multiple: round each bucket's batch size down to a multiple of this.
        max_length: int, the longest sequence kept; default and at most
            `bucket_boundaries[-1]`.
        length_policy: `"filter"` drops longer examples, `"truncate"` cuts them.
        add_source_end: bool, append END to the encoder inputs (the export
            code must then do the same).
        frame: a `Frame`, the ids around each pair beyond START and END (a
            multilingual model's language tokens); None: none.
        training: bool; True shuffles (seeded by `seed`) and drops each
            bucket's last partial batch, so only `bucket_shapes(...)` occur.
            False keeps the order and every example (at most one extra,
            smaller batch per bucket).
        shuffle_buffer: int, examples in the shuffle buffer (training only).
        seed: int or None, the shuffle seed; epochs are reshuffled.
        cache: True caches the tokenized, framed examples in memory (the
            strings, with a sampling tokenizer), a string caches them in
            files with that prefix, False does not cache.
        pad_batches: bool; with `training=False`, fill each bucket's last
            batch with all-padding rows (which count in no loss or metric) so
            that evaluation, too, has one shape per bucket and XLA compiles
            no extra program for the remainders.

    Returns:
        A `tf.data.Dataset` of `({"encoder_inputs": int32 (B, L),
        "decoder_inputs": int32 (B, L)}, labels int32 (B, L))`, prefetched,
        with tf.data's autotuning off (its thread stalled `fit` for up to a
        minute between epochs).
    """
    shapes = bucket_shapes(token_budget, bucket_boundaries, batch_multiple)
    max_length = bucket_boundaries[-1] if max_length is None else max_length
    if not isinstance(max_length, int) or not 2 <= max_length <= bucket_boundaries[-1]:
        raise ValueError(
            f"`max_length` must be an int in [2, {bucket_boundaries[-1]}] (the largest bucket). "
            f"Received: max_length={max_length!r}"
        )

    def cache_and_shuffle(dataset):
        if cache:
            dataset = dataset.cache("" if cache is True else cache)
        if training:
            dataset = dataset.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
        return dataset

    # Cached after the deterministic work, so that later epochs only shuffle and
    # batch; before tokenizing when a tokenizer samples, so every epoch samples anew.
    resample = any(getattr(t, "samples_segmentation", False) for t in (source_tokenizer, target_tokenizer))
    if resample:
        dataset = cache_and_shuffle(dataset)
    ids = _Ids.of(source_tokenizer, target_tokenizer or source_tokenizer)
    examples = tokenize_pairs(dataset, source_tokenizer, target_tokenizer)
    frame = Frame() if frame is None else Frame(*(tuple(int(i) for i in part) for part in frame))
    examples = _limit_length(examples, max_length, length_policy, add_source_end, frame)
    examples = examples.map(lambda ex: _to_model_inputs(ex, add_source_end, ids, frame), num_parallel_calls=AUTOTUNE)
    if not resample:
        examples = cache_and_shuffle(examples)
    batches = _bucket_and_batch(examples, shapes, training, ids, pad_batches=pad_batches)
    return batches.prefetch(AUTOTUNE).with_options(_WITHOUT_AUTOTUNING)


def make_eval_batches(dataset, source_tokenizer, target_tokenizer=None, **kwargs):
    """`make_batches` for validation and test: no shuffle, nothing dropped, long examples truncated.

    Example:

    >>> val = make_eval_batches(load_corpus("multi30k-en-de", split="validation"), tokenizer)
    """
    kwargs.setdefault("length_policy", "truncate")
    return make_batches(dataset, source_tokenizer, target_tokenizer, training=False, **kwargs)
