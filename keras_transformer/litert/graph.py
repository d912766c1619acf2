"""The TensorFlow functions that a LiteRT export converts: encode, the cached decoder step, (de)tokenize.

`StepModule(model, cache_length, banned_ids, softmax_over)` holds a model
from `build_transformer` and gives, as `tf.function`s with fixed input
signatures (`SIGNATURES`):

- `encode(source_ids (rows, S) int32)` -> `cross_cache (rows, 2 * layers,
  heads, S, key_dim)`: each decoder layer's cross-attention keys and values
  (keys of layer `i` at `2 * i`, values at `2 * i + 1`), computed once per
  source;
- `decode_step(tokens (rows,), index (), source_ids, cross_cache,
  self_cache (rows, 2 * layers, heads, cache_length, key_dim))` ->
  `log_probs (rows, target_vocab)` float32 and the `self_cache` with the
  keys and values of position `index` written in: one token per row through
  the decoder layers (`DecoderLayer` with its self-attention cache), the
  banned ids (START, padding, the run's `banned_ids`) at `-inf`;
- `tokenize(strings (batch,))` -> `ids (n,)`, `row_splits (batch + 1,)`,
  tensorflow-text's `FastSentencepieceTokenizer`, when a source tokenizer is given;
- `detokenize(ids (n,))` -> `strings (1,)`: ONE sentence's target ids (the
  reserved ids 0-3 dropped), when a target tokenizer is given. One sentence
  per call because tensorflow-text 2.21.1's LiteRT kernel of
  `FastSentencepieceDetokenize` writes its strings without resizing its
  output, which keeps the converter's placeholder shape `(1,)`: for two
  sentences or more, reading the output overruns (a segmentation fault in
  `ai-edge-litert` 2.3.0), for one it is exact (`docs/litert.md`).

It is built on the model's parts (`encoder_embedding`, `encoder_layers`,
`decoder_layers`, `logits`, ...) rather than on `model.decoder_step`: the
embedding's range check inside compiled functions needs a `StridedSlice`
with a new axis on booleans, which LiteRT has no builtin kernel for.

Example:

>>> module = StepModule(model, cache_length=32)
>>> cross = module.encode(tf.constant([[5, 6, 7, 3]]))["cross_cache"]
>>> self_cache = tf.zeros(module.self_cache_shape(1))
>>> out = module.decode_step(tf.constant([2]), tf.constant(0), tf.constant([[5, 6, 7, 3]]), cross, self_cache)
>>> out["log_probs"].shape[-1] == model.target_vocab_size
True
"""

import math

import numpy as np
import tensorflow as tf

SIGNATURES = ("encode", "decode_step", "tokenize", "detokenize")
_TOKENIZE_SPECS = [tf.TensorSpec([None], tf.string, name="strings")]
_DETOKENIZE_SPECS = [tf.TensorSpec([None], tf.int32, name="ids")]
NUM_RESERVED_IDS = 4  # this package's pad, unk, START, END: dropped by its detokenizer


def embed(embedding, token_ids, start_index=0):
    """`TokenAndPositionEmbedding`'s forward pass (no dropout, no range check): rows, scale, positions."""
    x = embedding.token_embedding(token_ids)
    if embedding.scale_embeddings:
        x = x * tf.cast(math.sqrt(embedding.d_model), x.dtype)
    return embedding.position_encoding(x, start_index=start_index)


class StepModule(tf.Module):
    """The encoder, the cached decoder step and the tokenizers of one model, as LiteRT-convertible functions.

    Args:
        model: a `TransformerModel` from `build_transformer` (one model).
        cache_length: positions of the self-attention cache (the longest output).
        banned_ids: target ids never generated (their log-probabilities are `-inf`).
        softmax_over: `"allowed"` (log-softmax over the other ids) or
            `"vocabulary"` (over every id, the banned ones then removed).
        source_proto: the source SentencePiece model proto of the `tokenize`
            function, or None (no `tokenize`).
        target_proto: the target SentencePiece model proto of the
            `detokenize` function, or None (no `detokenize`).
    """

    def __init__(
        self, model, cache_length, banned_ids=(), softmax_over="allowed", source_proto=None, target_proto=None
    ):
        super().__init__(name="litert_translator")
        self._held = _Untracked(model)
        # The tf.Variables themselves, not the Keras model: the LiteRT converter freezes
        # these into constants, where it keeps a Keras model's as VAR_HANDLE ops it cannot run.
        self._tf_variables = [variable.value for variable in model.variables]
        self.cache_length = int(cache_length)
        layer = model.decoder_layers[0]
        self.layers, self.heads = len(model.decoder_layers), layer.num_heads
        self.key_dim = layer.d_model // layer.num_heads
        banned = np.zeros(model.target_vocab_size, bool)
        banned[list(banned_ids)] = True
        self._banned = tf.constant(banned)
        self._softmax_over = softmax_over
        if source_proto is not None:
            import tensorflow_text as tf_text

            self._source = tf_text.FastSentencepieceTokenizer(source_proto)
            self.tokenize = tf.function(self._tokenize, input_signature=_TOKENIZE_SPECS, autograph=False)
        if target_proto is not None:
            import tensorflow_text as tf_text

            self._target = tf_text.FastSentencepieceTokenizer(target_proto)
            self.detokenize = tf.function(self._detokenize, input_signature=_DETOKENIZE_SPECS, autograph=False)
        self.decode_step = tf.function(self._decode_step, input_signature=self._step_specs(), autograph=False)

    def self_cache_shape(self, rows):
        """The shape of `decode_step`'s `self_cache` for `rows` rows."""
        return (rows, 2 * self.layers, self.heads, self.cache_length, self.key_dim)

    def signatures(self):
        """`{name: concrete function}` of the functions this module converts (`tokenize`, `detokenize` if any)."""
        functions = {"encode": self.encode, "decode_step": self.decode_step}
        for name in ("tokenize", "detokenize"):
            if hasattr(self, name):
                functions[name] = getattr(self, name)
        return {name: function.get_concrete_function() for name, function in functions.items()}

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32, name="source_ids")], autograph=False)
    def encode(self, source_ids):
        model = self._held.model
        mask = tf.not_equal(source_ids, model.config.pad_id)
        x = embed(model.encoder_embedding, source_ids)
        for layer in model.encoder_layers:
            x = layer(x, padding_mask=mask, training=False)
        if model.encoder_norm is not None:
            x = model.encoder_norm(x)
        caches = model.cross_attention_caches(x)
        return {"cross_cache": tf.stack([part for cache in caches for part in cache], axis=1)}

    def _decode_step(self, tokens, index, source_ids, cross_cache, self_cache):
        model = self._held.model
        mask = tf.not_equal(source_ids, model.config.pad_id)
        x = embed(model.decoder_embedding, tokens[:, None], start_index=index)  # (rows, 1, d_model)
        cross, own = tf.unstack(cross_cache, axis=1), tf.unstack(self_cache, axis=1)
        written = []
        for i, layer in enumerate(model.decoder_layers):
            x, cache, _ = layer(
                x,
                encoder_padding_mask=mask,
                self_attention_cache=(own[2 * i], own[2 * i + 1]),
                self_attention_cache_update_index=index,
                cross_attention_cache=(cross[2 * i], cross[2 * i + 1]),
                training=False,
            )
            written.extend(cache)
        logits = tf.cast(model.logits(x)[:, 0], tf.float32)
        return {"log_probs": self._log_probs(logits), "self_cache": tf.stack(written, axis=1)}

    def _log_probs(self, logits):
        minus_inf = tf.constant(-math.inf, tf.float32)
        if self._softmax_over == "vocabulary":
            return tf.where(self._banned[None], minus_inf, tf.nn.log_softmax(logits))
        return tf.nn.log_softmax(tf.where(self._banned[None], minus_inf, logits))

    def _tokenize(self, strings):
        ids = self._source.tokenize(strings)
        return {"ids": tf.cast(ids.flat_values, tf.int32), "row_splits": tf.cast(ids.row_splits, tf.int32)}

    def _detokenize(self, ids):
        ids = tf.boolean_mask(ids, ids >= NUM_RESERVED_IDS)
        one_row = tf.RaggedTensor.from_row_splits(ids, tf.stack([0, tf.size(ids)]), validate=False)
        return {"strings": self._target.detokenize(one_row)}

    def _step_specs(self):
        return [
            tf.TensorSpec([None], tf.int32, name="tokens"),
            tf.TensorSpec([], tf.int32, name="index"),
            tf.TensorSpec([None, None], tf.int32, name="source_ids"),
            tf.TensorSpec([None, 2 * self.layers, self.heads, None, self.key_dim], tf.float32, name="cross_cache"),
            tf.TensorSpec(self.self_cache_shape(None), tf.float32, name="self_cache"),
        ]


class _Untracked:
    """Holds a model where `tf.Module` does not track it (see `StepModule.__init__`)."""

    def __init__(self, model):
        self.model = model
