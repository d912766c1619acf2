"""Functional-API builders for the Transformer."""

import keras

from keras_transformer.layers.arguments import check_positive_int, check_positive_number, check_rate
from keras_transformer.layers.decoder_layer import DecoderLayer
from keras_transformer.layers.embedding import TokenAndPositionEmbedding, check_token_ids
from keras_transformer.layers.encoder_layer import EncoderLayer


@keras.saving.register_keras_serializable(package="keras_transformer")
class TransformerModel(keras.Model):
    """A functional model that rejects token inputs Keras would silently convert.

    Keras casts float inputs to an `int32` `Input` and squeezes a trailing axis
    of size 1; for token ids both hide a bug upstream, so this model raises a
    `ValueError` that names the input instead. Everything else is the plain
    functional `keras.Model` built by `build_transformer`.
    """

    def call(self, inputs, training=None, mask=None):
        if isinstance(inputs, dict):
            named = [(name, inputs[name]) for name in sorted(inputs)]
        else:
            named = [(f"inputs[{i}]", x) for i, x in enumerate(inputs)]
        for name, token_ids in named:
            if not hasattr(token_ids, "dtype"):
                token_ids = keras.ops.convert_to_tensor(token_ids)
            check_token_ids(token_ids, name)
        return super().call(inputs, training=training, mask=mask)


def build_transformer(
    input_vocab_size,
    target_vocab_size,
    num_layers=6,
    d_model=512,
    num_heads=8,
    d_ff=2048,
    dropout=0.1,
    max_length=256,
    share_embeddings=False,
    tie_output_embedding=False,
    norm_first=False,
    num_decoder_layers=None,
    activation="relu",
    layer_norm_epsilon=1e-6,
    attention_dropout=0.0,
    activation_dropout=0.0,
    name="transformer",
):
    """The encoder-decoder Transformer as a functional `keras.Model`.

    Inputs are named `encoder_inputs` (source ids) and `decoder_inputs`
    (target ids shifted right: start token first), both int with 0 = padding.
    The output is unnormalised logits `(batch, target_len, target_vocab_size)`
    that carry no Keras mask: use `MaskedSparseCategoricalCrossentropy`, which
    skips padded labels itself. Source padding is masked in every encoder
    self-attention and every decoder cross-attention; target padding and the
    look-ahead mask in every decoder self-attention.

    Layers are named for decoding and inspection: `encoder_embedding`,
    `encoder_layer_{i}`, `decoder_embedding` (the same layer as
    `encoder_embedding` when shared), `decoder_layer_{i}`, `encoder_norm` and
    `decoder_norm` (pre-norm only), and `logits` (absent when tied).

    Args:
        input_vocab_size: source vocabulary size.
        target_vocab_size: target vocabulary size.
        num_layers: encoder layers (and decoder layers unless `num_decoder_layers`).
        d_model: model width (512 in the paper's base model).
        num_heads: attention heads; must divide `d_model`.
        d_ff: feed-forward inner width.
        dropout: dropout on embeddings and sublayer outputs.
        max_length: longest source or target sequence.
        share_embeddings: one embedding matrix for source and target (needs one
            shared vocabulary, so the two sizes must be equal).
        tie_output_embedding: use the target embedding matrix as the output
            projection (paper section 3.4).
        norm_first: pre-norm layers (and a final LayerNorm per stack).
        num_decoder_layers: decoder depth, if different from `num_layers`.
        activation, layer_norm_epsilon, attention_dropout, activation_dropout:
            passed to every layer.
        name: model name.

    Returns:
        A `TransformerModel` (a functional `keras.Model` that validates its
        token inputs).

    Raises:
        ValueError: naming the argument, for a size that is not a positive
            int, a dropout rate outside `[0, 1)`, or a `d_model` that
            `num_heads` does not divide.

    Example:

    >>> model = build_transformer(1000, 1000, num_layers=2, d_model=64,
    ...                           num_heads=4, d_ff=128, max_length=32)
    >>> logits = model({"encoder_inputs": keras.ops.ones((2, 7), "int32"),
    ...                 "decoder_inputs": keras.ops.ones((2, 5), "int32")})
    >>> tuple(logits.shape)
    (2, 5, 1000)
    """
    sizes = dict(
        input_vocab_size=input_vocab_size, target_vocab_size=target_vocab_size,
        num_layers=num_layers, d_model=d_model, num_heads=num_heads, d_ff=d_ff,
        max_length=max_length,
    )
    if num_decoder_layers is not None:
        sizes["num_decoder_layers"] = num_decoder_layers
    for size_name, size in sizes.items():
        check_positive_int(size_name, size)
    for rate_name, rate in (("dropout", dropout), ("attention_dropout", attention_dropout),
                            ("activation_dropout", activation_dropout)):
        check_rate(rate_name, rate)
    check_positive_number("layer_norm_epsilon", layer_norm_epsilon)
    if share_embeddings and input_vocab_size != target_vocab_size:
        raise ValueError(
            "`share_embeddings=True` needs one shared vocabulary. Received: "
            f"input_vocab_size={input_vocab_size}, target_vocab_size={target_vocab_size}"
        )
    if d_model % num_heads:
        raise ValueError(
            "`d_model` must be divisible by `num_heads`. "
            f"Received: d_model={d_model}, num_heads={num_heads}"
        )
    num_decoder_layers = num_layers if num_decoder_layers is None else num_decoder_layers
    layer_args = dict(
        d_model=d_model, num_heads=num_heads, d_ff=d_ff, dropout=dropout,
        norm_first=norm_first, activation=activation,
        layer_norm_epsilon=layer_norm_epsilon, attention_dropout=attention_dropout,
        activation_dropout=activation_dropout,
    )

    encoder_inputs = keras.Input((None,), dtype="int32", name="encoder_inputs")
    decoder_inputs = keras.Input((None,), dtype="int32", name="decoder_inputs")

    # Embeddings attach the padding masks (True = real token) that every
    # attention below reads.
    encoder_embedding = TokenAndPositionEmbedding(
        input_vocab_size, d_model, max_length, dropout=dropout, name="encoder_embedding"
    )
    decoder_embedding = (
        encoder_embedding
        if share_embeddings
        else TokenAndPositionEmbedding(
            target_vocab_size, d_model, max_length, dropout=dropout, name="decoder_embedding"
        )
    )

    x = encoder_embedding(encoder_inputs)
    for index in range(num_layers):
        x = EncoderLayer(**layer_args, name=f"encoder_layer_{index}")(x)
    if norm_first:
        x = keras.layers.LayerNormalization(epsilon=layer_norm_epsilon, name="encoder_norm")(x)
    encoder_outputs = x

    y = decoder_embedding(decoder_inputs)
    for index in range(num_decoder_layers):
        y = DecoderLayer(**layer_args, name=f"decoder_layer_{index}")(y, encoder_outputs)
    if norm_first:
        y = keras.layers.LayerNormalization(epsilon=layer_norm_epsilon, name="decoder_norm")(y)

    if tie_output_embedding:
        logits = decoder_embedding(y, reverse=True)
    else:
        logits = keras.layers.Dense(target_vocab_size, name="logits")(y)
    keras.src.backend.set_keras_mask(logits, None)  # the loss masks padding itself
    return TransformerModel(
        inputs={"encoder_inputs": encoder_inputs, "decoder_inputs": decoder_inputs},
        outputs=logits,
        name=name,
    )

