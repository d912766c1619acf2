"""The `bert-ko` preset: masked-LM pretraining by `train`, then a classifier fine-tuned to the corpus's labels."""

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import export, runs
from keras_transformer.models import build_encoder_only
from keras_transformer.presets import get_preset
from keras_transformer.training import masked_lm, train

SMALL = dict(num_layers=1, d_model=64, d_ff=128, vocab_size=1000, character_coverage=0.98, bucket_boundaries=(64,))


def test_masking_hides_15_percent_of_real_tokens_80_10_10():
    tf.random.set_seed(1)
    ids = tf.concat(
        [tf.fill((200, 1), 2), tf.random.uniform((200, 99), 4, 500, tf.int32), tf.zeros((200, 20), tf.int32)], 1
    )
    inputs, labels = (t.numpy() for t in masked_lm.masked_tokens(ids, vocab_size=501, mask=500))
    hidden = labels != 0
    assert not hidden[:, 0].any() and not hidden[:, 100:].any()  # START and padding never hidden
    assert 0.14 < hidden[:, 1:100].mean() < 0.16
    np.testing.assert_array_equal(labels[hidden], ids.numpy()[hidden])
    masked = (inputs == 500)[hidden].mean()
    unchanged = (inputs == ids.numpy())[hidden].mean()
    assert 0.77 < masked < 0.83 and 0.08 < unchanged < 0.13
    np.testing.assert_array_equal(inputs[~hidden], ids.numpy()[~hidden])


def test_the_classifier_starts_from_every_pretrained_weight_of_its_encoder():
    pretrained = build_encoder_only(
        100, num_layers=1, d_model=16, num_heads=2, d_ff=32, max_length=16, start_id=2, end_id=3
    )
    classifier = masked_lm.classifier_from(pretrained)
    shared = {w.path: w for w in pretrained.weights}
    copied = [w for w in classifier.weights if w.path in shared]
    assert len(copied) >= 15 and all(np.array_equal(w.numpy(), shared[w.path].numpy()) for w in copied)
    assert classifier.config.encoder_head == "classifier" and classifier.config.num_classes == 3


def test_train_pretrains_then_fine_tunes_and_records_held_out_accuracy(tmp_path):
    run = tmp_path / "bert-ko"
    train("bert-ko", run, epochs=1, max_examples=600, verbose=0, **SMALL)
    config = runs.RunConfig.read(run)
    assert config.model.architecture == "encoder_only" and config.model.source_vocab_size == 1001  # + [MASK]
    figures = config.classifier
    assert figures["held_out"] == 591 and 0.0 <= figures["accuracy"] <= 1.0 and figures["majority"] > 0.3
    assert (run / masked_lm.CLASSIFIER).is_file() and masked_lm.CLASSIFIER in config.files
    with pytest.raises(ValueError, match="encoder-only model"):
        export.load(run)


def test_the_preset_is_bert_from_the_encoder():
    model = get_preset("bert-ko").model
    assert (model.architecture, model.segment_vocab_size, model.embedding_norm, model.encoder_head) == (
        "encoder_only",
        2,
        True,
        "masked_lm",
    )


@pytest.mark.slow
def test_fine_tuning_beats_the_majority_class_on_the_held_out_questions(tmp_path):
    run = tmp_path / "bert-ko"
    train("bert-ko", run, epochs=2, verbose=0)
    figures = runs.RunConfig.read(run).classifier
    assert figures["accuracy"] > figures["majority"] + 0.1, figures
