"""`TransformerModel`: the functional model `build_transformer` builds, with its parts, passes and config."""

import functools
import typing

import keras
from keras import ops

from keras_transformer.config import DecodingConfig, ModelConfig
from keras_transformer.layers.decoder import decoder_forward
from keras_transformer.layers.embedding import check_token_ids
from keras_transformer.layers.encoder import encoder_forward
from keras_transformer.layers.masks import padding_mask
from keras_transformer.layers.target_padding_mask import target_padding_mask

_REQUIRED_LAYERS = ("encoder_embedding", "encoder_layer_0", "decoder_layer_0")


@keras.saving.register_keras_serializable(package="keras_transformer")
class TransformerModel(keras.Model):
    """The encoder-decoder Transformer built by `build_transformer`.

    A functional `keras.Model` (call it on `{"encoder_inputs": source_ids,
    "decoder_inputs": target_ids}` for logits) with the parts and passes that
    decoding, export and inspection use. It rejects token inputs Keras would
    silently convert: Keras casts float inputs to an `int32` `Input` and
    squeezes a trailing axis of size 1, and for token ids both hide a bug
    upstream, so this model raises a `ValueError` that names the input.

    `model.config` is its `ModelConfig`, stored in its Keras config (and so
    in a `.keras` file) beside the functional model's layers and graph; a
    `.keras` file of an earlier version, which has only those, loads as it
    is, its `ModelConfig` read off its layers (`config_of`).
    `model.decoding_config` is the `DecodingConfig` it decodes with by
    default where it has one of its own (an imported checkpoint's generation
    settings), stored likewise; None otherwise.

    Example (the cached decoding step, one token per source):

    >>> model = build_transformer(300, 300, num_layers=1, d_model=32, num_heads=4,
    ...                           d_ff=64, max_length=16)
    >>> source = keras.ops.convert_to_tensor([[5, 6, 7, 0]])
    >>> memory = model.encode(source)
    >>> self_caches = model.empty_self_attention_caches(1, 16)
    >>> logits, self_caches = model.decoder_step(
    ...     keras.ops.convert_to_tensor([[2]]), 0, self_caches,
    ...     model.cross_attention_caches(memory), padding_mask(source))
    >>> tuple(logits.shape)
    (1, 1, 300)
    """

    def __init__(self, *args, config=None, **kwargs):
        super().__init__(*args, **kwargs)
        self._model_config = config
        self.decoding_config = None

    @property
    def config(self):
        """The `ModelConfig` this model was built from."""
        if self._model_config is None:
            self._model_config = config_of(self)
        return self._model_config

    def get_config(self):
        config = {**super().get_config(), "model_config": self.config.to_dict()}
        if self.decoding_config is not None:
            config["decoding_config"] = self.decoding_config.to_dict()
        return config

    @classmethod
    def from_config(cls, config, custom_objects=None):
        config = dict(config)
        model_config = config.pop("model_config", None)
        decoding_config = config.pop("decoding_config", None)
        model = super().from_config(config, custom_objects=custom_objects)
        if model_config is not None:
            model._model_config = ModelConfig.from_dict(model_config, "the model's `model_config`")
        if decoding_config is not None:
            model.decoding_config = DecodingConfig.from_dict(decoding_config, "the model's `decoding_config`")
        return model

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

    def make_train_function(self, force=False):
        """Keras's, after building the optimizer for the trainable weights.

        Keras on TensorFlow otherwise builds it inside the first traced
        training step, and slot variables created there make TensorFlow trace
        the step twice (docs/training.md has the cost). Built here, a model compiled by hand
        traces its step once, like one compiled by `training.compile_model`.
        """
        if self.optimizer is not None and not self.optimizer.built:
            self.optimizer.build(self.trainable_variables)
        return super().make_train_function(force)

    # -- parts -----------------------------------------------------------------

    @functools.cached_property
    def _parts(self):
        """The model's layers by role, looked up by name once (the one lookup by name in the package)."""
        return _Parts.of(self)

    @property
    def encoder_embedding(self):
        """The source `TokenAndPositionEmbedding`."""
        return self._parts.encoder_embedding

    @property
    def decoder_embedding(self):
        """The target `TokenAndPositionEmbedding` (`encoder_embedding` when shared)."""
        return self._parts.decoder_embedding

    @property
    def encoder_layers(self):
        """The `EncoderLayer`s, first to last."""
        return list(self._parts.encoder_layers)

    @property
    def decoder_layers(self):
        """The `DecoderLayer`s, first to last."""
        return list(self._parts.decoder_layers)

    @property
    def encoder_norm(self):
        """The LayerNorm after the last encoder layer (pre-norm), or `None`."""
        return self._parts.encoder_norm

    @property
    def decoder_norm(self):
        """The LayerNorm after the last decoder layer (pre-norm), or `None`."""
        return self._parts.decoder_norm

    @property
    def encoder_position_bias(self):
        """The encoder's `RelativePositionBias` (T5's), or `None`."""
        return self._parts.encoder_position_bias

    @property
    def decoder_position_bias(self):
        """The decoder's causal `RelativePositionBias` (T5's), or `None`."""
        return self._parts.decoder_position_bias

    @property
    def output_layer(self):
        """The `Dense` output projection, or `None` when tied to `decoder_embedding`."""
        return self._parts.output_layer

    @property
    def max_length(self):
        """The longest source or target sequence."""
        return self.decoder_embedding.max_length

    @property
    def source_vocab_size(self):
        return self.encoder_embedding.vocab_size

    @property
    def target_vocab_size(self):
        return self.decoder_embedding.vocab_size

    # -- passes ----------------------------------------------------------------

    def encode(self, source_ids, training=False, return_attention_scores=False):
        """The encoder output `(batch, source_len, d_model)` for int `source_ids`, 0 = padding.

        With `return_attention_scores=True`, also the list of each encoder
        layer's attention weights `(batch, heads, source_len, source_len)`.
        """
        return encoder_forward(
            self.encoder_embedding,
            self.encoder_layers,
            self.encoder_norm,
            source_ids,
            self.source_padding_mask(source_ids),
            training,
            return_attention_scores,
            position_bias=self.encoder_position_bias,
        )

    def decode(self, target_ids, encoder_outputs, encoder_padding_mask, training=False, return_attention_scores=False):
        """Teacher-forced logits `(batch, target_len, target_vocab_size)`.

        `target_ids` are the decoder inputs (START first, 0 = padding) and
        `encoder_padding_mask` is boolean `(batch, source_len)`, `True` at real
        source tokens. With `return_attention_scores=True`, returns `(logits,
        self-attention scores per layer, cross-attention scores per layer)`.
        """
        outputs = decoder_forward(
            self.decoder_embedding,
            self.decoder_layers,
            None,
            target_ids,
            encoder_outputs,
            self.target_padding_mask(target_ids),
            encoder_padding_mask,
            training,
            return_attention_scores,
            position_bias=self.decoder_position_bias,
        )
        if return_attention_scores:
            return (self.logits(outputs[0]), *outputs[1:])
        return self.logits(outputs)

    def source_padding_mask(self, source_ids):
        """`True` at the real tokens of `source_ids` (not `config.pad_id`)."""
        return padding_mask(source_ids, self.config.pad_id)

    def target_padding_mask(self, target_ids):
        """`True` at the real tokens of decoder inputs, the start token included (see `TargetPaddingMask`)."""
        config = self.config
        return target_padding_mask(target_ids, config.target_pad, config.start_id, config.decoder_attends_padding)

    def logits(self, hidden):
        """The output head on decoder states: `decoder_norm` (if any), then the projection."""
        if self.decoder_norm is not None:
            hidden = self.decoder_norm(hidden)
        if self.output_layer is None:
            return self.decoder_embedding(hidden, reverse=True)
        return self.output_layer(hidden)

    # -- the cached decoder step -----------------------------------------------

    def cross_attention_caches(self, encoder_outputs):
        """Each decoder layer's projected cross-attention keys/values, computed once per source."""
        return tuple(layer.compute_cross_attention_cache(encoder_outputs) for layer in self.decoder_layers)

    def empty_self_attention_caches(self, batch_size, length):
        """Zeroed self-attention caches: `(keys, values)` `(batch_size, heads, length, key_dim)` per layer."""
        return tuple(
            tuple(
                ops.zeros(
                    (batch_size, layer.num_heads, length, layer.self_attention.key_dim), dtype=layer.compute_dtype
                )
                for _ in "kv"
            )
            for layer in self.decoder_layers
        )

    def decoder_step(
        self,
        token_ids,
        index,
        self_attention_caches,
        cross_attention_caches,
        encoder_padding_mask,
        cache_update_index=None,
        attention_mask=None,
    ):
        """One cached decoder step: `(logits (batch, queries, vocab), self_attention_caches)`.

        `token_ids` `(batch, queries)` all sit at position `index` (the
        queries of a row are, e.g., the beams of one source, which meet its
        encoder output together); their keys/values are written into the
        caches at `cache_update_index` (default `index`). `attention_mask`
        (boolean `(batch, queries, cache_length)`, `True` = may attend) narrows
        which cache entries each query sees; without it the causal mask over
        the cache positions alone applies.
        """
        states, caches = self.decoder_states(
            token_ids,
            index,
            self_attention_caches,
            cross_attention_caches,
            encoder_padding_mask,
            cache_update_index=cache_update_index,
            attention_mask=attention_mask,
        )
        return self.logits(states), caches

    def decoder_states(
        self,
        token_ids,
        index,
        self_attention_caches,
        cross_attention_caches,
        encoder_padding_mask,
        cache_update_index=None,
        attention_mask=None,
    ):
        """`decoder_step` before the output head (`logits`): `(states (batch, queries, d_model), caches)`."""
        cache_update_index = index if cache_update_index is None else cache_update_index
        queries = token_ids.shape[1]
        sides = {"target": True} if self.decoder_embedding.separate_positions else {}  # a shared mBART embedding
        x = self.decoder_embedding(ops.reshape(token_ids, (-1, 1)), start_index=index, training=False, **sides)
        x = ops.reshape(x, (-1, queries, ops.shape(x)[-1]))  # (batch, queries, d_model)
        # A step's tokens are never padding, though START may share PAD's id (Marian's): no Keras mask. JAX keeps
        # the embedding's mask through a reshape that changes nothing, and it would mask START.
        keras.src.backend.set_keras_mask(x, None)
        bias = self._step_bias(token_ids, cache_update_index, self_attention_caches)
        new_caches = []
        for layer, cache, cross_cache in zip(self.decoder_layers, self_attention_caches, cross_attention_caches):
            x, cache, _ = layer(
                x,
                encoder_padding_mask=encoder_padding_mask,
                self_attention_cache=cache,
                self_attention_cache_update_index=cache_update_index,
                cross_attention_cache=cross_cache,
                decoder_attention_mask=attention_mask,
                training=False,
                **bias,
            )
            new_caches.append(cache)
        return x, tuple(new_caches)

    def _step_bias(self, token_ids, cache_update_index, self_attention_caches):
        """`{"attention_bias": (1, heads, 1, cache length)}` of a step writing at `cache_update_index` (T5's), or `{}`.

        The cache holds one entry per query and slot, slot-major (the beams of
        `decoding.cache`: entry `e` is slot `e // queries`). The bias reads
        distances of slots: a row's keys sit at its positions plus one offset
        (zero in a batch decode, the slot it joined at in a `RowPool`), so
        they are the distances of its positions.
        """
        if self.decoder_position_bias is None:
            return {}
        keys = self_attention_caches[0][0]
        queries = token_ids.shape[1]
        length = keys.shape[2] if isinstance(keys.shape[2], int) else ops.shape(keys)[2]
        key_slots = ops.arange(length, dtype="int32") // queries
        query = ops.reshape(ops.cast(cache_update_index, "int32") // queries, (1,))
        return {"attention_bias": self.decoder_position_bias.between(query, key_slots)}


class _Parts(typing.NamedTuple):
    encoder_embedding: object
    decoder_embedding: object
    encoder_layers: tuple
    decoder_layers: tuple
    encoder_norm: object
    decoder_norm: object
    output_layer: object
    encoder_position_bias: object
    decoder_position_bias: object

    @classmethod
    def of(cls, model):
        layers = {layer.name: layer for layer in model.layers}

        def stack(prefix):
            found = []
            while f"{prefix}_{len(found)}" in layers:
                found.append(layers[f"{prefix}_{len(found)}"])
            return tuple(found)

        encoder_embedding = layers.get("encoder_embedding")
        return cls(
            encoder_embedding,
            layers.get("decoder_embedding", encoder_embedding),
            stack("encoder_layer"),
            stack("decoder_layer"),
            layers.get("encoder_norm"),
            layers.get("decoder_norm"),
            layers.get("logits"),
            layers.get("encoder_position_bias"),
            layers.get("decoder_position_bias"),
        )


def config_of(model):
    """The `ModelConfig` of a model whose Keras config holds none (a `.keras` file of 0.1.0), read off its layers."""
    parts = _Parts.of(model)
    encoder = parts.encoder_layers[0]
    return ModelConfig(
        source_vocab_size=parts.encoder_embedding.vocab_size,
        target_vocab_size=parts.decoder_embedding.vocab_size,
        num_layers=len(parts.encoder_layers),
        num_decoder_layers=None
        if len(parts.decoder_layers) == len(parts.encoder_layers)
        else len(parts.decoder_layers),
        d_model=encoder.d_model,
        num_heads=encoder.num_heads,
        d_ff=encoder.d_ff,
        dropout=encoder.dropout,
        attention_dropout=encoder.attention_dropout,
        activation_dropout=encoder.activation_dropout,
        max_length=parts.decoder_embedding.max_length,
        share_embeddings=parts.decoder_embedding is parts.encoder_embedding,
        tie_output_embedding=parts.output_layer is None,
        norm_first=encoder.norm_first,
        activation=keras.activations.serialize(encoder.activation),
        layer_norm_epsilon=encoder.layer_norm_epsilon,
        position_layout=parts.decoder_embedding.position_layout,
        scale_embeddings=parts.decoder_embedding.scale_embeddings,
        output_bias=parts.decoder_embedding.output_bias,
        pad_id=parts.encoder_embedding.pad_id,
    )


def as_transformer(model, argument="model"):
    """`model` as a `TransformerModel`, or a `ValueError` that names `argument`.

    A `TransformerModel` is returned as it is. A functional model with
    `build_transformer`'s layer names (e.g. `keras.models.clone_model` of
    one, or a functional model saved before the `TransformerModel` class)
    is wrapped, sharing its layers and weights. Anything else is refused.

    Example:

    >>> as_transformer(keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)]))
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: `model` must come from `build_transformer` ...
    """
    if isinstance(model, TransformerModel):
        return model
    if isinstance(model, (list, tuple)):
        raise ValueError(
            "An ensemble (a list of models) is decoded by `greedy_decode`, `beam_decode` and "
            f"`sample_decode`; this function takes one model. Received: a list of {len(model)} models"
        )
    names = sorted(layer.name for layer in getattr(model, "layers", ()))
    if not set(_REQUIRED_LAYERS) <= set(names):
        raise ValueError(
            f"`{argument}` must come from `build_transformer` (layers named encoder_embedding, "
            f"encoder_layer_0, decoder_layer_0, ...). Received: {argument}="
            f"{getattr(model, 'name', type(model).__name__)!r} with layers {names[:8]}"
        )
    return TransformerModel(inputs=model.input, outputs=model.output, name=model.name)
