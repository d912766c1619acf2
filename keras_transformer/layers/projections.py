"""Dense projections as one 2-D matmul each, and whether a dense layer's kernel may be read directly."""

from keras import ops


def is_plain_dense(dense):
    """Whether a `Dense`/`EinsumDense` is plain (no LoRA, not quantized): its kernel may be read directly."""
    return not (getattr(dense, "lora_enabled", False) or getattr(dense, "quantization_mode", None))


def matmul_last_axis(x, kernel):
    """`x @ kernel` over the last axis of `x` `(..., n)`, `kernel` `(n, m)`, as one 2-D matmul.

    The same product as `ops.matmul(x, kernel)`, whose TensorFlow form for a
    3-D `x` is `tf.tensordot`: about ten times slower to trace, which every
    traced decoder and export pays for each projection.

    Example:

    >>> tuple(matmul_last_axis(ops.ones((2, 3, 4)), ops.ones((4, 5))).shape)
    (2, 3, 5)
    """
    rows = ops.matmul(ops.reshape(x, (-1, ops.shape(x)[-1])), kernel)
    return ops.reshape(rows, tuple(ops.shape(x)[:-1]) + (ops.shape(kernel)[-1],))
