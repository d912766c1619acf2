"""`build_decoder_only`: GPT from the Transformer's decoder, and `DecoderOnlyModel`, the model it builds.

The paper's decoder without its encoder is a language model: token and
position embeddings, decoder blocks whose self-attention is causal and that
have no cross-attention, a final LayerNorm (pre-norm) and an output tied to
the token embedding. GPT-2 is this with learned positions, pre-norm layers,
the tanh GELU and biases on every projection (`build_decoder_only`'s
defaults). The blocks are this package's `DecoderLayer`s, so the model has
the same key/value cache and `decoder_step` as the encoder-decoder, and the
searches (`GreedySearch`, `BeamSearch`, `SamplingSearch`) continue a prompt
with it (`keras_transformer.decoding.prompts`).

Example:

>>> model = build_decoder_only(500, num_layers=2, d_model=32, num_heads=4, d_ff=64, max_length=16)
>>> logits = model(keras.ops.convert_to_tensor([[5, 6, 7]]))
>>> tuple(logits.shape), model.config.architecture
((1, 3, 500), 'decoder_only')
"""

import inspect

import keras
from keras import ops

from keras_transformer.config import END_ID, PAD_ID, START_ID, ModelConfig
from keras_transformer.layers.decoder_layer import DecoderLayer
from keras_transformer.layers.embedding import TokenAndPositionEmbedding, check_token_ids
from keras_transformer.models.builder import final_norm, layer_options
from keras_transformer.models.transformer_model import TransformerModel


def build_decoder_only(
    vocab_size=None,
    num_layers=12,
    d_model=768,
    num_heads=12,
    d_ff=3072,
    dropout=0.1,
    max_length=1024,
    activation="gelu_tanh",
    norm_first=True,
    position_layout="learned",
    scale_embeddings=False,
    tie_output_embedding=True,
    layer_norm_epsilon=1e-5,
    attention_dropout=0.0,
    pad_id=PAD_ID,
    start_id=START_ID,
    end_id=END_ID,
    name="decoder_only",
    *,
    config=None,
):
    """A decoder-only Transformer (GPT) as a `DecoderOnlyModel`: `token_ids` in, next-token logits out.

    The input `token_ids` `(batch, length)` are int; the output is the
    logits `(batch, length, vocab_size)` of the token after each position.
    Padding goes at the end of a row: the causal mask keeps every real
    token from attending it, and the loss skips padded labels, so no
    padding mask is needed. The defaults are GPT-2's choices (its small
    model's sizes): learned positions, pre-norm layers with a final
    LayerNorm, the tanh GELU, an output tied to the token embedding,
    LayerNorm epsilon 1e-5; every projection has a bias.

    `model.config` is the `ModelConfig` (`architecture="decoder_only"`,
    both vocabulary sizes `vocab_size`). Its layers are named
    `decoder_embedding`, `decoder_layer_{i}`, `decoder_norm` (pre-norm) and
    `logits` (untied only), as in `build_transformer`.

    Args:
        vocab_size ... end_id: the `ModelConfig`'s options (`start_id` is
            the id a prompt may start with, `end_id` the one that ends a
            continuation; GPT-2 has one id for all three of pad, start and end).
        name: model name.
        config: a `ModelConfig` instead of the options (then pass none of them).

    Raises:
        ValueError: naming the option, as `build_transformer` does.

    Example:

    >>> model = build_decoder_only(100, num_layers=1, d_model=16, num_heads=2, d_ff=32, max_length=8)
    >>> [layer.name for layer in model.decoder_layers], model.output_layer is None
    (['decoder_layer_0'], True)
    """
    options = dict(
        target_vocab_size=vocab_size,
        source_vocab_size=vocab_size,
        num_layers=num_layers,
        d_model=d_model,
        num_heads=num_heads,
        d_ff=d_ff,
        dropout=dropout,
        max_length=max_length,
        activation=activation,
        norm_first=norm_first,
        position_layout=position_layout,
        scale_embeddings=scale_embeddings,
        tie_output_embedding=tie_output_embedding,
        layer_norm_epsilon=layer_norm_epsilon,
        attention_dropout=attention_dropout,
        pad_id=pad_id,
        start_id=start_id,
        end_id=end_id,
    )
    if config is None:
        config = ModelConfig(**options, architecture="decoder_only")
    elif {k: v for k, v in options.items() if k != "source_vocab_size"} != _DEFAULT_OPTIONS:
        raise ValueError("Pass `config` or the model's options, not both.")
    if config.architecture != "decoder_only":
        raise ValueError(f"`build_decoder_only` builds architecture='decoder_only'. Received: {config.architecture!r}")
    return _build(config.check(), name)


def _build(config, name):
    token_ids = keras.Input((None,), dtype="int32", name="token_ids")
    embedding = TokenAndPositionEmbedding(
        config.target_vocab_size,
        config.d_model,
        config.max_length,
        dropout=config.dropout,
        mask_zero=False,  # right padding is never attended through the causal mask
        pad_id=config.target_pad,
        scale_embeddings=config.scale_embeddings,
        position_layout=config.position_layout,
        output_bias=config.output_bias and config.tie_output_embedding,
        name="decoder_embedding",
    )
    x = embedding(token_ids)
    for index in range(config.decoder_layers):
        x = DecoderLayer(**layer_options(config), use_cross_attention=False, name=f"decoder_layer_{index}")(x)
    norm = final_norm(config, "decoder_norm")
    if norm is not None:
        x = norm(x)
    if config.tie_output_embedding:
        logits = embedding(x, reverse=True)
    else:
        logits = keras.layers.Dense(config.target_vocab_size, name="logits")(x)
    return DecoderOnlyModel(inputs=token_ids, outputs=logits, name=name, config=config)


@keras.saving.register_keras_serializable(package="keras_transformer")
class DecoderOnlyModel(TransformerModel):
    """The decoder-only Transformer `build_decoder_only` builds: a `TransformerModel` without its encoder.

    Call it on int `token_ids` `(batch, length)` for next-token logits. Its
    parts and its cached step are the encoder-decoder's decoder side
    (`decoder_embedding`, `decoder_layers`, `decoder_norm`, `output_layer`,
    `logits`, `empty_self_attention_caches`, `decoder_step`); the
    cross-attention caches are `None`s, and `index` may be a `(batch,)`
    tensor, one position per row (prompts of different lengths, left-padded).
    `prompt_caches` fills the caches with a prompt in one pass.

    Example:

    >>> model = build_decoder_only(50, num_layers=1, d_model=16, num_heads=2, d_ff=32, max_length=8)
    >>> caches = model.empty_self_attention_caches(1, 8)
    >>> logits, caches = model.decoder_step(keras.ops.convert_to_tensor([[3]]), 0, caches)
    >>> tuple(logits.shape)
    (1, 1, 50)
    """

    def call(self, inputs, training=None, mask=None):
        token_ids = inputs["token_ids"] if isinstance(inputs, dict) else inputs
        if not hasattr(token_ids, "dtype"):
            token_ids = ops.convert_to_tensor(token_ids)
        check_token_ids(token_ids, "token_ids")
        return super(TransformerModel, self).call(token_ids, training=training, mask=mask)

    @property
    def source_vocab_size(self):
        return self.target_vocab_size

    def encode(self, *args, **kwargs):
        raise ValueError("A decoder-only model has no encoder: continue a prompt (`decoding.prompts`)")

    def decode(self, *args, **kwargs):
        raise ValueError("A decoder-only model has no encoder: call the model on `token_ids` for its logits")

    def cross_attention_caches(self, encoder_outputs=None):
        """No cross-attention: one `None` per decoder layer."""
        return (None,) * len(self.decoder_layers)

    def decoder_step(
        self,
        token_ids,
        index,
        self_attention_caches,
        cross_attention_caches=None,
        encoder_padding_mask=None,
        cache_update_index=None,
        attention_mask=None,
    ):
        """One cached step, as `TransformerModel.decoder_step`; `index` a scalar or `(batch,)` positions."""
        states, caches = self.decoder_states(
            token_ids,
            index,
            self_attention_caches,
            cache_update_index=cache_update_index,
            attention_mask=attention_mask,
        )
        return self.logits(states), caches

    def decoder_states(
        self,
        token_ids,
        index,
        self_attention_caches,
        cross_attention_caches=None,
        encoder_padding_mask=None,
        cache_update_index=None,
        attention_mask=None,
    ):
        """`decoder_step` before the output head: `(states (batch, queries, d_model), caches)`.

        The queries of a row (e.g. its beams) all sit at the row's position
        `index`; their keys/values are written at `cache_update_index`
        (default `index`, which must then be a scalar).
        """
        cache_update_index = index if cache_update_index is None else cache_update_index
        queries = token_ids.shape[1]
        start = ops.repeat(index, queries) if len(getattr(index, "shape", ())) == 1 else index
        x = self.decoder_embedding(ops.reshape(token_ids, (-1, 1)), start_index=start, training=False)
        x = ops.reshape(x, (-1, queries, ops.shape(x)[-1]))
        return self._layers_with_caches(x, self_attention_caches, cache_update_index, attention_mask)

    def prompt_caches(self, token_ids, start_index, self_attention_caches, attention_mask=None):
        """The caches after `token_ids` `(batch, length)` at positions `start_index + 0..length-1`.

        `start_index` is a scalar or one first position per row (negative
        for a left-padded row's padding); the keys/values are written at
        cache positions `0..length-1`. `attention_mask` (boolean, `(batch,
        1 | length, cache_length)`) hides the padding.
        """
        x = self.decoder_embedding(token_ids, start_index=start_index, training=False)
        return self._layers_with_caches(x, self_attention_caches, 0, attention_mask)[1]

    def _layers_with_caches(self, x, caches, cache_update_index, attention_mask):
        new_caches = []
        for layer, cache in zip(self.decoder_layers, caches):
            x, cache, _ = layer(
                x,
                self_attention_cache=cache,
                self_attention_cache_update_index=cache_update_index,
                decoder_attention_mask=attention_mask,
                training=False,
            )
            new_caches.append(cache)
        return x, tuple(new_caches)


def is_decoder_only(model):
    """Whether `model` is a `DecoderOnlyModel` (what the searches continue prompts with)."""
    return isinstance(model, DecoderOnlyModel)


_DEFAULT_OPTIONS = {
    name: parameter.default
    for name, parameter in inspect.signature(build_decoder_only).parameters.items()
    if name not in ("name", "config")
}
_DEFAULT_OPTIONS["target_vocab_size"] = _DEFAULT_OPTIONS.pop("vocab_size")
