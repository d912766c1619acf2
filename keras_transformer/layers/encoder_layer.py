"""One encoder block: self-attention and a feed-forward network."""

import keras

from keras_transformer.kinds import (
    check_positive_int,
    check_positive_number,
    check_rate,
)
from keras_transformer.layers.activations import get_activation
from keras_transformer.layers.attention import MultiHeadAttention
from keras_transformer.layers.feed_forward import PositionwiseFeedForward
from keras_transformer.layers.hash_dropout import HashDropout
from keras_transformer.layers.masks import check_mask, check_mask_shape
from keras_transformer.layers.normalization import NORMS, normalization
from keras_transformer.layers.shapes import check_sequence
from keras_transformer.layers.token_sums import layer_norm


def attention_outputs(outputs, scores_returned):
    """A `MultiHeadAttention` call's outputs as `(output, scores or None, *cache)`.

    Scores are asked for only when returned: with `key_block_size` the
    attention then runs in blocks, without the `(q_len, k_len)` weights.

    Example:

    >>> attention_outputs("output", False)
    ('output', None)
    >>> attention_outputs(("output", "scores", "cache"), True)
    ('output', 'scores', 'cache')
    """
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    return outputs if scores_returned else (outputs[0], None, *outputs[1:])


@keras.saving.register_keras_serializable(package="keras_transformer")
class EncoderLayer(keras.layers.Layer):
    """Self-attention then a position-wise FFN, each with residual and LayerNorm.

    Post-norm as in the paper, `LayerNorm(x + Dropout(Sublayer(x)))`; with
    `norm_first=True`, pre-norm `x + Dropout(Sublayer(LayerNorm(x)))`, which
    trains more stably in deep stacks (then put a final `LayerNormalization`
    after the last layer, as `Encoder` does).

    Padding: `padding_mask` is a boolean `(batch, length)` tensor, `True` at
    real tokens. Without it the Keras mask of `inputs` (from an embedding with
    `mask_zero=True`) is used, so a stack built from this package's layers
    never attends padding. `attention_mask` (boolean `(batch, length, length)`,
    `True` = may attend) adds any other restriction. A float or int mask is a
    `ValueError` (the TensorFlow tutorial's additive masks, 1 = blocked, mean
    the opposite: convert one with `keras.ops.equal(mask, 0)`), and so is a
    mask or an input whose static shape does not fit (a size of 1
    broadcasts; sizes unknown until run time are not checked).

    Args:
        d_model: model width; must be divisible by `num_heads`.
        num_heads: number of attention heads (`key_dim = d_model // num_heads`).
        d_ff: inner width of the feed-forward network.
        dropout: dropout rate on each sublayer's output (0.1 in the paper).
        norm_first: pre-norm instead of the paper's post-norm.
        activation: activation of the feed-forward network.
        layer_norm_epsilon: epsilon of the LayerNorms.
        attention_dropout: dropout rate on the attention weights.
        activation_dropout: dropout rate inside the feed-forward network.
        kernel_initializer: initializer of all kernels.
        key_block_size: `None`, or attend in blocks of this many keys (the
            online softmax: training memory linear in the length; needs
            `attention_dropout=0`; see `MultiHeadAttention`).
        norm: `"layer"` (LayerNorm) or `"rms"` (T5's RMS normalization).
        gated: the gated feed-forward (`PositionwiseFeedForward`).
        use_bias: biases on the projections (T5's have none).
        key_dim: each head's width (default `d_model // num_heads`).
        scale_attention: divide the attention scores by `√key_dim`.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        inputs: `(batch, length, d_model)`.
        padding_mask: optional boolean `(batch, length)`, `True` = real token.
        attention_mask: optional boolean `(batch, length, length)`.
        return_attention_scores: also return `(batch, heads, length, length)`.
        training: whether dropout is active.
        attention_bias: optional float `(1, heads, length, length)` added to
            the self-attention scores (T5's `RelativePositionBias`).

    Example:

    >>> layer = EncoderLayer(d_model=32, num_heads=4, d_ff=64)
    >>> tuple(layer(keras.ops.ones((2, 7, 32))).shape)
    (2, 7, 32)

    References:
        Vaswani et al., "Attention Is All You Need", 2017, section 3.1.
    """

    def __init__(
        self,
        d_model,
        num_heads,
        d_ff,
        dropout=0.1,
        norm_first=False,
        activation="relu",
        layer_norm_epsilon=1e-6,
        attention_dropout=0.0,
        activation_dropout=0.0,
        kernel_initializer="glorot_uniform",
        key_block_size=None,
        norm="layer",
        gated=False,
        use_bias=True,
        key_dim=None,
        scale_attention=True,
        **kwargs,
    ):
        d_model = check_positive_int("d_model", d_model)
        num_heads = check_positive_int("num_heads", num_heads)
        d_ff = check_positive_int("d_ff", d_ff)
        for name, rate in (
            ("dropout", dropout),
            ("attention_dropout", attention_dropout),
            ("activation_dropout", activation_dropout),
        ):
            check_rate(name, rate)
        check_positive_number("layer_norm_epsilon", layer_norm_epsilon)
        if norm not in NORMS:
            raise ValueError(f"`norm` must be one of {NORMS}. Received: norm={norm!r}")
        super().__init__(**kwargs)
        self.d_model = d_model
        self.num_heads = num_heads
        self.d_ff = d_ff
        self.dropout = dropout
        self.norm_first = norm_first
        self.activation = get_activation(activation)
        self.layer_norm_epsilon = layer_norm_epsilon
        self.attention_dropout = attention_dropout
        self.activation_dropout = activation_dropout
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.key_block_size = key_block_size
        self.norm, self.gated, self.use_bias = norm, bool(gated), bool(use_bias)
        self.key_dim, self.scale_attention = key_dim, bool(scale_attention)
        self.supports_masking = True
        common = {"dtype": self.dtype_policy}
        self.self_attention = self._attention("self_attention")
        self.self_attention_norm = self._norm("self_attention_norm")
        self.self_attention_dropout = HashDropout(dropout, name="self_attention_dropout", **common)
        self.ffn = PositionwiseFeedForward(
            d_model,
            d_ff,
            dropout=activation_dropout,
            activation=self.activation,
            kernel_initializer=keras.initializers.serialize(self.kernel_initializer),
            gated=self.gated,
            use_bias=self.use_bias,
            name="ffn",
            **common,
        )
        self.ffn_norm = self._norm("ffn_norm")
        self.ffn_dropout = HashDropout(dropout, name="ffn_dropout", **common)

    def _attention(self, name):
        """A `MultiHeadAttention` of this layer's options (its self-attention, a decoder's cross-attention)."""
        return MultiHeadAttention(
            self.d_model,
            self.num_heads,
            dropout=self.attention_dropout,
            use_bias=self.use_bias,
            kernel_initializer=keras.initializers.serialize(self.kernel_initializer),
            key_block_size=self.key_block_size,
            key_dim=self.key_dim,
            scale_attention=self.scale_attention,
            name=name,
            dtype=self.dtype_policy,
        )

    def _norm(self, name):
        """A LayerNorm or an RMS normalization (`norm`) of this layer's epsilon."""
        return normalization(self.norm, self.layer_norm_epsilon, name, self.dtype_policy)

    def build(self, input_shape):
        check_sequence(input_shape, "inputs", self.d_model)
        self.self_attention.build(input_shape, input_shape)
        self.self_attention_norm.build(input_shape)
        self.ffn.build(input_shape)
        self.ffn_norm.build(input_shape)
        self.built = True

    def call(
        self,
        inputs,
        padding_mask=None,
        attention_mask=None,
        return_attention_scores=False,
        training=None,
        mask=None,
        attention_bias=None,
    ):
        check_sequence(inputs, "inputs", self.d_model)
        padding_mask = check_mask(padding_mask, "padding_mask")
        attention_mask = check_mask(attention_mask, "attention_mask")
        padding_name = "mask" if padding_mask is None else "padding_mask"
        padding_mask = check_mask(mask, "mask") if padding_mask is None else padding_mask
        batch, length = inputs.shape[0], inputs.shape[1]
        check_mask_shape(padding_mask, padding_name, ("batch", "length"), (batch, length))
        check_mask_shape(
            attention_mask, "attention_mask", ("batch", "length", "length"), (batch, length, length), ranks=(2, 3)
        )

        def self_attend(x):
            outputs = self.self_attention(
                x,
                x,
                attention_mask=attention_mask,
                value_mask=padding_mask,
                return_attention_scores=return_attention_scores,
                training=training,
                attention_bias=attention_bias,
            )
            return attention_outputs(outputs, return_attention_scores)

        x, (scores,) = self._residual(
            inputs, self.self_attention_norm, self.self_attention_dropout, self_attend, training
        )
        x = self._feed_forward(x, training)
        return (x, scores) if return_attention_scores else x

    def _residual(self, x, norm, dropout, sublayer, training):
        """`sublayer` with residual and LayerNorm; returns `(x, sublayer's extra outputs)`."""
        if self.norm_first:
            outputs = sublayer(layer_norm(norm, x, training))
            return x + dropout(outputs[0], training=training), outputs[1:]
        outputs = sublayer(x)
        return layer_norm(norm, x + dropout(outputs[0], training=training), training), outputs[1:]

    def _feed_forward(self, x, training):
        x, _ = self._residual(
            x,
            self.ffn_norm,
            self.ffn_dropout,
            lambda h: (self.ffn(h, training=training),),
            training,
        )
        return x

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "d_model": self.d_model,
                "num_heads": self.num_heads,
                "d_ff": self.d_ff,
                "dropout": self.dropout,
                "norm_first": self.norm_first,
                "activation": keras.activations.serialize(self.activation),
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "attention_dropout": self.attention_dropout,
                "activation_dropout": self.activation_dropout,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "key_block_size": self.key_block_size,
            }
        )
        # Written where not the default, so that the configs of earlier files read alike.
        defaults = dict(norm="layer", gated=False, use_bias=True, key_dim=None, scale_attention=True)
        config.update({name: getattr(self, name) for name, value in defaults.items() if getattr(self, name) != value})
        return config
