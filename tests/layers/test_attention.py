"""Attention: the seed tutorial's numbers, masks, the cache, and bad input."""

import keras
import numpy as np
import pytest
from keras import ops

import keras_transformer as kt
from keras_transformer.layers.hash_dropout import HashDropout

from conftest import TINY

KEYS = np.array([[10, 0, 0], [0, 10, 0], [0, 0, 10], [0, 0, 10]], dtype="float32")
VALUES = np.array([[1, 0], [10, 0], [100, 5], [1000, 6]], dtype="float32")


def test_seed_tutorial_single_queries():
    output, weights = kt.scaled_dot_product_attention(np.array([[0, 10, 0]], "float32"), KEYS, VALUES)
    np.testing.assert_allclose(ops.convert_to_numpy(weights), [[0, 1, 0, 0]], atol=1e-6)
    np.testing.assert_allclose(ops.convert_to_numpy(output), [[10, 0]], atol=1e-5)

    output, weights = kt.scaled_dot_product_attention(np.array([[0, 0, 10]], "float32"), KEYS, VALUES)
    np.testing.assert_allclose(ops.convert_to_numpy(weights), [[0, 0, 0.5, 0.5]], atol=1e-6)
    np.testing.assert_allclose(ops.convert_to_numpy(output), [[550, 5.5]], atol=1e-4)


def test_seed_tutorial_three_queries():
    queries = np.array([[0, 0, 10], [0, 10, 0], [10, 10, 0]], dtype="float32")
    output, weights = kt.scaled_dot_product_attention(queries, KEYS, VALUES)
    np.testing.assert_allclose(
        ops.convert_to_numpy(weights),
        [[0, 0, 0.5, 0.5], [0, 1, 0, 0], [0.5, 0.5, 0, 0]],
        atol=1e-6,
    )
    np.testing.assert_allclose(ops.convert_to_numpy(output), [[550, 5.5], [10, 0], [5.5, 0]], atol=1e-4)


def test_masked_keys_get_exactly_zero_weight_and_empty_rows_are_zero():
    rng = np.random.default_rng(1)
    q, k, v = (rng.normal(size=(2, 3, 4)).astype("float32") for _ in range(3))
    mask = np.array([[[1, 1, 0]] * 3, [[0, 0, 0]] * 3], dtype=bool)
    output, weights = kt.scaled_dot_product_attention(q, k, v, mask=mask)
    weights = ops.convert_to_numpy(weights)
    assert (weights[0, :, 2] == 0).all()
    np.testing.assert_allclose(weights[0].sum(-1), 1.0, rtol=1e-6)
    assert (weights[1] == 0).all() and (ops.convert_to_numpy(output)[1] == 0).all()


def test_a_single_key_gets_all_the_weight_without_a_warning(recwarn):
    q, k, v = np.ones((2, 3, 4), "float32"), np.full((2, 1, 4), 3.0, "float32"), np.full((2, 1, 2), 7.0, "float32")
    mask = np.array([[[1]] * 3, [[1], [0], [1]]], dtype=bool)
    output, weights = kt.scaled_dot_product_attention(q, k, v, mask=mask)
    np.testing.assert_array_equal(ops.convert_to_numpy(weights)[..., 0], [[1, 1, 1], [1, 0, 1]])
    np.testing.assert_array_equal(ops.convert_to_numpy(output)[1, :, 0], [7, 0, 7])
    output, weights = kt.scaled_dot_product_attention(q, k, v)
    assert (ops.convert_to_numpy(weights) == 1).all()
    assert not [w for w in recwarn if "softmax" in str(w.message)]


def test_masks_are_true_where_attention_is_allowed():
    np.testing.assert_array_equal(ops.convert_to_numpy(kt.padding_mask(np.array([[4, 2, 0]]))), [[True, True, False]])
    np.testing.assert_array_equal(ops.convert_to_numpy(kt.causal_mask(3)), np.tril(np.ones((3, 3), bool)))


def test_key_dim_is_d_model_over_heads():
    mha = kt.MultiHeadAttention(d_model=64, num_heads=8)
    x = np.ones((1, 3, 64), "float32")
    mha(x, x)
    assert mha.key_dim == 8
    assert tuple(mha.query_dense.kernel.shape) == (64, 8, 8)


def test_d_model_not_divisible_by_heads():
    with pytest.raises(ValueError, match=r"d_model=510, num_heads=8"):
        kt.MultiHeadAttention(d_model=510, num_heads=8)
    with pytest.raises(ValueError, match=r"`d_model` must be divisible by `num_heads`"):
        kt.build_transformer(10, 10, d_model=30, num_heads=4)


def test_mismatched_mask_shape_is_a_value_error():
    mha = kt.MultiHeadAttention(d_model=8, num_heads=2)
    x = np.ones((2, 5, 8), "float32")
    with pytest.raises(ValueError, match=r"attention_mask.*Received: attention_mask.shape=\(2, 4, 5\)"):
        mha(x, x, attention_mask=np.ones((2, 4, 5), bool))


def test_padding_in_the_keras_mask_is_never_attended():
    embed = kt.TokenAndPositionEmbedding(vocab_size=20, d_model=8, max_length=6)
    mha = kt.MultiHeadAttention(d_model=8, num_heads=2)
    ids = np.array([[3, 4, 5, 0, 0]], "int32")
    x = embed(ids)
    _, scores = mha(x, x, return_attention_scores=True)
    scores = ops.convert_to_numpy(scores)
    assert (scores[..., 3:] == 0).all() and (scores[..., :3] > 0).all()


def test_cache_steps_equal_full_causal_attention():
    keras.utils.set_random_seed(3)
    mha = kt.MultiHeadAttention(d_model=16, num_heads=4)
    x = np.random.default_rng(3).normal(size=(2, 5, 16)).astype("float32")
    full = ops.convert_to_numpy(mha(x, x, use_causal_mask=True))
    cache = (ops.zeros((2, 4, 5, 4)), ops.zeros((2, 4, 5, 4)))  # keys, values
    steps = []
    for index in range(5):
        step = x[:, index : index + 1]
        out, cache = mha(step, step, use_causal_mask=True, cache=cache, cache_update_index=index)
        steps.append(ops.convert_to_numpy(out))
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, rtol=1e-5, atol=1e-5)


def test_a_cache_that_is_not_a_keys_values_pair_is_a_value_error():
    mha = kt.MultiHeadAttention(d_model=16, num_heads=4)
    x = ops.ones((2, 1, 16))
    with pytest.raises(ValueError, match=r"`cache` must be a pair \(keys, values\)"):
        mha(x, x, cache=ops.zeros((2, 2, 4, 5, 4)), cache_update_index=0)


def test_hash_dropout_is_registered_and_reloads():
    layer = HashDropout(0.25)
    assert keras.saving.get_registered_name(HashDropout) == "keras_transformer>HashDropout"
    restored = keras.layers.deserialize(keras.layers.serialize(layer))
    assert type(restored) is HashDropout and restored.rate == 0.25


def test_every_dropout_of_the_model_is_a_hash_dropout():
    # Keras's Philox dropout is slow under XLA on CPU: the embedding's, the last one left,
    # cost ~4% of a training step.
    model = kt.build_transformer(**TINY)
    dropouts = [layer for layer in model._flatten_layers() if isinstance(layer, keras.layers.Dropout)]
    assert dropouts and all(type(layer) is HashDropout for layer in dropouts), {
        layer.path for layer in dropouts if type(layer) is not HashDropout
    }


def test_cross_attention_cache_equals_recomputing():
    mha = kt.MultiHeadAttention(d_model=16, num_heads=4)
    rng = np.random.default_rng(4)
    query = rng.normal(size=(2, 3, 16)).astype("float32")
    memory = rng.normal(size=(2, 6, 16)).astype("float32")
    direct = mha(query, memory)
    cached, _ = mha(query, memory, cache=mha.compute_cache(memory))
    np.testing.assert_allclose(ops.convert_to_numpy(cached), ops.convert_to_numpy(direct), atol=1e-5)
