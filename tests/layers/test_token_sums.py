"""`add_bias` and `layer_norm` (weight gradients as matmuls) give the plain computation's values and gradients."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import build_transformer
from keras_transformer.layers.token_sums import add_bias, layer_norm, token_sums

from conftest import TINY


def values_and_gradients(fn, inputs, weights, jit_compile):
    """`fn(*inputs)` and the gradients of `sum(fn(*inputs) * upstream)` for `inputs`, then `weights`."""
    variables = [tf.Variable(t) for t in inputs]
    upstream = np.random.default_rng(9).normal(size=fn(*inputs).shape).astype("float32")

    @tf.function(jit_compile=jit_compile)
    def run():
        with tf.GradientTape() as tape:
            out = fn(*variables)
            loss = tf.reduce_sum(out * upstream)
        return [out, *tape.gradient(loss, variables + weights)]

    return [t.numpy() for t in run()]


def test_token_sums_sums_over_every_axis_but_the_last():
    x = np.random.default_rng(1).normal(size=(3, 5, 7)).astype("float32")
    np.testing.assert_allclose(keras.ops.convert_to_numpy(token_sums(x, 7)), x.sum(axis=(0, 1)), rtol=1e-5)


@pytest.mark.parametrize("jit_compile", [False, True])
def test_add_bias_gives_a_plain_add_s_values_and_gradients(jit_compile):
    rng = np.random.default_rng(2)
    x = rng.normal(size=(4, 7, 24)).astype("float32")
    bias = rng.normal(size=(24,)).astype("float32")
    got = values_and_gradients(lambda x, b: add_bias(x, b, training=True), [x, bias], [], jit_compile)
    want = values_and_gradients(lambda x, b: x + b, [x, bias], [], jit_compile)
    for g, w, name in zip(got, want, ("output", "d_x", "d_bias")):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=name)


def _norm_with_weights(shape, seed, **kwargs):
    rng = np.random.default_rng(seed)
    norm = keras.layers.LayerNormalization(epsilon=1e-6, **kwargs)
    norm.build(shape)
    norm.set_weights([rng.normal(size=w.shape).astype("float32") for w in norm.weights])
    return norm


@pytest.mark.parametrize("jit_compile", [False, True])
def test_layer_norm_gives_keras_values_and_every_gradient(jit_compile):
    # Offset and spread, so that a wrong mean or variance term, forward or backward, shows.
    x = (3 * np.random.default_rng(0).normal(size=(4, 7, 32)) + 1).astype("float32")
    norm = _norm_with_weights(x.shape, seed=3)
    got = values_and_gradients(lambda x: layer_norm(norm, x, training=True), [x], [norm.gamma, norm.beta], jit_compile)
    want = values_and_gradients(norm, [x], [norm.gamma, norm.beta], jit_compile)
    for g, w, name in zip(got, want, ("output", "d_x", "d_gamma", "d_beta")):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4, err_msg=name)


@pytest.mark.parametrize("kwargs", [{"scale": False}, {"center": False}, {"axis": 1}])
def test_layer_norm_is_the_layer_itself_outside_the_usual_case(kwargs):
    x = np.random.default_rng(1).normal(size=(3, 5, 8)).astype("float32")
    norm = _norm_with_weights(x.shape, seed=4, **kwargs)
    got = keras.ops.convert_to_numpy(layer_norm(norm, x, training=True))
    np.testing.assert_allclose(got, keras.ops.convert_to_numpy(norm(x)), rtol=1e-6, atol=1e-6)


def test_a_built_model_keeps_keras_layer_norms():
    """The fast path changes no layer: weights and configs stay Keras's `LayerNormalization`'s."""
    model = build_transformer(**TINY)
    norms = [layer for layer in model._flatten_layers() if "norm" in layer.name and not layer._layers]
    assert norms and all(type(layer) is keras.layers.LayerNormalization for layer in norms)


def _custom_gradient_ops(model, training):
    """The ops of `model`'s traced call that carry a custom gradient."""
    ids = tf.TensorSpec((2, 5), tf.int32)

    @tf.function
    def call(source, target):
        return model({"encoder_inputs": source, "decoder_inputs": target}, training=training)

    graph = call.get_concrete_function(ids, ids).graph
    return [op.name for op in graph.get_operations() if "_gradient_op_type" in op.node_def.attr]


def test_only_training_graphs_hold_custom_gradients():
    """Inference (decoders, exports) traces the plain computation: a loaded export warns of no unsaved gradients."""
    model = build_transformer(**TINY)
    assert _custom_gradient_ops(model, training=True)
    assert _custom_gradient_ops(model, training=False) == []
