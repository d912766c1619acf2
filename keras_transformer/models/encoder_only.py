"""`build_encoder_only`: BERT from the Transformer's encoder, and `EncoderOnlyModel`, the model it builds.

The paper's encoder alone reads a whole text at once, each token attending
every other: token, position and segment embeddings (summed, then a
LayerNorm: BERT's), this package's `EncoderLayer`s, and a head: a
masked-LM head (`MaskedLMHead`, then the tied output projection with its
bias: logits over the vocabulary at every position) or a
sequence-classification head (`SequenceClassificationHead`: the pooled
first token, then logits over the classes), or none (the hidden states, as
a `BertModel` gives them, for sentence embeddings).

Example:

>>> model = build_encoder_only(500, num_layers=2, d_model=32, num_heads=4, d_ff=64, max_length=16)
>>> logits = model(keras.ops.convert_to_tensor([[101, 7, 103, 102]]))
>>> tuple(logits.shape), model.config.encoder_head
((1, 4, 500), 'masked_lm')
"""

import inspect

import keras
from keras import ops

from keras_transformer.config import ModelConfig
from keras_transformer.layers.classification_head import SequenceClassificationHead
from keras_transformer.layers.embedding import TokenAndPositionEmbedding, check_token_ids
from keras_transformer.layers.encoder_layer import EncoderLayer
from keras_transformer.layers.hash_dropout import HashDropout
from keras_transformer.layers.masked_lm_head import MaskedLMHead
from keras_transformer.layers.target_padding_mask import TargetPaddingMask
from keras_transformer.models.builder import final_norm, layer_options
from keras_transformer.models.transformer_model import TransformerModel

# BERT's special ids in its uncased English vocabulary; a model of another vocabulary names its own.
BERT_IDS = dict(pad_id=0, start_id=101, end_id=102)


def build_encoder_only(
    vocab_size=None,
    num_layers=12,
    d_model=768,
    num_heads=12,
    d_ff=3072,
    dropout=0.1,
    max_length=512,
    segment_vocab_size=2,
    activation="gelu",
    norm_first=False,
    position_layout="learned",
    scale_embeddings=False,
    embedding_norm=True,
    layer_norm_epsilon=1e-12,
    attention_dropout=0.1,
    encoder_head="masked_lm",
    num_classes=None,
    pad_id=BERT_IDS["pad_id"],
    start_id=BERT_IDS["start_id"],
    end_id=BERT_IDS["end_id"],
    name="encoder_only",
    *,
    config=None,
):
    """An encoder-only Transformer (BERT) as an `EncoderOnlyModel`.

    Inputs: `token_ids` `(batch, length)` (`pad_id` = padding, never
    attended) and, with `segment_vocab_size` > 0, `segment_ids` of the same
    shape (called on `token_ids` alone, the segments are all 0). Output:
    the masked-LM logits `(batch, length, vocab_size)`, with
    `encoder_head="classifier"` the class logits `(batch, num_classes)`, or
    with `encoder_head="none"` the hidden states `(batch, length, d_model)`.
    The defaults are BERT's (its base model's sizes): learned positions,
    two segments, a LayerNorm on the embeddings, post-norm layers, the
    exact GELU, LayerNorm epsilon 1e-12; `start_id` is `[CLS]` (the token
    pooled) and `end_id` `[SEP]`.

    Its layers are named `encoder_embedding`, `segment_embedding`,
    `embedding_norm`, `encoder_layer_{i}`, `encoder_norm` (pre-norm),
    `masked_lm_head`, `classifier_head` or `hidden_states` (no head).

    Args:
        vocab_size ... end_id: the `ModelConfig`'s options.
        name: model name.
        config: a `ModelConfig` instead of the options (then pass none of them).

    Example:

    >>> model = build_encoder_only(200, num_layers=1, d_model=16, num_heads=2, d_ff=32, max_length=8,
    ...                            encoder_head="classifier", num_classes=3)
    >>> tuple(model({"token_ids": keras.ops.ones((2, 5), "int32"),
    ...              "segment_ids": keras.ops.zeros((2, 5), "int32")}).shape)
    (2, 3)
    """
    options = {name: value for name, value in locals().items() if name in _DEFAULT_OPTIONS}
    if config is None:
        config = ModelConfig(
            source_vocab_size=vocab_size,
            target_vocab_size=vocab_size,
            architecture="encoder_only",
            **{name: value for name, value in options.items() if name != "vocab_size"},
        )
    elif options != _DEFAULT_OPTIONS:
        raise ValueError("Pass `config` or the model's options, not both.")
    if config.architecture != "encoder_only":
        raise ValueError(f"`build_encoder_only` builds architecture='encoder_only'. Received: {config.architecture!r}")
    return _build(config.check(), name)


def _build(config, name):
    token_ids = keras.Input((None,), dtype="int32", name="token_ids")
    inputs = {"token_ids": token_ids}
    masked_lm = config.encoder_head == "masked_lm"
    embedding = TokenAndPositionEmbedding(
        config.source_vocab_size,
        config.d_model,
        config.max_length,
        dropout=0.0 if config.embedding_norm else config.dropout,  # after the norm, then
        pad_id=config.pad_id,
        scale_embeddings=config.scale_embeddings,
        position_layout=config.position_layout,
        output_bias=masked_lm,
        name="encoder_embedding",
    )
    x = embedding(token_ids)
    if config.segment_vocab_size:
        inputs["segment_ids"] = keras.Input((None,), dtype="int32", name="segment_ids")
        segments = keras.layers.Embedding(
            config.segment_vocab_size,
            config.d_model,
            embeddings_initializer=keras.initializers.RandomNormal(stddev=0.02),
            name="segment_embedding",
        )(inputs["segment_ids"])
        x = keras.layers.Add(name="embedding_sum")([x, segments])
    if config.embedding_norm:
        x = keras.layers.LayerNormalization(epsilon=config.layer_norm_epsilon, name="embedding_norm")(x)
        x = HashDropout(config.dropout, name="embedding_dropout")(x)
    # True at every token but padding ([CLS], the start id, is never padding).
    padding = TargetPaddingMask(config.pad_id, config.start_id, name="padding_mask")(token_ids)
    for index in range(config.num_layers):
        x = EncoderLayer(**layer_options(config), name=f"encoder_layer_{index}")(x, padding_mask=padding)
    norm = final_norm(config, "encoder_norm")
    if norm is not None:
        x = norm(x)
    if masked_lm:
        hidden = MaskedLMHead(config.d_model, config.activation, config.layer_norm_epsilon, name="masked_lm_head")(x)
        outputs = embedding(hidden, reverse=True)
    elif config.encoder_head == "classifier":
        outputs = SequenceClassificationHead(
            config.d_model, config.num_classes, config.dropout, name="classifier_head"
        )(x)
    else:  # "none": the hidden states themselves (a `BertModel`)
        outputs = keras.layers.Identity(name="hidden_states")(x)
    keras.src.backend.set_keras_mask(outputs, None)  # the loss masks what it skips (see `build_transformer`)
    return EncoderOnlyModel(inputs=inputs, outputs=outputs, name=name, config=config)


@keras.saving.register_keras_serializable(package="keras_transformer")
class EncoderOnlyModel(TransformerModel):
    """The encoder-only Transformer `build_encoder_only` builds: a `TransformerModel` without its decoder.

    Call it on `{"token_ids": ..., "segment_ids": ...}`, or on `token_ids`
    alone (segments all 0). `encoder_embedding`, `encoder_layers`,
    `encoder_norm` are its parts; `head` is its `MaskedLMHead` or
    `SequenceClassificationHead`.

    Example:

    >>> model = build_encoder_only(200, num_layers=1, d_model=16, num_heads=2, d_ff=32, max_length=8)
    >>> tuple(model(keras.ops.convert_to_tensor([[101, 5, 102, 0]])).shape)
    (1, 4, 200)
    """

    def __call__(self, inputs, *args, **kwargs):
        # Before Keras's check of the inputs' names: `token_ids` alone means segments of 0.
        if not isinstance(inputs, dict):
            inputs = {"token_ids": inputs}
        inputs = {name: ops.convert_to_tensor(value) for name, value in inputs.items()}
        if self.config.segment_vocab_size and "segment_ids" not in inputs:
            inputs["segment_ids"] = ops.zeros_like(inputs["token_ids"])
        return super().__call__(inputs, *args, **kwargs)

    def call(self, inputs, training=None, mask=None):
        for name, value in inputs.items():
            check_token_ids(value, name)
        return super(TransformerModel, self).call(inputs, training=training, mask=mask)

    @property
    def head(self):
        """The `MaskedLMHead` or the `SequenceClassificationHead`; None for a model without a head."""
        return self._named.get("masked_lm_head", self._named.get("classifier_head"))

    def hidden_states_model(self):
        """A Keras model of the same inputs and weights whose output is the last layer's hidden states.

        `(batch, length, d_model)`, what the head reads (the model's own
        output where it has no head): what sentence embeddings pool.
        """
        head = self.head
        if head is None:
            return self
        return keras.Model(self.inputs, head.input, name=f"{self.name}_hidden_states")

    @property
    def segment_embedding(self):
        """The segment (token type) `Embedding`, or None."""
        return self._named.get("segment_embedding")

    @property
    def embedding_norm(self):
        """The LayerNorm on the embeddings' sum, or None."""
        return self._named.get("embedding_norm")

    @property
    def _named(self):
        return {layer.name: layer for layer in self.layers}

    @property
    def max_length(self):
        return self.encoder_embedding.max_length

    @property
    def target_vocab_size(self):
        return self.source_vocab_size

    def decode(self, *args, **kwargs):
        raise ValueError("An encoder-only model has no decoder: call the model for its logits")

    def decoder_step(self, *args, **kwargs):
        raise ValueError("An encoder-only model has no decoder: it generates nothing")


_DEFAULT_OPTIONS = {
    name: parameter.default
    for name, parameter in inspect.signature(build_encoder_only).parameters.items()
    if name not in ("name", "config")
}
