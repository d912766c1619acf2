"""One decoder block: masked self-attention, cross-attention, feed-forward."""

import keras

from keras_transformer.layers.encoder_layer import EncoderLayer, attention_outputs
from keras_transformer.layers.hash_dropout import HashDropout
from keras_transformer.layers.masks import check_mask, check_mask_shape
from keras_transformer.layers.shapes import check_sequence, static_shape


@keras.saving.register_keras_serializable(package="keras_transformer")
class DecoderLayer(EncoderLayer):
    """Causal self-attention, attention over the encoder output, then an FFN.

    Each sublayer has a residual connection and LayerNorm, post-norm as in the
    paper or pre-norm with `norm_first=True` (see `EncoderLayer`).

    Masks are boolean and `True` where attention is allowed. The look-ahead
    mask is always applied to self-attention, in training and inference alike,
    with or without dropout. `decoder_padding_mask` `(batch, target_len)` and
    `encoder_padding_mask` `(batch, source_len)` mark real tokens; without them
    the Keras masks of `decoder_sequence` and `encoder_sequence` are used.
    Without `encoder_sequence` the layer is a decoder-only (GPT-style) block.
    A float or int mask is a `ValueError` (convert the TensorFlow tutorial's
    additive masks, 1 = blocked, with `keras.ops.equal(mask, 0)`), and so is
    a mask or a sequence whose static shape does not fit the others (the
    masks of a cached step are checked against the caches' lengths).

    Incremental decoding: pass `self_attention_cache`, a pair `(keys, values)`
    each of shape `(batch, num_heads, max_len, key_dim)`, with
    `self_attention_cache_update_index` (the position of the current token),
    and `cross_attention_cache` from `compute_cross_attention_cache()`; the call
    then returns `(output, self_attention_cache, cross_attention_cache)`.

    Args:
        use_cross_attention: whether the block attends an encoder's output;
            False builds a decoder-only (GPT) block without those weights.
        Others: as `EncoderLayer`.

    Call arguments:
        decoder_sequence: `(batch, target_len, d_model)`.
        encoder_sequence: `(batch, source_len, d_model)` or `None`.
        decoder_padding_mask: optional boolean `(batch, target_len)`.
        encoder_padding_mask: optional boolean `(batch, source_len)`.
        self_attention_cache, self_attention_cache_update_index,
        cross_attention_cache: the decoding cache (see above).
        return_attention_scores: also return the self- and cross-attention
            weights, `(batch, heads, target_len, target_len | source_len)`.
        decoder_attention_mask: optional boolean self-attention mask
            `(batch, target_len, target_len | cache_len)`, `True` = may
            attend, merged with the look-ahead mask (e.g. which cached
            positions each beam descends from, in beam search).
        training: whether dropout is active.
        attention_bias: optional float `(1, heads, target_len, target_len |
            cache_len)` added to the self-attention scores (T5's causal
            `RelativePositionBias`; cross-attention has none).

    Example:

    >>> layer = DecoderLayer(d_model=32, num_heads=4, d_ff=64)
    >>> x, memory = keras.ops.ones((2, 5, 32)), keras.ops.ones((2, 7, 32))
    >>> tuple(layer(x, memory).shape)
    (2, 5, 32)

    References:
        Vaswani et al., "Attention Is All You Need", 2017, section 3.1.
    """

    def __init__(self, d_model, num_heads, d_ff, use_cross_attention=True, **kwargs):
        super().__init__(d_model, num_heads, d_ff, **kwargs)
        self.use_cross_attention = bool(use_cross_attention)
        self.cross_attention = self.cross_attention_norm = self.cross_attention_dropout = None
        if not self.use_cross_attention:  # a GPT block: no weights it would never use
            return
        self.cross_attention = self._attention("cross_attention")
        self.cross_attention_norm = self._norm("cross_attention_norm")
        self.cross_attention_dropout = HashDropout(
            self.dropout, name="cross_attention_dropout", dtype=self.dtype_policy
        )

    def build(self, decoder_sequence_shape, encoder_sequence_shape=None):
        check_sequence(decoder_sequence_shape, "decoder_sequence", self.d_model)
        super().build(decoder_sequence_shape)
        if encoder_sequence_shape is not None and self.use_cross_attention:
            check_sequence(encoder_sequence_shape, "encoder_sequence", self.d_model)
            self.cross_attention.build(decoder_sequence_shape, encoder_sequence_shape)
            self.cross_attention_norm.build(decoder_sequence_shape)
        self.built = True

    def get_config(self):
        return {**super().get_config(), "use_cross_attention": self.use_cross_attention}

    def compute_cross_attention_cache(self, encoder_sequence):
        """The encoder's projected keys/values, computed once per source."""
        return self.cross_attention.compute_cache(encoder_sequence)

    def call(
        self,
        decoder_sequence,
        encoder_sequence=None,
        decoder_padding_mask=None,
        encoder_padding_mask=None,
        self_attention_cache=None,
        self_attention_cache_update_index=None,
        cross_attention_cache=None,
        return_attention_scores=False,
        decoder_attention_mask=None,
        training=None,
        decoder_sequence_mask=None,
        encoder_sequence_mask=None,
        attention_bias=None,
    ):
        masks = dict(
            decoder_padding_mask=decoder_padding_mask,
            decoder_sequence_mask=decoder_sequence_mask,
            encoder_padding_mask=encoder_padding_mask,
            encoder_sequence_mask=encoder_sequence_mask,
            decoder_attention_mask=decoder_attention_mask,
        )
        decoder_padding, encoder_padding, attention_mask = self._checked_masks(
            decoder_sequence, encoder_sequence, self_attention_cache, cross_attention_cache, masks
        )
        use_cache = self_attention_cache is not None
        self_attention = dict(
            # With a cache the keys are the cache's positions: the causal mask alone says which are filled.
            value_mask=None if use_cache else decoder_padding,
            attention_mask=attention_mask,
            use_causal_mask=True,
            cache=self_attention_cache,
            cache_update_index=self_attention_cache_update_index,
            attention_bias=attention_bias,
        )
        scores = dict(return_attention_scores=return_attention_scores, training=training)
        x, (self_scores, *new_cache) = self._residual(
            decoder_sequence,
            self.self_attention_norm,
            self.self_attention_dropout,
            lambda x: attention_outputs(self.self_attention(x, x, **self_attention, **scores), return_attention_scores),
            training,
        )
        cross_scores = None
        attends_encoder = encoder_sequence is not None or cross_attention_cache is not None
        if attends_encoder and not self.use_cross_attention:
            raise ValueError(
                "This DecoderLayer has no cross-attention (`use_cross_attention=False`): pass no `encoder_sequence` "
                "and no `cross_attention_cache`"
            )
        if attends_encoder:
            cross_attention = dict(value_mask=encoder_padding, cache=cross_attention_cache)
            x, (cross_scores, *_) = self._residual(
                x,
                self.cross_attention_norm,
                self.cross_attention_dropout,
                lambda x: attention_outputs(
                    self.cross_attention(x, encoder_sequence, **cross_attention, **scores), return_attention_scores
                ),
                training,
            )
        x = self._feed_forward(x, training)

        outputs = (x,)
        if return_attention_scores:
            outputs += (self_scores, cross_scores)
        if use_cache:
            outputs += (new_cache[0], cross_attention_cache)
        return outputs[0] if len(outputs) == 1 else outputs

    def _checked_masks(self, decoder_sequence, encoder_sequence, self_attention_cache, cross_attention_cache, masks):
        """`(decoder padding, encoder padding, decoder attention)` masks, checked; Keras's masks where none given."""
        for name in ("decoder_padding_mask", "encoder_padding_mask", "decoder_attention_mask"):
            masks[name] = check_mask(masks[name], name)
        self._check_shapes(decoder_sequence, encoder_sequence, self_attention_cache, cross_attention_cache, masks)
        decoder_padding_mask, encoder_padding_mask = masks["decoder_padding_mask"], masks["encoder_padding_mask"]
        if decoder_padding_mask is None:
            decoder_padding_mask = check_mask(masks["decoder_sequence_mask"], "decoder_sequence_mask")
        if encoder_padding_mask is None:
            encoder_padding_mask = check_mask(masks["encoder_sequence_mask"], "encoder_sequence_mask")
        return decoder_padding_mask, encoder_padding_mask, masks["decoder_attention_mask"]

    def _check_shapes(self, decoder_sequence, encoder_sequence, self_attention_cache, cross_attention_cache, masks):
        """`ValueError`s naming the sequence or mask whose static shape does not fit the others.

        `masks` maps each mask argument's name to the mask given (or `None`);
        a padding mask a caller gave replaces the Keras mask of its sequence,
        which is then not checked. With a self-attention cache the decoder's
        padding is not read (the cache's causal mask says which positions are
        filled), so it is not checked either.
        """
        check_sequence(decoder_sequence, "decoder_sequence", self.d_model)
        if encoder_sequence is not None:
            check_sequence(encoder_sequence, "encoder_sequence", self.d_model)
        batch, target_len = decoder_sequence.shape[0], decoder_sequence.shape[1]
        source_len = encoder_sequence.shape[1] if encoder_sequence is not None else _cache_length(cross_attention_cache)
        keys_len = target_len if self_attention_cache is None else _cache_length(self_attention_cache)
        padding = (("decoder", "target_len", target_len),) if self_attention_cache is None else ()
        for side, axis, length in (*padding, ("encoder", "source_len", source_len)):
            given = f"{side}_padding_mask" if masks[f"{side}_padding_mask"] is not None else f"{side}_sequence_mask"
            check_mask_shape(masks[given], given, ("batch", axis), (batch, length))
        check_mask_shape(
            masks["decoder_attention_mask"],
            "decoder_attention_mask",
            ("batch", "target_len", "keys_len"),
            (batch, target_len, keys_len),
            ranks=(2, 3),
        )


def _cache_length(cache):
    """The positions of a `(keys, values)` cache, each `(batch, heads, length, key_dim)`; `None` if unknown."""
    if not isinstance(cache, (tuple, list)) or len(cache) != 2:
        return None
    shape = static_shape(cache[0])
    return shape[2] if shape is not None and len(shape) == 4 else None
