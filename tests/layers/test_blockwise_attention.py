"""Attention in key blocks (the online softmax) equals plain attention: outputs and gradients, with masks."""

import numpy as np
import pytest
import tensorflow as tf

import keras_transformer as kt
from keras_transformer.layers import attention
from keras_transformer.layers.attention import scaled_dot_product_attention
from keras_transformer.layers.blockwise_attention import blockwise_attention

from layer_checks import run_layer_checks

BATCH, HEADS, LENGTH, DEPTH, BLOCK = 2, 3, 7, 4, 3  # 7 keys: blocks of 3, 3 and 1
RNG = np.random.default_rng(0)
QKV = [tf.constant(RNG.normal(size=(BATCH, HEADS, LENGTH, DEPTH)).astype("float32")) for _ in range(3)]
PADDING = np.arange(LENGTH)[None, None, None] < np.array([LENGTH, 5])[:, None, None, None]  # (batch, 1, 1, k_len)
TOLERANCE = dict(atol=1e-5, rtol=1e-6)  # the blocks sum in another order: a few float32 ulps of values up to ~30
CAUSAL = np.tril(np.ones((LENGTH, LENGTH), bool))[None, None]
RANDOM = RNG.random((BATCH, 1, LENGTH, LENGTH)) > 0.3
RANDOM[0, 0, 2] = False  # a query with no key at all: zero output, zero gradient
MASKS = {"none": None, "padding": PADDING, "full": RANDOM}


def _output_and_gradients(attend, jit):
    def run(q, k, v):
        with tf.GradientTape() as tape:
            tape.watch([q, k, v])
            output = attend(q, k, v)
            loss = tf.reduce_sum(output * tf.cos(output))  # a gradient that differs per output element
        return output, tape.gradient(loss, [q, k, v])

    return (tf.function(run, jit_compile=True) if jit else run)(*QKV)


@pytest.mark.parametrize("mask_name", sorted(MASKS))
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("jit", [False, True])
def test_blocks_equal_plain_attention_and_its_gradients(mask_name, causal, jit):
    mask = MASKS[mask_name]
    plain_mask = CAUSAL if causal and mask is None else np.logical_and(mask, CAUSAL) if causal else mask
    expected = _output_and_gradients(lambda q, k, v: scaled_dot_product_attention(q, k, v, plain_mask)[0], jit)
    blocks = _output_and_gradients(lambda q, k, v: blockwise_attention(q, k, v, mask, causal, BLOCK), jit)
    for want, got in zip([expected[0], *expected[1]], [blocks[0], *blocks[1]]):
        np.testing.assert_allclose(got.numpy(), want.numpy(), **TOLERANCE)


def _layer_pair(**kwargs):
    plain = kt.layers.MultiHeadAttention(8, 2, **kwargs)
    blocks = kt.layers.MultiHeadAttention(8, 2, key_block_size=BLOCK, **kwargs)
    x = tf.constant(RNG.normal(size=(BATCH, LENGTH, 8)).astype("float32"))
    plain(x, x)
    blocks(x, x)
    blocks.set_weights(plain.get_weights())
    return plain, blocks, x


@pytest.mark.parametrize("causal", [False, True])
def test_the_layer_with_blocks_equals_it_without(causal):
    plain, blocks, x = _layer_pair()
    padding = tf.constant(PADDING[:, 0, 0])  # (batch, k_len) key padding, read from the implicit-mask argument
    outputs = []
    for layer in (plain, blocks):
        with tf.GradientTape() as tape:
            output = layer(x, x, value_mask=padding, use_causal_mask=causal)
            loss = tf.reduce_sum(output**2)
        outputs.append((output, tape.gradient(loss, layer.trainable_weights)))
    for want, got in zip([outputs[0][0], *outputs[0][1]], [outputs[1][0], *outputs[1][1]]):
        np.testing.assert_allclose(got.numpy(), want.numpy(), **TOLERANCE)


def test_returning_scores_uses_the_plain_form():
    plain, blocks, x = _layer_pair()
    _, scores = blocks(x, x, return_attention_scores=True)
    assert tuple(scores.shape) == (BATCH, 2, LENGTH, LENGTH)


def test_blocks_need_no_attention_dropout():
    with pytest.raises(ValueError, match="key_block_size"):
        kt.layers.MultiHeadAttention(8, 2, dropout=0.1, key_block_size=4)
    with pytest.raises(ValueError, match="key_block_size"):
        kt.layers.MultiHeadAttention(8, 2, key_block_size=0)


def test_the_layer_with_blocks_passes_the_standard_checks(tmp_path):
    x = RNG.normal(size=(BATCH, LENGTH, 8)).astype("float32")
    run_layer_checks(
        kt.layers.MultiHeadAttention,
        {"d_model": 8, "num_heads": 2, "key_block_size": BLOCK},
        [x, x],
        tmp_path,
        {"use_causal_mask": True},
    )


def test_a_model_with_blocks_equals_it_without(monkeypatch):
    calls = []
    monkeypatch.setattr(
        attention, "blockwise_attention", lambda *a, **k: calls.append(1) or blockwise_attention(*a, **k)
    )
    options = dict(num_layers=1, d_model=8, num_heads=2, d_ff=16, max_length=16)
    plain = kt.build_transformer(50, 50, **options)
    blocks = kt.build_transformer(50, 50, key_block_size=BLOCK, **options)
    blocks.set_weights(plain.get_weights())
    inputs = {
        "encoder_inputs": np.array([[5, 6, 7, 8, 9, 10, 11], [5, 6, 7, 8, 0, 0, 0]], "int32"),
        "decoder_inputs": np.array([[1, 4, 5, 6, 7], [1, 4, 0, 0, 0]], "int32"),
    }
    calls.clear()
    np.testing.assert_allclose(blocks(inputs).numpy(), plain(inputs).numpy(), **TOLERANCE)
    assert len(calls) == 3  # encoder self-attention, decoder self- and cross-attention all ran in blocks
    assert blocks.config.key_block_size == BLOCK
    layer = blocks.get_layer("decoder_layer_0")
    assert layer.self_attention.key_block_size == layer.cross_attention.key_block_size == BLOCK
    assert kt.layers.DecoderLayer.from_config(layer.get_config()).cross_attention.key_block_size == BLOCK


def test_a_model_config_refuses_blocks_with_attention_dropout():
    with pytest.raises(ValueError, match="key_block_size"):
        kt.build_transformer(
            50, 50, num_layers=1, d_model=8, num_heads=2, d_ff=16, attention_dropout=0.1, key_block_size=4
        )
