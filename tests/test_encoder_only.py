"""`build_encoder_only` (BERT from the encoder's layers): segments, padding, its two heads, saving."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_transformer.layers import LearnedPositionEmbedding, MaskedLMHead
from keras_transformer.models import EncoderOnlyModel, build_encoder_only

SMALL = dict(num_layers=2, d_model=16, num_heads=2, d_ff=32, max_length=12)
IDS = np.array([[101, 5, 6, 102, 7, 102, 0, 0]], "int32")


@pytest.fixture(scope="module")
def masked_lm():
    keras.utils.set_random_seed(4)
    return build_encoder_only(120, **SMALL)


def logits(model, inputs):
    return ops.convert_to_numpy(model(inputs))


def test_padding_changes_no_real_tokens_logits(masked_lm):
    np.testing.assert_allclose(logits(masked_lm, IDS)[:, :6], logits(masked_lm, IDS[:, :6]), atol=1e-5)


def test_token_ids_alone_mean_segment_zero_and_segments_count(masked_lm):
    zeros, ones = np.zeros_like(IDS), (np.arange(8) >= 4).astype("int32")[None]
    alone = logits(masked_lm, IDS)
    np.testing.assert_allclose(alone, logits(masked_lm, {"token_ids": IDS, "segment_ids": zeros}), atol=1e-6)
    assert np.abs(alone - logits(masked_lm, {"token_ids": IDS, "segment_ids": ones})).max() > 1e-3


def test_the_masked_lm_head_is_the_transform_then_the_tied_embedding_with_its_bias(masked_lm):
    assert isinstance(masked_lm.head, MaskedLMHead) and masked_lm.encoder_embedding.output_bias
    assert isinstance(masked_lm.encoder_embedding.position_encoding, LearnedPositionEmbedding)
    names = {weight.path for weight in masked_lm.weights}
    assert "encoder_embedding/logits_bias" in names and not any(name.startswith("logits/") for name in names)


def test_a_saved_model_loads_with_its_config_and_logits(masked_lm, tmp_path):
    masked_lm.save(tmp_path / "model.keras")
    loaded = keras.saving.load_model(tmp_path / "model.keras")
    assert isinstance(loaded, EncoderOnlyModel) and loaded.config == masked_lm.config
    np.testing.assert_allclose(logits(loaded, IDS), logits(masked_lm, IDS), atol=1e-6)


def test_the_classifier_gives_class_logits_from_the_first_token(tmp_path):
    model = build_encoder_only(120, **SMALL, encoder_head="classifier", num_classes=3, dropout=0.0)
    first = logits(model, IDS)
    assert first.shape == (1, 3)
    later = IDS.copy()
    later[0, 4] = 9  # another token after [CLS]: attention carries it to the first position
    assert np.abs(logits(model, later) - first).max() > 1e-6
    model.save(tmp_path / "classifier.keras")
    np.testing.assert_allclose(logits(keras.saving.load_model(tmp_path / "classifier.keras"), IDS), first, atol=1e-6)


def test_a_classifier_without_classes_and_a_padding_start_are_refused():
    with pytest.raises(ValueError, match="needs `num_classes`"):
        build_encoder_only(120, **SMALL, encoder_head="classifier")
    with pytest.raises(ValueError, match="must not be its padding id"):
        build_encoder_only(120, **SMALL, start_id=0)


def test_an_encoder_only_model_generates_nothing(masked_lm):
    with pytest.raises(ValueError, match="no decoder"):
        masked_lm.decoder_step(None, 0, ())
