"""The two normalizations a layer may use: LayerNorm (the paper's) and RMS normalization (T5's)."""

import keras

from keras_transformer.config import NORMS


@keras.saving.register_keras_serializable(package="keras_transformer")
class RMSNormalization(keras.layers.RMSNormalization):
    """Keras's `RMSNormalization`, T5's `T5LayerNorm`, that passes a Keras mask through as a LayerNorm does.

    `x · rsqrt(mean(x²) + epsilon) · scale`: no mean subtracted, no offset,
    computed in float32 (at least) and cast back to the input's dtype. Each
    position is normalized alone, so the padding mask of a stack's output
    (which the decoder's cross-attention reads) survives its final norm;
    Keras's own layer drops it. T5 rounds the normalized values to a
    half-precision weight's dtype before the scale, Keras keeps the scale's
    float32 (a mixed-precision policy's variables): the two differ in the
    last bit of bfloat16 or float16 only.

    Example:

    >>> norm = RMSNormalization(epsilon=1e-6)
    >>> keras.ops.convert_to_numpy(norm(keras.ops.convert_to_tensor([[3.0, 4.0]]))).round(4).tolist()
    [[0.8485, 1.1314]]
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True


def normalization(kind, epsilon, name, dtype=None):
    """A new `keras.layers.LayerNormalization` (`kind="layer"`) or `RMSNormalization` (`"rms"`).

    Example:

    >>> type(normalization("rms", 1e-6, "norm")).__name__
    'RMSNormalization'
    >>> normalization("batch", 1e-6, "norm")
    Traceback (most recent call last):
    ...
    ValueError: `norm` must be one of ('layer', 'rms'). Received: norm='batch'
    """
    options = {} if dtype is None else {"dtype": dtype}
    if kind == "layer":
        return keras.layers.LayerNormalization(epsilon=epsilon, name=name, **options)
    if kind == "rms":
        return RMSNormalization(epsilon=epsilon, name=name, **options)
    raise ValueError(f"`norm` must be one of {NORMS}. Received: norm={kind!r}")
