"""The encoder stack: token embedding, positional encoding and N encoder layers."""

import keras

from keras_transformer.kinds import check_positive_int
from keras_transformer.layers.embedding import TokenAndPositionEmbedding, check_token_ids_shape
from keras_transformer.layers.encoder_layer import EncoderLayer
from keras_transformer.layers.masks import padding_mask


def encoder_forward(
    embedding,
    layers,
    final_norm,
    token_ids,
    padding_mask=None,
    training=None,
    return_attention_scores=False,
    position_bias=None,
):
    """The encoder's forward pass: `embedding`, each of `layers`, then `final_norm` (if any).

    The one place it is written: `Encoder`, `build_transformer`'s functional
    graph and `TransformerModel.encode` all run it. Without `padding_mask` each
    layer reads the Keras mask that the embedding attaches (the functional
    graph); with it, the mask is passed explicitly (eager calls, and Keras's
    JAX backend, whose arrays carry no Keras mask). `training=None` is not
    passed on, so that the functional graph records no call argument.

    Args:
        embedding: a `TokenAndPositionEmbedding`.
        layers: the `EncoderLayer`s, first to last.
        final_norm: a `LayerNormalization` after the last layer, or `None`.
        token_ids: integer `(batch, length)`, 0 = padding.
        padding_mask: optional boolean `(batch, length)`, `True` at real tokens.
        training: whether dropout is active (`None`: Keras decides).
        return_attention_scores: also return each layer's attention weights.
        position_bias: a `RelativePositionBias` (T5's), computed once and
            added to every layer's attention scores, or `None`.

    Returns:
        `(batch, length, d_model)`; with `return_attention_scores=True`,
        `(outputs, [scores (batch, heads, length, length) per layer])`.

    Example:

    >>> embedding = TokenAndPositionEmbedding(100, 32, 16)
    >>> layers = [EncoderLayer(32, 4, 64) for _ in range(2)]
    >>> ids = keras.ops.convert_to_tensor([[5, 9, 2, 0]])
    >>> outputs, scores = encoder_forward(embedding, layers, None, ids, padding_mask(ids),
    ...                                   return_attention_scores=True)
    >>> tuple(outputs.shape), tuple(scores[-1].shape)
    ((1, 4, 32), (1, 4, 4, 4))
    """
    options = {} if training is None else {"training": training}
    layer_options = dict(options)
    if padding_mask is not None:
        layer_options["padding_mask"] = padding_mask
    if return_attention_scores:
        layer_options["return_attention_scores"] = True
    x = embedding(token_ids, **options)
    if position_bias is not None:
        layer_options["attention_bias"] = position_bias(token_ids)
    scores = []
    for layer in layers:
        x = layer(x, **layer_options)
        if return_attention_scores:
            x, layer_scores = x
            scores.append(layer_scores)
    if final_norm is not None:
        x = final_norm(x)
    return (x, scores) if return_attention_scores else x


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
        layer_norm_epsilon, attention_dropout, activation_dropout,
        kernel_initializer, key_block_size: as in `EncoderLayer` (`build_transformer`'s
        layer options).
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
        attention_dropout=0.0,
        activation_dropout=0.0,
        kernel_initializer="glorot_uniform",
        key_block_size=None,
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
        self.attention_dropout = attention_dropout
        self.activation_dropout = activation_dropout
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.key_block_size = key_block_size
        self.supports_masking = True
        self.embedding = TokenAndPositionEmbedding(
            vocab_size,
            d_model,
            max_length,
            dropout=dropout,
            dtype=self.dtype_policy,
            name="embedding",
        )
        self.stack = [self._make_layer(f"layer_{index}") for index in range(num_layers)]
        self.final_norm = (
            keras.layers.LayerNormalization(epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name="final_norm")
            if norm_first
            else None
        )

    def _layer_options(self):
        return dict(
            dropout=self.dropout,
            norm_first=self.norm_first,
            activation=self.activation,
            layer_norm_epsilon=self.layer_norm_epsilon,
            attention_dropout=self.attention_dropout,
            activation_dropout=self.activation_dropout,
            kernel_initializer=keras.initializers.serialize(self.kernel_initializer),
            key_block_size=self.key_block_size,
            dtype=self.dtype_policy,
        )

    def _make_layer(self, name):
        return EncoderLayer(self.d_model, self.num_heads, self.d_ff, name=name, **self._layer_options())

    def build(self, input_shape):
        check_token_ids_shape(input_shape, "token_ids")
        self.embedding.build(input_shape)
        hidden_shape = tuple(input_shape) + (self.d_model,)
        for layer in self.stack:
            layer.build(hidden_shape)
        if self.final_norm is not None:
            self.final_norm.build(hidden_shape)
        self.built = True

    def call(self, token_ids, training=None):
        check_token_ids_shape(token_ids, "token_ids")
        return encoder_forward(
            self.embedding, self.stack, self.final_norm, token_ids, padding_mask(token_ids), training
        )

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
                "attention_dropout": self.attention_dropout,
                "key_block_size": self.key_block_size,
                "activation_dropout": self.activation_dropout,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config
