"""Determinism: `keras.utils.set_random_seed` fixes initial weights and training.

The same seed must give bit-identical initial weights and the same loss curve
(every batch's loss, dropout and shuffling included) for a few XLA-compiled
`fit` steps of a tiny `build_transformer` model; a different seed must give
different weights, so the test cannot pass by everything being constant.
"""

import keras
import numpy as np

import keras_transformer as kt

MODEL = dict(
    source_vocab_size=24,
    target_vocab_size=24,
    num_layers=1,
    d_model=16,
    num_heads=2,
    d_ff=32,
    dropout=0.2,
    attention_dropout=0.1,
    activation_dropout=0.1,
    max_length=10,
)


def _data():
    """A fixed batch of right-padded pairs, independent of the Keras seed."""
    rng = np.random.default_rng(1234)
    source = rng.integers(1, 24, size=(16, 7)).astype("int32")
    target = rng.integers(1, 24, size=(16, 6)).astype("int32")
    for row, (n, m) in enumerate(zip(rng.integers(1, 8, 16), rng.integers(2, 7, 16))):
        source[row, n:] = 0
        target[row, m:] = 0
    decoder_inputs = np.concatenate([np.full((16, 1), 2, "int32"), target[:, :-1]], axis=1)
    return {"encoder_inputs": source, "decoder_inputs": decoder_inputs}, target


def _initial_weights(seed):
    keras.utils.set_random_seed(seed)
    return [keras.ops.convert_to_numpy(w) for w in kt.build_transformer(**MODEL).weights]


def _train(seed):
    """Per-batch losses and final weights of 2 epochs x 2 steps with XLA."""
    keras.utils.set_random_seed(seed)
    model = kt.build_transformer(**MODEL)
    model.compile(
        optimizer=keras.optimizers.Adam(kt.WarmupSchedule(16, warmup_steps=4), beta_2=0.98, epsilon=1e-9),
        loss=kt.MaskedSparseCategoricalCrossentropy(label_smoothing=0.1),
        metrics=[kt.MaskedAccuracy()],
        jit_compile=True,
    )
    losses = []
    record = keras.callbacks.LambdaCallback(on_train_batch_end=lambda batch, logs: losses.append(logs["loss"]))
    inputs, labels = _data()
    model.fit(inputs, labels, batch_size=8, epochs=2, shuffle=True, callbacks=[record], verbose=0)
    return np.array(losses, dtype="float64"), [keras.ops.convert_to_numpy(w) for w in model.weights]


def test_same_seed_gives_same_initial_weights():
    first, again, other = _initial_weights(7), _initial_weights(7), _initial_weights(8)
    assert len(first) == len(again) > 0
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    assert any(not np.array_equal(a, b) for a, b in zip(first, other))


def test_same_seed_gives_same_loss_curve_with_xla():
    losses, weights = _train(11)
    losses_again, weights_again = _train(11)
    assert losses.shape == (4,) and np.isfinite(losses).all()
    assert len(set(losses.tolist())) > 1  # it trains: the curve moves
    np.testing.assert_array_equal(losses, losses_again)
    for a, b in zip(weights, weights_again):
        np.testing.assert_array_equal(a, b)
