"""The position-wise feed-forward network of the Transformer."""

import keras
from keras import ops

from keras_transformer.kinds import check_positive_int, check_rate
from keras_transformer.layers.activations import get_activation
from keras_transformer.layers.hash_dropout import HashDropout
from keras_transformer.layers.projections import is_plain_dense, matmul_last_axis
from keras_transformer.layers.shapes import check_sequence
from keras_transformer.layers.token_sums import add_bias


@keras.saving.register_keras_serializable(package="keras_transformer")
class PositionwiseFeedForward(keras.layers.Layer):
    """`FFN(x) = W₂ · activation(W₁ x + b₁) + b₂`, applied to each position alone.

    With `gated=True`, the gated form of T5 v1.1, mT5 and MADLAD ("gated-gelu"):
    `W₂ · (activation(W₁ x) ⊙ V x)`, a second inner projection `V` multiplying
    the activated one. Keras masks pass through unchanged (each position is
    independent).

    Args:
        d_model: input and output width.
        d_ff: inner width (2048 in the paper's base model).
        dropout: dropout rate on the inner activations.
        activation: the inner activation, `"relu"` in the paper.
        kernel_initializer: initializer of the kernels.
        gated: multiply the activation by a second, linear inner projection.
        use_bias: whether the projections have biases (T5's have none).
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        inputs: `(batch, length, d_model)`.
        training: whether dropout is active.

    Example:

    >>> ffn = PositionwiseFeedForward(d_model=16, d_ff=64)
    >>> tuple(ffn(keras.ops.ones((2, 3, 16))).shape)
    (2, 3, 16)

    References:
        Vaswani et al., "Attention Is All You Need", 2017, section 3.3.
    """

    def __init__(
        self,
        d_model,
        d_ff,
        dropout=0.0,
        activation="relu",
        kernel_initializer="glorot_uniform",
        gated=False,
        use_bias=True,
        **kwargs,
    ):
        d_model = check_positive_int("d_model", d_model)
        d_ff = check_positive_int("d_ff", d_ff)
        check_rate("dropout", dropout)
        super().__init__(**kwargs)
        self.d_model = d_model
        self.d_ff = d_ff
        self.dropout = dropout
        self.activation = get_activation(activation)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.gated, self.use_bias = bool(gated), bool(use_bias)
        self.supports_masking = True
        init = lambda: keras.initializers.get(  # noqa: E731 (fresh copy per layer)
            keras.initializers.serialize(self.kernel_initializer)
        )
        common = dict(use_bias=self.use_bias, dtype=self.dtype_policy)
        self.inner_dense = keras.layers.Dense(
            d_ff, activation=self.activation, kernel_initializer=init(), name="ffn_inner", **common
        )
        self.linear_dense = (
            keras.layers.Dense(d_ff, kernel_initializer=init(), name="ffn_linear", **common) if self.gated else None
        )
        self.dropout_layer = HashDropout(dropout, dtype=self.dtype_policy, name="ffn_dropout")
        self.output_dense = keras.layers.Dense(d_model, kernel_initializer=init(), name="ffn_output", **common)

    def build(self, input_shape):
        check_sequence(input_shape, "inputs", self.d_model)
        self.inner_dense.build(input_shape)
        if self.gated:
            self.linear_dense.build(input_shape)
        self.output_dense.build(tuple(input_shape[:-1]) + (self.d_ff,))
        self.built = True

    def call(self, inputs, training=None):
        check_sequence(inputs, "inputs", self.d_model)
        hidden = self._dense(self.inner_dense, inputs, training)  # (batch, length, d_ff)
        if self.gated:
            hidden = hidden * self._dense(self.linear_dense, inputs, training)
        hidden = self.dropout_layer(hidden, training=training)
        return self._dense(self.output_dense, hidden, training)

    @staticmethod
    def _dense(dense, inputs, training):
        """`dense(inputs)`, with `add_bias`'s cheaper bias gradient for a plain `Dense`."""
        if not is_plain_dense(dense):
            return dense(inputs)
        outputs = matmul_last_axis(inputs, ops.cast(dense.kernel, inputs.dtype))
        if dense.use_bias:
            outputs = add_bias(outputs, ops.cast(dense.bias, outputs.dtype), training)
        if dense.activation is not None:
            outputs = dense.activation(outputs)
        return outputs

    def compute_output_shape(self, input_shape):
        check_sequence(input_shape, "inputs", self.d_model)  # what a symbolic call runs instead of `call`
        return tuple(input_shape[:-1]) + (self.d_model,)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "d_model": self.d_model,
                "d_ff": self.d_ff,
                "dropout": self.dropout,
                "activation": keras.activations.serialize(self.activation),
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        if self.gated:  # written where not the default, so that earlier files' configs read alike
            config["gated"] = True
        if not self.use_bias:
            config["use_bias"] = False
        return config
