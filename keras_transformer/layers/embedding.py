"""Token embedding scaled by √d_model plus the sinusoidal position signal."""

import math

import keras
from keras import ops

from keras_transformer.kinds import check_positive_int, check_rate
from keras_transformer.layers.hash_dropout import HashDropout
from keras_transformer.layers.learned_positions import LearnedPositionEmbedding
from keras_transformer.layers.positional_encoding import PositionalEncoding
from keras_transformer.layers.projections import matmul_last_axis
from keras_transformer.layers.shapes import check_sequence, static_shape


def check_id(name, value, vocab_size):
    """`value`, an id in `[0, vocab_size)`, or a `ValueError` naming `name`."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < vocab_size:
        raise ValueError(f"`{name}` must be an id in [0, vocab_size={vocab_size}). Received: {name}={value!r}")
    return value


def check_token_ids(token_ids, name="token_ids"):
    """Raises a `ValueError` unless `token_ids` is an integer `(batch, length)` tensor."""
    dtype = keras.backend.standardize_dtype(token_ids.dtype)
    if "int" not in dtype:
        raise ValueError(f"`{name}` must hold integer token ids (0 = padding). Received: dtype={dtype}")
    check_token_ids_shape(token_ids, name)


def check_token_ids_shape(value, name="token_ids"):
    """Raises a `ValueError` unless `value` (a tensor or a shape) has rank 2, `(batch, length)`.

    A shape of unknown rank passes.

    Example:

    >>> check_token_ids_shape((2, 7, 1))
    Traceback (most recent call last):
    ...
    ValueError: `token_ids` must have shape (batch, length). Received: shape=(2, 7, 1)
    """
    shape = static_shape(value)
    if shape is not None and len(shape) != 2:
        raise ValueError(f"`{name}` must have shape (batch, length). Received: shape={shape}")


def known_values(tensor):
    """`tensor`'s values as a NumPy array when they are known now (eager), else `None`.

    `None` inside a traced or compiled function (`tf.function`, XLA,
    `jax.jit`) and for symbolic `keras.Input`s: there the values only exist
    when the compiled program runs.
    """
    if isinstance(tensor, keras.KerasTensor):
        return None
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        if not tf.executing_eagerly():
            return None
    elif backend == "jax":
        import jax

        if isinstance(tensor, jax.core.Tracer):
            return None
    elif backend == "torch":
        import torch

        if torch.compiler.is_compiling():
            return None
    return ops.convert_to_numpy(tensor)


def check_token_id_range(token_ids, vocab_size, name="token_ids", layer_name=None):
    """Raises a `ValueError` if eager `token_ids` hold an id outside `[0, vocab_size)`.

    Does nothing where the values are not known yet (see `known_values`).
    Returns whether the ids were checked.
    """
    values = known_values(token_ids)
    if values is None:
        return False
    if values.size and (values.min() < 0 or values.max() >= vocab_size):
        where = f" (layer '{layer_name}')" if layer_name else ""
        raise ValueError(
            f"`{name}` must hold ids in [0, vocab_size={vocab_size}){where}. "
            f"Received: {name} with values from {values.min()} to {values.max()}"
        )
    return True


@keras.saving.register_keras_serializable(package="keras_transformer")
class TokenAndPositionEmbedding(keras.layers.Layer):
    """`dropout(embedding(ids) · √d_model + PE)`: the Transformer's input layer.

    With `mask_zero=True` (the default) the layer attaches a Keras mask that is
    `True` at real tokens and `False` at padding (id `pad_id`, 0 unless an
    imported vocabulary says otherwise); the attention layers of this package
    read it, so padding is never attended.

    Token ids must lie in `[0, vocab_size)`. Keras's lookup would read id
    `-k` as id `vocab_size - k`, and an id past the end gives a
    device-dependent error, a zero row or (XLA) the last row. Called eagerly
    (concrete ids), the layer raises a `ValueError` naming `token_ids` for
    any other id. Inside a compiled function (`model.fit`, `model.predict`,
    `tf.function`, XLA, `jax.jit`, compiled decoding) the ids are not known
    when the function is traced and XLA cannot raise, so the embedding of an
    out-of-range id is NaN instead: the outputs, logits and loss of its
    sequence come out NaN (`fit` shows `loss: nan`;
    `keras.callbacks.TerminateOnNaN` stops it), never a quietly wrong row.

    The same embedding matrix can serve as the output projection ("tied"
    embeddings, paper section 3.4): `layer(hidden, reverse=True)` returns
    logits `hidden · Eᵀ` of shape `(batch, length, vocab_size)`, plus a bias
    per token with `output_bias=True` (Marian's `final_logits_bias`), which
    keeps the tie when it is trained.

    Args:
        vocab_size: number of tokens.
        d_model: embedding width.
        max_length: longest sequence accepted.
        dropout: dropout rate on the sum.
        mask_zero: whether `pad_id` is padding and yields a Keras mask.
        embeddings_initializer: defaults to `RandomNormal(stddev=d_model**-0.5)`,
            which suits both the √d_model scaling and tied output logits.
        pad_id: the padding id (0 by this package's convention).
        scale_embeddings: multiply the embeddings by √d_model (the paper's,
            and Marian's `scale_embedding`).
        position_layout: the position table's columns, `"interleaved"` (the
            paper's), `"concatenated"` (Marian's) or `"fairseq"` (M2M100's
            and NLLB's, numbered from `pad_id + 1`), see `positional_encoding`;
            or `"learned"`, a trained table (`LearnedPositionEmbedding`: GPT's,
            BERT's and mBART's); or `"relative"`, none here: the stack's
            attention adds T5's `RelativePositionBias`.
        output_bias: a trained bias on the tied output logits (`reverse=True`).
        position_offset: the learned table's rows before position 0's (mBART's 2).
        embedding_norm: a LayerNorm on the sum, before the dropout (mBART's
            `layernorm_embedding`), of epsilon `layer_norm_epsilon`.
        separate_positions: one token embedding for both sides (a shared
            vocabulary), but a position table (and an `embedding_norm`) of
            each side's own, as mBART's: calls with `target=True` read the
            target side's.
        output_scale: multiply the hidden states by `d_model ** -0.5` before
            the tied output projection (`reverse=True`): T5's.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        inputs: integer ids `(batch, length)`, or with `reverse=True` hidden
            states `(batch, length, d_model)`.
        start_index: position of the first token (cached decoding); a
            `(batch,)` tensor gives each row its own.
        reverse: project hidden states to vocabulary logits instead.
        training: whether dropout is active.
        target: the target side's positions and norm (`separate_positions`);
            ignored by a layer without them.

    Example:

    >>> embed = TokenAndPositionEmbedding(vocab_size=100, d_model=16, max_length=10)
    >>> tuple(embed(keras.ops.convert_to_tensor([[5, 7, 0]])).shape)
    (1, 3, 16)

    References:
        Vaswani et al., "Attention Is All You Need", 2017, sections 3.4 and 3.5.
    """

    def __init__(
        self,
        vocab_size,
        d_model,
        max_length,
        dropout=0.0,
        mask_zero=True,
        embeddings_initializer=None,
        pad_id=0,
        scale_embeddings=True,
        position_layout="interleaved",
        output_bias=False,
        position_offset=0,
        embedding_norm=False,
        layer_norm_epsilon=1e-5,
        separate_positions=False,
        output_scale=False,
        **kwargs,
    ):
        vocab_size = check_positive_int("vocab_size", vocab_size)
        d_model = check_positive_int("d_model", d_model)
        max_length = check_positive_int("max_length", max_length)
        check_rate("dropout", dropout)
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.max_length = max_length
        self.dropout = dropout
        self.mask_zero = mask_zero
        self.pad_id = check_id("pad_id", pad_id, vocab_size)
        self.scale_embeddings = bool(scale_embeddings)
        self.position_layout = position_layout
        self.output_bias = bool(output_bias)
        self.position_offset, self.embedding_norm = position_offset, bool(embedding_norm)
        self.layer_norm_epsilon, self.separate_positions = layer_norm_epsilon, bool(separate_positions)
        self.output_scale = bool(output_scale)
        if embeddings_initializer is None:
            embeddings_initializer = keras.initializers.RandomNormal(stddev=d_model**-0.5)
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)
        self.supports_masking = mask_zero
        self.token_embedding = keras.layers.Embedding(
            vocab_size,
            d_model,
            embeddings_initializer=self.embeddings_initializer,
            dtype=self.dtype_policy,
            name="token_embedding",
        )
        sides = ("", "target_") if self.separate_positions else ("",)
        self.position_encodings = [self._positions(side) for side in sides]
        self.position_encoding = self.position_encodings[0]  # the source side's (the only one, unless separate)
        self.norms = [
            keras.layers.LayerNormalization(
                epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name=f"{side}embedding_norm"
            )
            for side in (sides if self.embedding_norm else ())
        ]
        self.dropout_layer = HashDropout(dropout, dtype=self.dtype_policy, name="embedding_dropout")

    def _positions(self, side):
        """The position layer of one side (`side` "" or "target_"), or None for relative positions."""
        if self.position_layout == "relative":
            return None
        if self.position_layout == "learned":
            return LearnedPositionEmbedding(
                self.max_length,
                self.d_model,
                offset=self.position_offset,
                dtype=self.dtype_policy,
                name=f"{side}position_embedding",
            )
        offset = self.pad_id + 1 if self.position_layout == "fairseq" else 0  # fairseq numbers positions after padding
        return PositionalEncoding(
            self.max_length,
            self.d_model,
            layout=self.position_layout,
            offset=offset,
            dtype=self.dtype_policy,
            name=f"{side}position_encoding",
        )

    def build(self, input_shape):
        self.token_embedding.build(input_shape)
        if self.position_layout == "learned":
            for positions in self.position_encodings:
                positions.build()
        for norm in self.norms:
            norm.build(tuple(input_shape) + (self.d_model,))
        if self.output_bias:
            self.logits_bias = self.add_weight(
                shape=(self.vocab_size,), initializer="zeros", name="logits_bias", dtype=self.variable_dtype
            )
        self.built = True

    @property
    def embeddings(self):
        """The `(vocab_size, d_model)` token embedding matrix."""
        return self.token_embedding.embeddings

    def call(self, inputs, start_index=0, reverse=False, training=None, target=False):
        if reverse:
            check_sequence(inputs, "inputs", self.d_model)
            if self.output_scale:
                inputs = inputs * ops.cast(self.d_model**-0.5, inputs.dtype)
            kernel = ops.cast(self._embedding_matrix(), inputs.dtype)
            logits = matmul_last_axis(inputs, ops.transpose(kernel))  # (batch, length, vocab)
            if self.output_bias:
                logits = logits + ops.cast(self.logits_bias, logits.dtype)
            return logits
        check_token_ids(inputs, "token_ids")
        length = inputs.shape[1]
        if isinstance(start_index, int) and isinstance(length, int):
            if start_index + length > self.max_length:
                raise ValueError(
                    f"The sequence is longer than `max_length`={self.max_length}. "
                    f"Received: length={length + start_index}"
                )
        embedded = self._lookup(inputs)
        if self.scale_embeddings:
            embedded = embedded * ops.cast(math.sqrt(self.d_model), self.compute_dtype)
        real = None
        if self.position_layout == "fairseq" and self.mask_zero:  # fairseq numbers real tokens only
            real = ops.not_equal(inputs, self.pad_id)
        side = 1 if target and self.separate_positions else 0
        if self.position_encodings[side] is not None:
            embedded = self.position_encodings[side](embedded, start_index=start_index, real=real)
        if self.norms:
            embedded = self.norms[side](embedded)
        return self.dropout_layer(embedded, training=training)

    def _embedding_matrix(self):
        """The float embedding matrix; of a quantized embedding (`model.quantize`), its dequantized rows."""
        if getattr(self.token_embedding, "quantization_mode", None):
            return self.token_embedding(ops.arange(self.vocab_size))
        return self.embeddings

    def _lookup(self, token_ids):
        """The embedding rows of `token_ids`: checked when eager, NaN for bad ids when compiled."""
        if check_token_id_range(token_ids, self.vocab_size, "token_ids", self.name):
            return self.token_embedding(token_ids)
        # Compiled: look up clipped ids (no device-dependent out-of-range
        # gather), then replace the rows of the out-of-range ones with NaN.
        in_range = ops.logical_and(
            ops.greater_equal(token_ids, 0), ops.less(token_ids, self.vocab_size)
        )  # (batch, length)
        rows = self.token_embedding(ops.clip(token_ids, 0, self.vocab_size - 1))
        nan = ops.convert_to_tensor(float("nan"), dtype=rows.dtype)
        return ops.where(in_range[..., None], rows, nan)

    def compute_mask(self, inputs, mask=None):
        if not self.mask_zero or len(inputs.shape) != 2:
            return None
        return ops.not_equal(inputs, self.pad_id)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocab_size": self.vocab_size,
                "d_model": self.d_model,
                "max_length": self.max_length,
                "dropout": self.dropout,
                "mask_zero": self.mask_zero,
                "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer),
                "pad_id": self.pad_id,
                "scale_embeddings": self.scale_embeddings,
                "position_layout": self.position_layout,
                "output_bias": self.output_bias,
            }
        )
        # Written where not the default, so that the configs of earlier files read alike.
        if self.position_offset:
            config["position_offset"] = self.position_offset
        if self.embedding_norm:
            config.update(embedding_norm=True, layer_norm_epsilon=self.layer_norm_epsilon)
        if self.separate_positions:
            config["separate_positions"] = True
        if self.output_scale:
            config["output_scale"] = True
        return config
