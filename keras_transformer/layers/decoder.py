"""The decoder stack: token embedding, positional encoding and N decoder layers."""

import keras

from keras_transformer.layers.decoder_layer import DecoderLayer
from keras_transformer.layers.embedding import check_token_ids_shape
from keras_transformer.layers.encoder import Encoder
from keras_transformer.layers.masks import check_mask, padding_mask
from keras_transformer.layers.shapes import check_sequence


def decoder_forward(
    embedding,
    layers,
    final_norm,
    token_ids,
    encoder_outputs,
    decoder_padding_mask=None,
    encoder_padding_mask=None,
    training=None,
    return_attention_scores=False,
    position_bias=None,
):
    """The decoder's teacher-forced forward pass: `embedding`, each of `layers`, `final_norm`.

    Shared by `Decoder`, `build_transformer`'s functional graph and
    `TransformerModel.decode`, as `encoder_forward` is (the cached one-token
    step is `TransformerModel.decoder_step`). Without the padding masks each
    layer reads the Keras masks of its inputs; self-attention is causal.

    Args:
        embedding: a `TokenAndPositionEmbedding`.
        layers: the `DecoderLayer`s, first to last.
        final_norm: a `LayerNormalization` after the last layer, or `None`.
        token_ids: integer `(batch, target_len)`, 0 = padding.
        encoder_outputs: `(batch, source_len, d_model)`.
        decoder_padding_mask, encoder_padding_mask: optional boolean
            `(batch, target_len)` and `(batch, source_len)`, `True` at real tokens.
        training: whether dropout is active (`None`: Keras decides).
        return_attention_scores: also return each layer's attention weights.
        position_bias: a causal `RelativePositionBias` (T5's), computed once
            and added to every layer's self-attention scores, or `None`.

    Returns:
        `(batch, target_len, d_model)`; with `return_attention_scores=True`,
        `(outputs, [self-attention scores per layer], [cross-attention scores per layer])`.

    Example:

    >>> from keras_transformer.layers.embedding import TokenAndPositionEmbedding
    >>> embedding = TokenAndPositionEmbedding(90, 32, 16)
    >>> ids = keras.ops.convert_to_tensor([[1, 4, 0]])
    >>> outputs = decoder_forward(embedding, [DecoderLayer(32, 4, 64)], None, ids,
    ...                           keras.ops.ones((1, 5, 32)), padding_mask(ids))
    >>> tuple(outputs.shape)
    (1, 3, 32)
    """
    options = {} if training is None else {"training": training}
    layer_options = dict(options)
    if decoder_padding_mask is not None:
        layer_options["decoder_padding_mask"] = decoder_padding_mask
    if encoder_padding_mask is not None:
        layer_options["encoder_padding_mask"] = encoder_padding_mask
    if return_attention_scores:
        layer_options["return_attention_scores"] = True
    sides = {"target": True} if getattr(embedding, "separate_positions", False) else {}  # a shared mBART embedding
    x = embedding(token_ids, **options, **sides)
    if position_bias is not None:
        layer_options["attention_bias"] = position_bias(token_ids)
    self_scores, cross_scores = [], []
    for layer in layers:
        x = layer(x, encoder_outputs, **layer_options)
        if return_attention_scores:
            x, layer_self_scores, layer_cross_scores = x
            self_scores.append(layer_self_scores)
            cross_scores.append(layer_cross_scores)
    if final_norm is not None:
        x = final_norm(x)
    return (x, self_scores, cross_scores) if return_attention_scores else x


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
        return DecoderLayer(self.d_model, self.num_heads, self.d_ff, name=name, **self._layer_options())

    def build(self, token_ids_shape, encoder_outputs_shape=None):
        check_token_ids_shape(token_ids_shape, "token_ids")
        if encoder_outputs_shape is not None:
            check_sequence(encoder_outputs_shape, "encoder_outputs", self.d_model)
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
        check_token_ids_shape(token_ids, "token_ids")
        check_sequence(encoder_outputs, "encoder_outputs", self.d_model)
        return decoder_forward(
            self.embedding,
            self.stack,
            self.final_norm,
            token_ids,
            encoder_outputs,
            padding_mask(token_ids),
            encoder_padding_mask,
            training,
        )

    def compute_mask(self, token_ids, mask=None):
        return None
