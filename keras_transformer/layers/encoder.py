"""The encoder stack: token embedding, positional encoding and N encoder layers."""

import keras

from keras_transformer.layers.arguments import check_positive_int
from keras_transformer.layers.embedding import TokenAndPositionEmbedding
from keras_transformer.layers.encoder_layer import EncoderLayer
from keras_transformer.layers.masks import padding_mask
from keras_transformer.layers.token_sums import layer_norm


@keras.saving.register_keras_serializable(package="keras_transformer")
class Encoder(keras.layers.Layer):
    """Token ids in, contextual vectors out: embedding + `num_layers` `EncoderLayer`s.

    Padding (id 0) is found from the ids and masked in every layer; the output
    carries a Keras mask (`True` at real tokens) for the layers that follow.
    With `norm_first=True` a final LayerNorm closes the stack. Token ids
    outside `[0, vocab_size)` are a `ValueError` when called eagerly and give
    NaN outputs inside compiled functions (see `TokenAndPositionEmbedding`).

    Args:
        num_layers: number of encoder layers (6 in the paper).
        vocab_size: size of the input vocabulary.
        max_length: longest input accepted.
        d_model, num_heads, d_ff, dropout, norm_first, activation,
        layer_norm_epsilon: as in `EncoderLayer`.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        token_ids: integer `(batch, length)`, 0 = padding.
        training: whether dropout is active.

    Example:

    >>> encoder = Encoder(num_layers=2, vocab_size=100, max_length=16,
    ...                   d_model=32, num_heads=4, d_ff=64)
    >>> tuple(encoder(keras.ops.convert_to_tensor([[5, 9, 2, 0]])).shape)
    (1, 4, 32)
    """

    def __init__(
        self,
        num_layers,
        vocab_size,
        max_length,
        d_model=512,
        num_heads=8,
        d_ff=2048,
        dropout=0.1,
        norm_first=False,
        activation="relu",
        layer_norm_epsilon=1e-6,
        **kwargs,
    ):
        num_layers = check_positive_int("num_layers", num_layers)
        vocab_size = check_positive_int("vocab_size", vocab_size)
        max_length = check_positive_int("max_length", max_length)
        super().__init__(**kwargs)
        self.num_layers = num_layers
        self.vocab_size = vocab_size
        self.max_length = max_length
        self.d_model = d_model
        self.num_heads = num_heads
        self.d_ff = d_ff
        self.dropout = dropout
        self.norm_first = norm_first
        self.activation = activation
        self.layer_norm_epsilon = layer_norm_epsilon
        self.supports_masking = True
        self.embedding = TokenAndPositionEmbedding(
            vocab_size, d_model, max_length, dropout=dropout,
            dtype=self.dtype_policy, name="embedding",
        )
        self.stack = [
            self._make_layer(f"layer_{index}") for index in range(num_layers)
        ]
        self.final_norm = (
            keras.layers.LayerNormalization(
                epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name="final_norm"
            )
            if norm_first
            else None
        )

    def _make_layer(self, name):
        return EncoderLayer(
            self.d_model, self.num_heads, self.d_ff, dropout=self.dropout,
            norm_first=self.norm_first, activation=self.activation,
            layer_norm_epsilon=self.layer_norm_epsilon,
            dtype=self.dtype_policy, name=name,
        )

    def build(self, input_shape):
        self.embedding.build(input_shape)
        hidden_shape = tuple(input_shape) + (self.d_model,)
        for layer in self.stack:
            layer.build(hidden_shape)
        if self.final_norm is not None:
            self.final_norm.build(hidden_shape)
        self.built = True

    def call(self, token_ids, training=None):
        mask = padding_mask(token_ids)
        x = self.embedding(token_ids, training=training)
        for layer in self.stack:
            x = layer(x, padding_mask=mask, training=training)
        if self.final_norm is not None:
            x = layer_norm(self.final_norm, x)
        return x

    def compute_mask(self, token_ids, mask=None):
        return padding_mask(token_ids)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_layers": self.num_layers,
                "vocab_size": self.vocab_size,
                "max_length": self.max_length,
                "d_model": self.d_model,
                "num_heads": self.num_heads,
                "d_ff": self.d_ff,
                "dropout": self.dropout,
                "norm_first": self.norm_first,
                "activation": self.activation,
                "layer_norm_epsilon": self.layer_norm_epsilon,
            }
        )
        return config
