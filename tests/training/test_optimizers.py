"""`keras_transformer.Adam`: Keras's Adam updates, bit for bit, with one step size per training step."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import Adam, WarmupSchedule


def _weights_and_gradients():
    rng = np.random.default_rng(0)
    shapes = [(3, 4), (4,), (7,), (2, 3, 5)]
    weights = [rng.normal(size=shape).astype("float32") for shape in shapes]
    gradients = [[rng.normal(size=shape).astype("float32") for shape in shapes] for _ in range(5)]
    return weights, gradients


def _updated(optimizer):
    weights, gradients = _weights_and_gradients()
    variables = [keras.Variable(w) for w in weights]
    for step_gradients in gradients:
        optimizer.apply([tf.constant(g) for g in step_gradients], variables)
    return [v.numpy() for v in variables]


@pytest.mark.parametrize("amsgrad", [False, True])
def test_updates_equal_keras_adam_bit_for_bit(amsgrad):
    settings = dict(beta_1=0.9, beta_2=0.98, epsilon=1e-9, amsgrad=amsgrad)
    ours = _updated(Adam(WarmupSchedule(16, warmup_steps=3), **settings))
    keras_adam = _updated(keras.optimizers.Adam(WarmupSchedule(16, warmup_steps=3), **settings))
    start, _ = _weights_and_gradients()
    for moved, expected, initial in zip(ours, keras_adam, start):
        assert not np.array_equal(moved, initial)
        np.testing.assert_array_equal(moved, expected)


def test_a_traced_step_computes_the_step_size_once():
    def traced_pow_ops(optimizer):
        weights, _ = _weights_and_gradients()
        variables = [keras.Variable(w) for w in weights]
        optimizer.build(variables)
        step = tf.function(lambda grads: optimizer.apply(grads, variables))
        graph = step.get_concrete_function([tf.TensorSpec(w.shape) for w in weights]).graph
        return sum(op.type == "Pow" for op in graph.get_operations())

    assert traced_pow_ops(keras.optimizers.Adam(1e-3)) == 2 * 4  # β₁ᵗ and β₂ᵗ for each of the 4 weights
    assert traced_pow_ops(Adam(1e-3)) == 2


def test_a_compiled_model_saves_and_reloads_with_it(tmp_path):
    from keras_transformer import build_transformer

    model = build_transformer(20, 20, num_layers=1, d_model=8, num_heads=2, d_ff=16, max_length=8)
    model.compile(Adam(1e-3, beta_2=0.98), "mse")
    model.save(tmp_path / "model.keras")
    reloaded = keras.models.load_model(tmp_path / "model.keras")
    assert type(reloaded.optimizer) is Adam and reloaded.optimizer.beta_2 == 0.98
