"""The layers T5 and mBART bring: the relative position bias, RMS normalization, the gated feed-forward, narrow heads.

The bias's buckets are held against transformers' own (`reference_logits.npz`
of tests/data/t5_mbart/t5, from `T5Attention._relative_position_bucket`); a
T5-shaped model attends in key blocks as it does at once.
"""

import pathlib

import keras
import numpy as np
import pytest
from keras import ops

import keras_transformer as kt
from keras_transformer.config import ModelConfig
from keras_transformer.layers.normalization import RMSNormalization
from keras_transformer.layers.relative_position_bias import RelativePositionBias, relative_position_bucket

from layer_checks import run_layer_checks

REFERENCE = pathlib.Path(__file__).resolve().parents[1] / "data" / "t5_mbart" / "t5" / "reference_logits.npz"
RNG = np.random.default_rng(0)
HIDDEN = RNG.normal(size=(3, 6, 16)).astype("float32")
IDS = np.array([[5, 9, 2, 0, 0, 0], [3, 1, 4, 1, 5, 0], [7, 0, 0, 0, 0, 0]], dtype="int32")
T5_LIKE = dict(
    source_vocab_size=40,
    target_vocab_size=40,
    num_layers=2,
    d_model=16,
    num_heads=3,
    key_dim=4,  # 12 wide: not d_model, as flan-t5-small's 6 x 64 of 512
    d_ff=24,
    dropout=0.0,
    max_length=32,
    share_embeddings=True,
    tie_output_embedding=True,
    norm_first=True,
    activation="gelu_tanh",
    position_layout="relative",
    scale_embeddings=False,
    norm="rms",
    feed_forward="gated",
    use_bias=False,
    scale_attention=False,
    scale_output=True,
    start_id=0,
    end_id=1,
)


@pytest.mark.parametrize(
    "layer_class, init_kwargs, inputs",
    [
        (kt.PositionwiseFeedForward, dict(d_model=16, d_ff=32, gated=True, use_bias=False), [HIDDEN]),
        (RMSNormalization, dict(epsilon=1e-6), [HIDDEN]),
        (
            kt.EncoderLayer,
            dict(d_model=16, num_heads=3, d_ff=32, norm_first=True, norm="rms", key_dim=4, scale_attention=False),
            [HIDDEN],
        ),
    ],
    ids=["gated_feed_forward", "rms_normalization", "t5_encoder_layer"],
)
def test_standard_layer_checks(layer_class, init_kwargs, inputs, tmp_path):
    run_layer_checks(layer_class, init_kwargs, inputs, tmp_path)


def test_the_bias_layer_round_trips_and_computes_in_the_policy_dtype(tmp_path):
    """The standard checks but `fit`: its output is one bias for the whole batch, `(1, heads, length, length)`."""
    options = dict(num_heads=4, num_buckets=8, max_distance=20, bidirectional=False)
    layer = RelativePositionBias(**options)
    config = layer.get_config()
    assert {name: config[name] for name in options} == options
    assert RelativePositionBias.from_config(config).get_config() == config
    inputs = keras.Input((None, 16))
    model = keras.Model(inputs, layer(inputs))
    eager = ops.convert_to_numpy(layer(HIDDEN))
    np.testing.assert_array_equal(model.predict(HIDDEN, verbose=0), eager)
    assert eager.shape == (1, 4, 6, 6)
    model.save(tmp_path / "bias.keras")
    np.testing.assert_array_equal(keras.models.load_model(tmp_path / "bias.keras").predict(HIDDEN, verbose=0), eager)
    half = RelativePositionBias(**options, dtype="mixed_float16")
    assert keras.backend.standardize_dtype(half(HIDDEN).dtype) == "float16"


def test_buckets_equal_transformers_in_both_directions():
    reference = np.load(REFERENCE)
    distances = reference["bucket_distances"]
    for name, bidirectional in (("buckets_bidirectional", True), ("buckets_causal", False)):
        ours = ops.convert_to_numpy(relative_position_bucket(distances, bidirectional, 32, 128))
        np.testing.assert_array_equal(ours, reference[name])


def test_the_bias_of_a_cached_step_is_its_row_of_the_full_bias():
    bias = RelativePositionBias(num_heads=2, bidirectional=False)
    full = ops.convert_to_numpy(bias(ops.zeros((1, 9))))  # (1, heads, 9, 9)
    step = ops.convert_to_numpy(bias(ops.zeros((1, 1)), query_start=5, key_length=9))
    np.testing.assert_array_equal(step[0, :, 0], full[0, :, 5])
    beams = ops.convert_to_numpy(bias.between(ops.convert_to_tensor([5]), ops.arange(18) // 2))  # two per position
    np.testing.assert_array_equal(beams[0, :, 0, ::2], full[0, :, 5])


def test_rms_normalization_is_t5s_and_keeps_the_mask():
    x = RNG.normal(size=(2, 3, 8)).astype("float32")
    norm = RMSNormalization(epsilon=1e-6)
    expected = x / np.sqrt((x**2).mean(-1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(ops.convert_to_numpy(norm(x)), expected, rtol=1e-5)
    assert norm.compute_mask(x, np.ones((2, 3), bool)) is not None


def test_bad_options_are_named():
    with pytest.raises(ValueError, match="`norm` must be one of"):
        kt.EncoderLayer(16, 4, 32, norm="batch")
    with pytest.raises(ValueError, match="`num_buckets` must leave"):
        RelativePositionBias(4, num_buckets=2)
    with pytest.raises(ValueError, match="`scale_output=True` scales the tied"):
        ModelConfig(**{**T5_LIKE, "tie_output_embedding": False}).check()
    with pytest.raises(ValueError, match="`relative_attention_num_buckets` must be at least 4"):
        ModelConfig(**{**T5_LIKE, "relative_attention_num_buckets": 3}).check()


def test_a_t5_model_attends_in_key_blocks_as_at_once_and_saves(tmp_path):
    plain = kt.build_transformer(config=ModelConfig(**T5_LIKE))
    blocks = kt.build_transformer(config=ModelConfig(**T5_LIKE, key_block_size=4))
    blocks.set_weights(plain.get_weights())
    inputs = {"encoder_inputs": IDS, "decoder_inputs": IDS[:, ::-1].copy()}
    expected = ops.convert_to_numpy(plain(inputs))
    np.testing.assert_allclose(ops.convert_to_numpy(blocks(inputs)), expected, atol=1e-5)
    blocks.save(tmp_path / "t5.keras")
    reloaded = keras.models.load_model(tmp_path / "t5.keras")
    np.testing.assert_allclose(ops.convert_to_numpy(reloaded(inputs)), expected, atol=1e-5)
    assert reloaded.config == blocks.config
