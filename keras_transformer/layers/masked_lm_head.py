"""BERT's masked-language-model head: the transform before the tied output projection."""

import keras

from keras_transformer.kinds import check_positive_int, check_positive_number
from keras_transformer.layers.activations import get_activation
from keras_transformer.layers.shapes import check_sequence


@keras.saving.register_keras_serializable(package="keras_transformer")
class MaskedLMHead(keras.layers.Layer):
    """`LayerNorm(activation(W h + b))`: what a masked-LM head does to each position before its logits.

    The logits are then the tied decoder with its bias: the token
    embedding's transpose plus a bias per token, which the embedding layer
    owns (`TokenAndPositionEmbedding(..., output_bias=True)` called with
    `reverse=True`), so the tie holds when the model is trained or saved.
    `build_encoder_only` joins the two; BERT's `cls.predictions` is this
    layer's `transform` and that bias.

    Args:
        d_model: the width of the hidden states, in and out.
        activation: the transform's activation (BERT: `"gelu"`).
        layer_norm_epsilon: the LayerNorm's epsilon (BERT: 1e-12).
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        hidden: `(batch, length, d_model)`.

    Example:

    >>> head = MaskedLMHead(16, activation="gelu")
    >>> tuple(head(keras.ops.ones((2, 3, 16))).shape)
    (2, 3, 16)
    """

    def __init__(self, d_model, activation="gelu", layer_norm_epsilon=1e-12, **kwargs):
        d_model = check_positive_int("d_model", d_model)
        check_positive_number("layer_norm_epsilon", layer_norm_epsilon)
        super().__init__(**kwargs)
        self.d_model = d_model
        self.activation = get_activation(activation)
        self.layer_norm_epsilon = layer_norm_epsilon
        common = {"dtype": self.dtype_policy}
        self.dense = keras.layers.Dense(d_model, activation=self.activation, name="transform", **common)
        self.norm = keras.layers.LayerNormalization(epsilon=layer_norm_epsilon, name="transform_norm", **common)

    def build(self, input_shape):
        check_sequence(input_shape, "hidden", self.d_model)
        self.dense.build(input_shape)
        self.norm.build(input_shape)
        self.built = True

    def call(self, hidden):
        check_sequence(hidden, "hidden", self.d_model)
        return self.norm(self.dense(hidden))

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "d_model": self.d_model,
                "activation": keras.activations.serialize(self.activation),
                "layer_norm_epsilon": self.layer_norm_epsilon,
            }
        )
        return config
