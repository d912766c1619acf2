"""tf.data pipeline: exact inputs/labels, static bucket shapes over a full epoch, seeded shuffling."""

import collections

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.datasets import corpora, pipeline
from keras_transformer.tokenizers import END_ID, START_ID, SubwordTokenizer


class CharTokenizer:
    """A toy tokenizer with known ids: one id per character, `ord(c) - 92` (so "a" -> 5)."""

    def tokenize(self, strings):
        return tf.strings.unicode_decode(strings, "UTF-8") - 92


def _pairs(*pairs):
    sources, targets = zip(*pairs)
    return tf.data.Dataset.from_tensor_slices({"source": list(sources), "target": list(targets)})


def _ids(text):
    return [ord(c) - 92 for c in text]


def _shapes(batches):
    shapes = collections.Counter()
    for inputs, labels in batches:
        assert inputs["encoder_inputs"].dtype == inputs["decoder_inputs"].dtype == labels.dtype == tf.int32
        assert inputs["decoder_inputs"].shape == labels.shape
        shapes[tuple(labels.shape)] += 1
        assert inputs["encoder_inputs"].shape[1] == labels.shape[1]
    return shapes


def test_inputs_and_labels_are_shifted_with_start_end_and_zero_padding():
    ds = _pairs(("abc", "xy"), ("ab", "xyzw"))
    inputs, labels = next(
        iter(pipeline.make_eval_batches(ds, CharTokenizer(), token_budget=16, bucket_boundaries=(8,), batch_multiple=1))
    )
    assert inputs["encoder_inputs"].numpy().tolist() == [_ids("abc") + [0] * 5, _ids("ab") + [0] * 6]
    assert inputs["decoder_inputs"].numpy().tolist() == [
        [START_ID] + _ids("xy") + [0] * 5,
        [START_ID] + _ids("xyzw") + [0] * 3,
    ]
    assert labels.numpy().tolist() == [_ids("xy") + [END_ID] + [0] * 5, _ids("xyzw") + [END_ID] + [0] * 3]
    with_end, _ = next(
        iter(
            pipeline.make_eval_batches(
                ds, CharTokenizer(), token_budget=16, bucket_boundaries=(8,), batch_multiple=1, add_source_end=True
            )
        )
    )
    assert with_end["encoder_inputs"].numpy()[0].tolist() == _ids("abc") + [END_ID] + [0] * 4


def test_bucket_choice_filter_and_truncate():
    # Longest of (source, [START] + target): 3 -> bucket 4, 5 -> bucket 8, 9 -> too long.
    ds = _pairs(("aaa", "bb"), ("aaaaa", "b"), ("a", "bbbbbbbb"))
    kept = list(
        pipeline.make_eval_batches(
            ds, CharTokenizer(), token_budget=16, bucket_boundaries=(4, 8), batch_multiple=1, length_policy="filter"
        )
    )
    assert sorted(tuple(labels.shape) for _, labels in kept) == [(1, 4), (1, 8)]
    cut = list(
        pipeline.make_eval_batches(ds, CharTokenizer(), token_budget=16, bucket_boundaries=(4, 8), batch_multiple=1)
    )  # evaluation truncates by default
    assert sorted(tuple(labels.shape) for _, labels in cut) == [(1, 4), (2, 8)]
    longest = [labels.numpy()[0] for _, labels in cut if labels.shape[0] == 2][0]
    assert longest.tolist() in (_ids("b") + [END_ID] + [0] * 6, _ids("bbbbbbb") + [END_ID])


def test_bucket_shapes_respect_the_token_budget():
    assert pipeline.bucket_shapes(4096, (16, 32, 64)) == [(256, 16), (128, 32), (64, 64)]
    assert pipeline.bucket_shapes(1000, (10, 48, 100), batch_multiple=8) == [(96, 10), (16, 48), (8, 100)]
    assert all(b * length <= 1000 for b, length in pipeline.bucket_shapes(1000, (10, 48, 100)))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(bucket_boundaries=(32, 16)), "bucket_boundaries"),
        (dict(token_budget=64, bucket_boundaries=(16, 128)), "token_budget=64"),
        (dict(max_length=200), "max_length=200"),
        (dict(length_policy="drop"), "length_policy='drop'"),
        (dict(batch_multiple=0), "batch_multiple=0"),
    ],
)
def test_argument_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        pipeline.make_batches(_pairs(("a", "b")), CharTokenizer(), **kwargs)


@pytest.fixture(scope="module")
def multi30k(shared_data_dir):
    """Multi30k en-de and a small shared vocabulary trained on 3,000 lines (~1 s)."""
    pairs = corpora.load_pairs("multi30k-en-de", shared_data_dir)[:3000]
    tokenizer = SubwordTokenizer.train([s for s, _ in pairs] + [t for _, t in pairs], vocab_size=2000)
    return shared_data_dir, tokenizer


def test_full_training_epoch_has_only_the_configured_shapes(multi30k):
    data_dir, tokenizer = multi30k
    config = dict(token_budget=4096, bucket_boundaries=(16, 32, 64), batch_multiple=8)
    batches = pipeline.make_batches(corpora.load_corpus("multi30k-en-de", data_dir), tokenizer, seed=0, **config)
    shapes = _shapes(batches)
    assert set(shapes) <= set(pipeline.bucket_shapes(**config)) and len(shapes) >= 2
    kept = sum(size * count for (size, _), count in shapes.items())
    assert 28_000 < kept <= 29_000  # only the last partial batch of each bucket (and rare >64 pairs) dropped


def test_eval_keeps_every_example_with_bounded_shapes(multi30k):
    data_dir, tokenizer = multi30k
    config = dict(token_budget=2048, bucket_boundaries=(16, 32, 64), batch_multiple=8)
    validation = corpora.load_corpus("multi30k-en-de", data_dir, split="validation")
    shapes = _shapes(pipeline.make_eval_batches(validation, tokenizer, **config))
    assert sum(size * count for (size, _), count in shapes.items()) == 1014
    full = dict((length, size) for size, length in pipeline.bucket_shapes(**config))
    per_bucket = collections.Counter(length for _, length in shapes)
    assert all(n <= 2 for n in per_bucket.values())  # the full batch size and one remainder
    assert all(size <= full[length] for size, length in shapes)


def test_shuffle_is_seeded_and_reshuffles_each_epoch(multi30k):
    data_dir, tokenizer = multi30k
    ds = corpora.load_corpus("multi30k-en-de", data_dir, split="validation")

    def first_batch(batches):
        return next(iter(batches))[1].numpy()

    a = pipeline.make_batches(ds, tokenizer, seed=7, token_budget=512, bucket_boundaries=(16, 32, 64))
    b = pipeline.make_batches(ds, tokenizer, seed=7, token_budget=512, bucket_boundaries=(16, 32, 64))
    np.testing.assert_array_equal(first_batch(a), first_batch(b))
    epoch1, epoch2 = [np.concatenate([y.numpy()[:, :16].ravel() for _, y in a]) for _ in range(2)]
    assert not np.array_equal(epoch1, epoch2)


def test_separate_target_tokenizer(multi30k):
    data_dir, tokenizer = multi30k
    ds = _pairs(("Ein Hund.", "abc"))
    inputs, labels = next(
        iter(
            pipeline.make_eval_batches(
                ds, tokenizer, CharTokenizer(), token_budget=64, bucket_boundaries=(16,), batch_multiple=1
            )
        )
    )
    assert labels.numpy()[0, :4].tolist() == _ids("abc") + [END_ID]
    assert tokenizer.detokenize(inputs["encoder_inputs"]).numpy()[0] == b"Ein Hund."


def test_padded_eval_batches_have_one_shape_per_bucket_and_keep_every_example(multi30k):
    data_dir, tokenizer = multi30k
    config = dict(token_budget=2048, bucket_boundaries=(16, 32, 64), batch_multiple=8)
    validation = corpora.load_corpus("multi30k-en-de", data_dir, split="validation")
    batches = list(pipeline.make_eval_batches(validation, tokenizer, pad_batches=True, **config))
    shapes = {tuple(labels.shape) for _, labels in batches}
    assert shapes <= set(pipeline.bucket_shapes(**config))
    real_rows = sum(int((labels.numpy() != 0).any(axis=1).sum()) for _, labels in batches)
    assert real_rows == 1014


def test_a_sampling_tokenizer_gets_new_segmentations_every_epoch(multi30k):
    data_dir, tokenizer = multi30k
    validation = corpora.load_corpus("multi30k-en-de", data_dir, split="validation").take(300)
    batches = pipeline.make_batches(
        validation, tokenizer.sampler(alpha=0.3), training=False, token_budget=2048, bucket_boundaries=(16, 32, 64, 128)
    )
    epochs = [[labels.numpy() for _, labels in batches] for _ in range(2)]
    texts = [sorted(text for labels in epoch for text in tokenizer.detokenize(labels).numpy()) for epoch in epochs]
    assert len(texts[0]) == 300 and texts[0] == texts[1]  # the same sentences (the strings are cached) ...
    assert any(a.shape != b.shape or (a != b).any() for a, b in zip(*epochs))  # ... split another way


def test_batches_run_without_tf_data_autotuning(multi30k):
    """Its background thread stalled `fit` for up to a minute when Keras deleted an epoch's iterator."""
    _, tokenizer = multi30k
    assert pipeline.make_batches(_pairs(("a", "b")), tokenizer, seed=0).options().autotune.enabled is False
    assert pipeline.make_eval_batches(_pairs(("a", "b")), tokenizer).options().autotune.enabled is False
