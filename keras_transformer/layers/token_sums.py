"""Gradients of per-feature weights (biases, LayerNorm scale and offset) as small matmuls.

A weight broadcast over every token has for gradient a sum over the tokens: a
reduction over a non-minor axis, which XLA on CPU emits as a windowed tree
reduction running at well under 1 GB/s. As the product of a `(2, tokens)`
matrix of ones with the `(tokens, width)` gradient it runs at matmul speed.
`add_bias` and `layer_norm` keep the plain computation's values (up to float
rounding) and change only that part of its backward pass, when training in
float32 on the TensorFlow backend; elsewhere they are the plain computation,
so that inference graphs (decoders, exports) hold no custom gradients.
"""

import keras
from keras import ops


def _uses_token_sums(dtype, training):
    return (
        bool(training)
        and keras.backend.backend() == "tensorflow"
        and keras.backend.standardize_dtype(dtype) == "float32"
    )


def token_sums(gradient, width):
    """`gradient` summed over every axis but the last (of size `width`), as one small matmul.

    Example:

    >>> ops.convert_to_numpy(token_sums(ops.ones((2, 3, 4)), 4))
    array([6., 6., 6., 6.], dtype=float32)
    """
    rows = ops.reshape(gradient, (-1, width))  # (tokens, width)
    # Two rows of ones, row 0 kept: XLA turns a single row back into a reduction.
    ones = ops.ones((2, ops.shape(rows)[0]), dtype=rows.dtype)
    return ops.matmul(ones, rows)[0]


def add_bias(x, bias, training=False):
    """`x + bias` (bias along the last axis) whose bias gradient, when `training`, is `token_sums`.

    Made a 3+3-layer model's training step ~3% faster.

    Example:

    >>> ops.convert_to_numpy(add_bias(ops.zeros((1, 2)), ops.ones((2,)), training=True))
    array([[1., 1.]], dtype=float32)
    """
    if not _uses_token_sums(x.dtype, training):
        return x + bias

    @ops.custom_gradient
    def _add_bias(x, bias):
        def grad(*args, upstream=None):
            upstream = args[0] if upstream is None else upstream
            return upstream, token_sums(upstream, ops.shape(bias)[-1])

        return x + bias, grad

    return _add_bias(x, ops.convert_to_tensor(bias, dtype=x.dtype))


def layer_norm(norm, x, training=False):
    """`norm(x)` for a `keras.layers.LayerNormalization`, with `token_sums` weight gradients.

    In the usual case (training, float32 on the TensorFlow backend, the last axis
    normalized, with scale and offset, not `rms_scaling`) the LayerNorm is
    computed from `norm`'s own weights, and the gradients of its scale and
    offset are `token_sums`; the normalization's own gradient is left to
    autodiff, which spares XLA:CPU its slow windowed reductions
    (docs/performance.md has the measurement). Otherwise it is `norm(x)`. The layer, its
    weights and its config are Keras's own either way.

    Example:

    >>> norm = keras.layers.LayerNormalization(epsilon=1e-6)
    >>> ops.convert_to_numpy(layer_norm(norm, ops.convert_to_tensor([[1.0, 3.0]]), training=True)).round(4)
    array([[-1.,  1.]], dtype=float32)
    """
    if not isinstance(norm, keras.layers.LayerNormalization):  # RMS normalization (T5's): Keras's own
        return norm(x)
    axes = [norm.axis] if isinstance(norm.axis, int) else list(norm.axis)
    if not (
        _uses_token_sums(x.dtype, training)
        and norm.compute_dtype == "float32"
        and axes in ([-1], [len(x.shape) - 1])
        and norm.center
        and norm.scale
        and not norm.rms_scaling
    ):
        return norm(x)
    if not norm.built:
        norm.build(x.shape)
    return _layer_norm(x, ops.cast(norm.gamma, x.dtype), ops.cast(norm.beta, x.dtype), norm.epsilon)


def _layer_norm(x, gamma, beta, epsilon):
    mean = ops.mean(x, axis=-1, keepdims=True)
    centered = x - mean
    normed = centered * ops.rsqrt(ops.mean(ops.square(centered), axis=-1, keepdims=True) + epsilon)

    @ops.custom_gradient
    def scale_and_shift(normed, gamma, beta):
        def grad(*args, upstream=None):
            upstream = args[0] if upstream is None else upstream
            width = ops.shape(gamma)[-1]
            return upstream * gamma, token_sums(upstream * normed, width), token_sums(upstream, width)

        return normed * gamma + beta, grad

    return scale_and_shift(normed, gamma, beta)
