"""`build_transformer`: the encoder-decoder graph of a `ModelConfig`."""

import inspect
import warnings

import keras

from keras_transformer.config import ModelConfig
from keras_transformer.layers.decoder import decoder_forward
from keras_transformer.layers.decoder_layer import DecoderLayer
from keras_transformer.layers.embedding import TokenAndPositionEmbedding
from keras_transformer.layers.encoder import encoder_forward
from keras_transformer.layers.encoder_layer import EncoderLayer
from keras_transformer.layers.normalization import normalization
from keras_transformer.layers.relative_position_bias import RelativePositionBias
from keras_transformer.layers.target_padding_mask import TargetPaddingMask
from keras_transformer.models.transformer_model import TransformerModel


def build_transformer(
    source_vocab_size=None,
    target_vocab_size=None,
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
    key_block_size=None,
    name="transformer",
    *,
    config=None,
    input_vocab_size=None,
):
    """The encoder-decoder Transformer as a `TransformerModel` (a functional `keras.Model`).

    Inputs are named `encoder_inputs` (source ids) and `decoder_inputs`
    (target ids shifted right: start token first), both int with 0 = padding.
    The output is unnormalised logits `(batch, target_len, target_vocab_size)`
    that carry no Keras mask: use `MaskedSparseCategoricalCrossentropy`, which
    skips padded labels itself. Source padding is masked in every encoder
    self-attention and every decoder cross-attention; target padding and the
    look-ahead mask in every decoder self-attention.

    The model's parts and passes (`model.encoder_layers`, `model.encode`,
    `model.decoder_step`, ...) are `TransformerModel`'s, and `model.config`
    is the `ModelConfig` it was built from. Its layers are named
    `encoder_embedding`, `encoder_layer_{i}`, `decoder_embedding` (the same
    layer as `encoder_embedding` when shared), `decoder_layer_{i}`,
    `encoder_norm` and `decoder_norm` (pre-norm only), and `logits` (absent
    when tied), as in every version so far; with T5's relative positions,
    `encoder_position_bias` and `decoder_position_bias`.

    Args:
        source_vocab_size ... key_block_size: the `ModelConfig`'s options
            (`keras_transformer.config.ModelConfig` says what each means).
        name: model name.
        config: a `ModelConfig` instead of the options (then pass none of them).
        input_vocab_size: the name of `source_vocab_size` before version 0.2
            (deprecated).

    Returns:
        A `TransformerModel`.

    Raises:
        ValueError: naming the argument, for a size that is not a positive
            int, a dropout rate outside `[0, 1)`, or a `d_model` that
            `num_heads` does not divide.

    Example:

    >>> model = build_transformer(1000, 1000, num_layers=2, d_model=64,
    ...                           num_heads=4, d_ff=128, max_length=32)
    >>> logits = model({"encoder_inputs": keras.ops.ones((2, 7), "int32"),
    ...                 "decoder_inputs": keras.ops.ones((2, 5), "int32")})
    >>> tuple(logits.shape), model.config.d_model
    ((2, 5, 1000), 64)
    """
    options = dict(
        source_vocab_size=source_vocab_size,
        target_vocab_size=target_vocab_size,
        num_layers=num_layers,
        d_model=d_model,
        num_heads=num_heads,
        d_ff=d_ff,
        dropout=dropout,
        max_length=max_length,
        share_embeddings=share_embeddings,
        tie_output_embedding=tie_output_embedding,
        norm_first=norm_first,
        num_decoder_layers=num_decoder_layers,
        activation=activation,
        layer_norm_epsilon=layer_norm_epsilon,
        attention_dropout=attention_dropout,
        activation_dropout=activation_dropout,
        key_block_size=key_block_size,
    )
    if input_vocab_size is not None:
        warnings.warn("`input_vocab_size` is now `source_vocab_size`", DeprecationWarning, stacklevel=2)
        options["source_vocab_size"] = input_vocab_size
    if config is None:
        config = ModelConfig(**options)
    elif options != _DEFAULT_OPTIONS:
        raise ValueError("Pass `config` or the model's options, not both.")
    if config.architecture != "encoder_decoder":
        raise ValueError(
            f"`build_transformer` builds the encoder-decoder; a config of architecture={config.architecture!r} is "
            f"built by `build_{config.architecture}`"
        )
    return _build(config.check(), name)


def _build(config, name):
    """The functional graph of `config`: inputs, embeddings, encoder stack, decoder stack, output head."""
    layer_args = layer_options(config)
    encoder_inputs = keras.Input((None,), dtype="int32", name="encoder_inputs")
    decoder_inputs = keras.Input((None,), dtype="int32", name="decoder_inputs")
    # Embeddings attach the padding masks (True = real token) that every attention below reads.
    encoder_embedding, decoder_embedding = _embeddings(config)

    encoder_bias, decoder_bias = position_biases(config)
    encoder_layers = [EncoderLayer(**layer_args, name=f"encoder_layer_{i}") for i in range(config.num_layers)]
    encoder_norm = final_norm(config, "encoder_norm")
    encoder_outputs = encoder_forward(
        encoder_embedding, encoder_layers, encoder_norm, encoder_inputs, position_bias=encoder_bias
    )
    decoder_layers = [DecoderLayer(**layer_args, name=f"decoder_layer_{i}") for i in range(config.decoder_layers)]
    target_mask = None
    if config.start_id == config.target_pad or config.decoder_attends_padding:  # the embedding's mask would not do
        target_mask = TargetPaddingMask(
            config.target_pad, config.start_id, config.decoder_attends_padding, name="decoder_padding_mask"
        )(decoder_inputs)
    decoder_norm = final_norm(config, "decoder_norm")
    y = decoder_forward(
        decoder_embedding,
        decoder_layers,
        decoder_norm,
        decoder_inputs,
        encoder_outputs,
        target_mask,
        position_bias=decoder_bias,
    )

    if config.tie_output_embedding:
        logits = decoder_embedding(y, reverse=True)
    else:
        options = {} if config.use_bias else {"use_bias": False}  # T5's lm_head has no bias
        logits = keras.layers.Dense(config.target_vocab_size, name="logits", **options)(y)
    # The loss masks padding itself: a Keras mask left on the logits would re-weight it. Keras 3 has no
    # public way to drop an implicit mask, so its backend's own setter does.
    keras.src.backend.set_keras_mask(logits, None)
    return TransformerModel(
        inputs={"encoder_inputs": encoder_inputs, "decoder_inputs": decoder_inputs},
        outputs=logits,
        name=name,
        config=config,
    )


def layer_options(config):
    """The keyword arguments of every `EncoderLayer` and `DecoderLayer` of `config`."""
    return dict(
        d_model=config.d_model,
        num_heads=config.num_heads,
        d_ff=config.d_ff,
        dropout=config.dropout,
        norm_first=config.norm_first,
        activation=config.activation,
        layer_norm_epsilon=config.layer_norm_epsilon,
        attention_dropout=config.attention_dropout,
        activation_dropout=config.activation_dropout,
        key_block_size=config.key_block_size,
        **_new_layer_options(config),
    )


def _new_layer_options(config):
    """The layer options added with T5: given only where they differ from the defaults, as `get_config` writes them."""
    options = dict(
        norm=config.norm,
        gated=config.feed_forward == "gated",
        use_bias=config.use_bias,
        key_dim=config.key_dim,
        scale_attention=config.scale_attention,
    )
    defaults = dict(norm="layer", gated=False, use_bias=True, key_dim=None, scale_attention=True)
    return {name: value for name, value in options.items() if value != defaults[name]}


def position_biases(config):
    """The encoder's and the decoder's `RelativePositionBias` (T5's), or `(None, None)`."""
    if config.position_layout != "relative":
        return None, None
    options = dict(
        num_buckets=config.relative_attention_num_buckets, max_distance=config.relative_attention_max_distance
    )
    return (
        RelativePositionBias(config.num_heads, bidirectional=True, name="encoder_position_bias", **options),
        RelativePositionBias(config.num_heads, bidirectional=False, name="decoder_position_bias", **options),
    )


def _embeddings(config):
    """The encoder's and the decoder's `TokenAndPositionEmbedding` (one layer twice when shared)."""
    options = dict(
        dropout=config.dropout, scale_embeddings=config.scale_embeddings, position_layout=config.position_layout
    )
    if config.position_offset:
        options["position_offset"] = config.position_offset
    if config.embedding_norm:  # mBART's layernorm_embedding; a shared embedding keeps one per side
        options.update(embedding_norm=True, layer_norm_epsilon=config.layer_norm_epsilon)
        options["separate_positions"] = config.share_embeddings
    if config.scale_output:
        options["output_scale"] = True
    tied_bias = config.output_bias and config.tie_output_embedding
    encoder = TokenAndPositionEmbedding(
        config.source_vocab_size,
        config.d_model,
        config.max_length,
        pad_id=config.pad_id,
        output_bias=tied_bias and config.share_embeddings,
        name="encoder_embedding",
        **options,
    )
    if config.share_embeddings:
        return encoder, encoder
    decoder = TokenAndPositionEmbedding(
        config.target_vocab_size,
        config.d_model,
        config.max_length,
        pad_id=config.target_pad,
        output_bias=tied_bias,
        name="decoder_embedding",
        **options,
    )
    return encoder, decoder


def final_norm(config, name):
    """A pre-norm stack's final LayerNorm (or RMS normalization, `config.norm`); None for post-norm."""
    if not config.norm_first:
        return None
    return normalization(config.norm, config.layer_norm_epsilon, name)


_DEFAULT_OPTIONS = {
    name: parameter.default
    for name, parameter in inspect.signature(build_transformer).parameters.items()
    if name not in ("name", "config", "input_vocab_size")
}
