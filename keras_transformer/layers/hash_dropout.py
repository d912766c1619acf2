"""`HashDropout`: Keras's dropout, with its random bits from a cheap hash instead of Philox."""

import math

import keras
from keras import ops


def _uint32(value):
    return ops.convert_to_tensor(value, dtype="uint32")


def _mix32(x):
    """A bijective hash of uint32 tensors (C. Wellons's "lowbias32")."""
    x = ops.bitwise_xor(x, ops.right_shift(x, 16))
    x = ops.multiply(x, _uint32(0x21F0AAAD))
    x = ops.bitwise_xor(x, ops.right_shift(x, 15))
    x = ops.multiply(x, _uint32(0x735A2D97))
    return ops.bitwise_xor(x, ops.right_shift(x, 15))


@keras.saving.register_keras_serializable(package="keras_transformer")
class HashDropout(keras.layers.Dropout):
    """`keras.layers.Dropout` whose random bits come from a cheap hash, not Philox.

    The same distribution as Keras's dropout (each element kept with
    probability `1 - rate` and scaled by `1 / (1 - rate)`, a fresh mask on
    every call, drawn from the layer's `seed_generator`, so `seed` and the
    generator's state make the masks reproducible) and the same arguments,
    weights and config. Only the source of the random bits differs: the
    element's index hashed in two rounds (Wellons's "lowbias32"), keyed by the
    two words of the seed, instead of Philox. XLA on CPU runs Philox at over
    ten nanoseconds an element, which made the 26 dropouts of a 3+3-layer
    Transformer's training step about a tenth of its time; the hash costs a
    fraction of a nanosecond. With a `noise_shape` it falls back to Keras's
    dropout. Every dropout of this package's layers (embedding, attention,
    feed-forward, encoder and decoder) is a `HashDropout`.

    Example:

    >>> layer = HashDropout(0.5, seed=1)
    >>> x = keras.ops.ones((1000,))
    >>> kept = float(keras.ops.mean(layer(x, training=True) > 0))
    >>> 0.45 < kept < 0.55
    True
    """

    def call(self, inputs, training=False):
        rate = self.rate
        if not training or rate == 0 or self.noise_shape is not None:
            return super().call(inputs, training=training)
        if rate >= 1:
            return ops.zeros_like(inputs)
        seed = ops.cast(self.seed_generator.next(), "uint32")
        key0 = _mix32(ops.bitwise_xor(seed[0], _uint32(0x9E3779B9)))
        key1 = _mix32(ops.bitwise_xor(seed[1], key0))
        shape = tuple(inputs.shape)
        size = math.prod(shape) if None not in shape else ops.size(inputs)
        index = ops.reshape(ops.cast(ops.arange(size, dtype="int32"), "uint32"), ops.shape(inputs))
        bits = _mix32(ops.bitwise_xor(_mix32(ops.bitwise_xor(index, key0)), key1))
        keep = ops.greater_equal(bits, _uint32(min(round(rate * 2**32), 2**32 - 1)))
        scale = ops.cast(1.0 / (1.0 - rate), inputs.dtype)
        return ops.where(keep, inputs * scale, ops.zeros_like(inputs))
