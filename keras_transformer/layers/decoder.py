"""The decoder stack: token embedding, positional encoding and N decoder layers."""

import keras

from keras_transformer.layers.decoder_layer import DecoderLayer
from keras_transformer.layers.encoder import Encoder
from keras_transformer.layers.masks import check_mask, padding_mask
from keras_transformer.layers.token_sums import layer_norm


@keras.saving.register_keras_serializable(package="keras_transformer")
class Decoder(Encoder):
    """Target ids and encoder output in, vectors out: embedding + N `DecoderLayer`s.

    Self-attention is causal and skips target padding; cross-attention skips
    source padding, taken from `encoder_padding_mask` or from the Keras mask
    that `Encoder` attaches to its output. The output is `(batch, target_len,
    d_model)`; add a `Dense(vocab_size)` (or the tied embedding) for logits.

    Args:
        Same as `Encoder`.

    Call arguments:
        token_ids: integer `(batch, target_len)`, 0 = padding.
        encoder_outputs: `(batch, source_len, d_model)`.
        encoder_padding_mask: optional boolean `(batch, source_len)`, `True` at
            real source tokens (a float or int mask is a `ValueError`).
        training: whether dropout is active.

    Example:

    >>> encoder = Encoder(2, vocab_size=100, max_length=16, d_model=32, num_heads=4, d_ff=64)
    >>> decoder = Decoder(2, vocab_size=90, max_length=16, d_model=32, num_heads=4, d_ff=64)
    >>> source = keras.ops.convert_to_tensor([[5, 9, 2, 0]])
    >>> target = keras.ops.convert_to_tensor([[1, 4, 0]])
    >>> tuple(decoder(target, encoder(source)).shape)
    (1, 3, 32)
    """

    def _make_layer(self, name):
        return DecoderLayer(
            self.d_model, self.num_heads, self.d_ff, dropout=self.dropout,
            norm_first=self.norm_first, activation=self.activation,
            layer_norm_epsilon=self.layer_norm_epsilon,
            dtype=self.dtype_policy, name=name,
        )

    def build(self, token_ids_shape, encoder_outputs_shape=None):
        self.embedding.build(token_ids_shape)
        hidden_shape = tuple(token_ids_shape) + (self.d_model,)
        for layer in self.stack:
            layer.build(hidden_shape, encoder_outputs_shape)
        if self.final_norm is not None:
            self.final_norm.build(hidden_shape)
        self.built = True

    def call(
        self,
        token_ids,
        encoder_outputs,
        encoder_padding_mask=None,
        training=None,
        encoder_outputs_mask=None,
    ):
        encoder_padding_mask = check_mask(encoder_padding_mask, "encoder_padding_mask")
        if encoder_padding_mask is None:
            encoder_padding_mask = check_mask(encoder_outputs_mask, "encoder_outputs_mask")
        target_mask = padding_mask(token_ids)
        x = self.embedding(token_ids, training=training)
        for layer in self.stack:
            x = layer(
                x, encoder_outputs, decoder_padding_mask=target_mask,
                encoder_padding_mask=encoder_padding_mask, training=training,
            )
        if self.final_norm is not None:
            x = layer_norm(self.final_norm, x)
        return x

    def compute_mask(self, token_ids, mask=None):
        return None

