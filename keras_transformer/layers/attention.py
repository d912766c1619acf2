"""Scaled dot-product attention and multi-head attention with a decoding cache."""

import math

import keras
from keras import ops

from keras_transformer.kinds import check_positive_int, check_rate
from keras_transformer.layers.blockwise_attention import blockwise_attention
from keras_transformer.layers.hash_dropout import HashDropout
from keras_transformer.layers.masks import causal_mask, check_mask, check_mask_shape, large_negative, merge_masks
from keras_transformer.layers.projections import is_plain_dense, matmul_last_axis
from keras_transformer.layers.shapes import check_sequence, fits, static_shape
from keras_transformer.layers.token_sums import add_bias


def scaled_dot_product_attention(query, key, value, mask=None):
    """`softmax(Q Kᵀ / √d_k) V`, the attention of the paper's equation (1).

    Args:
        query: tensor of shape `(..., q_len, d_k)`.
        key: tensor of shape `(..., k_len, d_k)`.
        value: tensor of shape `(..., k_len, d_v)`.
        mask: optional boolean tensor broadcastable to `(..., q_len, k_len)`:
            `True` where a query may attend a key, `False` where it may not.
            A blocked key gets exactly zero weight; a query whose keys are all
            blocked gets all-zero weights and a zero output (never NaN).
            A float or int mask is a `ValueError`: convert the TensorFlow
            tutorial's additive mask (1 = blocked) with `keras.ops.equal(mask, 0)`;
            so is one whose static shape does not broadcast.

    Returns:
        `(output, attention_weights)` of shapes `(..., q_len, d_v)` and
        `(..., q_len, k_len)`.

    Example:

    >>> k = [[10., 0, 0], [0, 10, 0], [0, 0, 10], [0, 0, 10]]
    >>> v = [[1., 0], [10, 0], [100, 5], [1000, 6]]
    >>> output, weights = scaled_dot_product_attention([[0., 10, 0]], k, v)
    >>> ops.convert_to_numpy(output).round(3)
    array([[10.,  0.]], dtype=float32)
    """
    mask = check_mask(mask, "mask")
    query = ops.convert_to_tensor(query)
    key = ops.convert_to_tensor(key, dtype=query.dtype)
    value = ops.convert_to_tensor(value, dtype=query.dtype)
    depth = query.shape[-1]
    scores = ops.matmul(query, ops.swapaxes(key, -1, -2)) / math.sqrt(depth)
    _check_broadcasts(mask, scores)
    weights = masked_softmax(scores, mask)
    return ops.matmul(weights, value), weights


def _check_broadcasts(mask, scores):
    """A `mask` whose static shape does not broadcast to `scores`' `(..., q_len, k_len)` is a `ValueError`."""
    shape, expected = static_shape(mask), static_shape(scores)
    if mask is None or shape is None or expected is None:
        return
    if len(shape) > len(expected) or not fits(shape, expected):
        raise ValueError(
            f"`mask` must broadcast to the scores' shape (..., q_len, k_len)={expected}. Received: mask.shape={shape}"
        )


def _heads_first(projected):
    """`(batch, length, heads, key_dim)` -> the cache layout `(batch, heads, length, key_dim)`."""
    return ops.transpose(projected, (0, 2, 1, 3))


def masked_softmax(scores, mask=None):
    """Softmax over the last axis, in float32, that gives blocked keys zero weight.

    `mask` is boolean, `True` = may attend (a float or int mask is a
    `ValueError`, see `check_mask`). Rows with no allowed key come out as all
    zeros rather than NaN or a uniform distribution over padding.
    """
    dtype = scores.dtype
    scores = ops.cast(scores, "float32")
    if mask is None:
        return ops.cast(_softmax(scores), dtype)
    mask = check_mask(mask, "mask")
    scores = ops.where(mask, scores, large_negative("float32"))
    weights = ops.where(mask, _softmax(scores), 0.0)
    return ops.cast(weights, dtype)


def _softmax(scores):
    if scores.shape[-1] == 1:
        # One key (a one-token source, a first decoding step) gets weight 1;
        # `ops.softmax` would warn that a softmax over one value is a mistake.
        return ops.exp(scores - scores)  # 1, or NaN where the score is
    return ops.softmax(scores, axis=-1)


@keras.saving.register_keras_serializable(package="keras_transformer")
class MultiHeadAttention(keras.layers.Layer):
    """Multi-head attention (paper section 3.2.2) with a key/value decoding cache.

    Projects query, key and value to `num_heads` heads of size
    `key_dim = d_model // num_heads`, attends in each head, and projects the
    concatenated heads back to `d_model`. The weights have the same shapes and
    order as `keras.layers.MultiHeadAttention(num_heads, key_dim)`, so weights
    move between the two with `set_weights`.

    Masks are boolean and `True` where attention is **allowed**. `attention_mask`
    has shape `(batch, q_len, k_len)` (or broadcasts to it, e.g.
    `(batch, 1, k_len)` for key padding). Implicit Keras masks on `query` and
    `value` (from an embedding with `mask_zero=True`) are honoured: padded keys
    are never attended. `use_causal_mask=True` adds the look-ahead mask; it
    needs as many queries as keys (query `i` attends keys `0..i`), or a cache
    with `cache_update_index`. A float or int mask is a `ValueError` rather
    than a silent cast: the TensorFlow tutorial's additive masks (1 = blocked)
    mean the opposite, convert one with `keras.ops.equal(mask, 0)`. A mask
    or an input whose static shape does not fit is a `ValueError` naming it.

    For incremental decoding pass `cache`, a pair `(keys, values)` of projected
    keys and values, each of shape `(batch, num_heads, max_len, key_dim)`
    (two tensors, heads before positions: each step attends them where they
    are, without copying or transposing the cache):
    - with `cache_update_index=i`, the keys/values of the current `query` steps
      are written at position `i` and the query attends the cache; with
      `use_causal_mask=True` it sees positions `<= i` only;
    - without `cache_update_index`, the cache is used as it is (the encoder's
      keys/values in cross-attention, see `compute_cache`).
    The call then also returns the updated cache.

    Args:
        d_model: model width; must be divisible by `num_heads`.
        num_heads: number of attention heads.
        dropout: dropout rate on the attention weights.
        use_bias: whether the projections have biases.
        kernel_initializer: initializer of the projection kernels.
        key_block_size: `None` (the default) computes the attention weights
            `(batch, heads, q_len, k_len)` at once; an int computes attention
            over blocks of that many keys with the online softmax
            (`blockwise_attention`), so that training memory grows linearly
            with the length instead of quadratically. Equal outputs and
            gradients up to rounding; it needs `dropout=0` and is used without
            a cache and when no scores are returned (otherwise the weights are
            computed at once).
        key_dim: the width of each head; None (the default): `d_model //
            num_heads`, which `num_heads` must then divide (T5's `d_kv` may
            make the heads together narrower or wider than `d_model`).
        scale_attention: divide the scores by `√key_dim` (the paper's); T5
            does not (its initialization accounts for it).
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        query: `(batch, q_len, d_model)`.
        value: `(batch, k_len, d_model)`.
        key: optional `(batch, k_len, d_model)`; defaults to `value`.
        attention_mask: optional boolean mask, `True` = may attend.
        use_causal_mask: whether to add the look-ahead mask. Without a
            `cache_update_index`, query and key lengths must be equal (a
            `ValueError` when both are known and differ).
        return_attention_scores: also return the weights
            `(batch, num_heads, q_len, k_len)`.
        training: whether dropout is active.
        cache: optional key/value cache (see above).
        cache_update_index: where to write the current step into `cache`.
        attention_bias: optional float tensor added to the scores, broadcast
            to `(batch, num_heads, q_len, k_len)`: T5's relative position bias
            (`RelativePositionBias`), `(1, num_heads, q_len, k_len)`.

    Returns:
        `output`, then `attention_scores` if requested, then the cache if given.

    Example:

    >>> mha = MultiHeadAttention(d_model=64, num_heads=8)
    >>> x = keras.ops.ones((2, 5, 64))
    >>> tuple(mha(x, x, use_causal_mask=True).shape)
    (2, 5, 64)

    References:
        Vaswani et al., "Attention Is All You Need", 2017, section 3.2.
    """

    def __init__(
        self,
        d_model,
        num_heads,
        dropout=0.0,
        use_bias=True,
        kernel_initializer="glorot_uniform",
        key_block_size=None,
        key_dim=None,
        scale_attention=True,
        **kwargs,
    ):
        d_model = check_positive_int("d_model", d_model)
        num_heads = check_positive_int("num_heads", num_heads)
        key_dim = None if key_dim is None else check_positive_int("key_dim", key_dim)
        check_rate("dropout", dropout)
        if key_block_size is not None:
            key_block_size = check_positive_int("key_block_size", key_block_size)
            if dropout:
                raise ValueError(
                    "`key_block_size` needs `dropout=0` (dropout on the attention weights is not computed in "
                    f"blocks). Received: key_block_size={key_block_size}, dropout={dropout}"
                )
        super().__init__(**kwargs)
        if key_dim is None and d_model % num_heads:
            raise ValueError(
                f"`d_model` must be divisible by `num_heads`. Received: d_model={d_model}, num_heads={num_heads}"
            )
        self.d_model = d_model
        self.num_heads = num_heads
        self.key_dim = d_model // num_heads if key_dim is None else key_dim
        self._given_key_dim = key_dim
        self.scale_attention = bool(scale_attention)
        self.dropout = dropout
        self.use_bias = use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.key_block_size = key_block_size
        self.supports_masking = True

        def projection(name, equation, output_shape, bias_axes):
            dense = keras.layers.EinsumDense(
                equation,
                output_shape=output_shape,
                bias_axes=bias_axes if use_bias else None,
                kernel_initializer=keras.initializers.get(keras.initializers.serialize(self.kernel_initializer)),
                dtype=self.dtype_policy,
                name=name,
            )
            dense.supports_masking = True  # masks are read in `call`, not dropped
            return dense

        heads = (None, num_heads, self.key_dim)
        self.query_dense = projection("query", "btd,dhk->bthk", heads, "hk")
        self.key_dense = projection("key", "btd,dhk->bthk", heads, "hk")
        self.value_dense = projection("value", "btd,dhk->bthk", heads, "hk")
        self.output_dense = projection("attention_output", "bthk,hkd->btd", (None, d_model), "d")
        self.dropout_layer = HashDropout(dropout, dtype=self.dtype_policy, name="attention_dropout")

    def build(self, query_shape, value_shape=None, key_shape=None):
        value_shape = query_shape if value_shape is None else value_shape
        key_shape = value_shape if key_shape is None else key_shape
        for name, shape in (("query", query_shape), ("value", value_shape), ("key", key_shape)):
            check_sequence(shape, name)
            if shape[-1] is not None and shape[-1] != self.d_model:
                raise ValueError(
                    f"The last axis of `{name}` must equal d_model={self.d_model}. "
                    f"Received: {name}.shape={tuple(shape)}"
                )
        self.query_dense.build(query_shape)
        self.key_dense.build(key_shape)
        self.value_dense.build(value_shape)
        self.output_dense.build(tuple(query_shape[:-1]) + (self.num_heads, self.key_dim))
        self.built = True

    def compute_cache(self, value, key=None):
        """Projects `value`/`key` once: the cache of a cross-attention layer.

        Returns `(keys, values)`, each of shape `(batch, num_heads, k_len, key_dim)`.
        """
        return tuple(_heads_first(x) for x in self._project_keys_and_values(value, key))

    def _project(self, inputs, dense, training=False):
        """`dense(inputs)`: `(batch, length, d_model)` -> `(batch, length, heads, key_dim)`.

        The kernel keeps `keras.layers.MultiHeadAttention`'s `(d_model, heads,
        key_dim)` layout (so weights move between the two) but is applied as
        a `(d_model, heads * key_dim)` matrix in one 2-D matmul. Its gradient
        is then one `(d_model, tokens) x (tokens, heads * key_dim)` matmul; the
        gradient of `einsum("btd,dhk->bthk")` is a batch of per-sequence
        products summed afterwards, several times slower on CPU.
        """
        if not is_plain_dense(dense):
            return dense(inputs)
        width = self.num_heads * self.key_dim
        kernel = ops.reshape(dense.kernel, (self.d_model, width))
        projected = matmul_last_axis(inputs, ops.cast(kernel, inputs.dtype))  # (batch, length, width)
        if self.use_bias:
            bias = ops.cast(ops.reshape(dense.bias, (width,)), projected.dtype)
            projected = add_bias(projected, bias, training)
        return ops.reshape(projected, tuple(ops.shape(inputs)[:-1]) + (self.num_heads, self.key_dim))

    def _project_keys_and_values(self, value, key=None, training=False):
        key = value if key is None else key
        return self._project(key, self.key_dense, training), self._project(value, self.value_dense, training)

    def _output_projection(self, context, training=False):
        """`(batch, q_len, heads, key_dim)` -> `(batch, q_len, d_model)` as one 2-D matmul."""
        dense = self.output_dense
        if not is_plain_dense(dense):
            return dense(context)
        width = self.num_heads * self.key_dim
        flat = ops.reshape(context, tuple(ops.shape(context)[:-2]) + (width,))
        kernel = ops.reshape(dense.kernel, (width, self.d_model))
        output = matmul_last_axis(flat, ops.cast(kernel, flat.dtype))
        if self.use_bias:
            output = add_bias(output, ops.cast(dense.bias, output.dtype), training)
        return output

    def call(
        self,
        query,
        value,
        key=None,
        attention_mask=None,
        use_causal_mask=False,
        return_attention_scores=False,
        training=None,
        cache=None,
        cache_update_index=None,
        query_mask=None,
        value_mask=None,
        key_mask=None,
        attention_bias=None,
    ):
        attention_mask = check_mask(attention_mask, "attention_mask")
        query_mask = check_mask(query_mask, "query_mask")  # queries are never masked
        value_mask = check_mask(value_mask, "value_mask")
        key_mask = check_mask(key_mask, "key_mask")
        key = value if key is None else key
        for name, sequence in (("query", query), ("value", value), ("key", key)):
            if sequence is not None:  # None: a cross-attention cache stands for the keys and values
                check_sequence(sequence, name)
        q = self._project(query, self.query_dense, training)  # (batch, q_len, heads, key_dim)
        k, v, cache, key_axes = self._keys_and_values(value, key, cache, cache_update_index, training)

        length_axis = key_axes.index("s")
        k_len = k.shape[length_axis] if k.shape[length_axis] is not None else ops.shape(k)[length_axis]
        blockwise = self.key_block_size is not None and cache is None and not return_attention_scores
        mask = self._attention_mask(
            query,
            k_len,
            attention_mask,
            use_causal_mask and not blockwise,  # the blocks build their own causal mask
            cache_update_index,
            key_mask if key_mask is not None else value_mask,
            "key_mask" if key_mask is not None else "value_mask",
        )
        if blockwise:
            if use_causal_mask:
                self._check_causal_lengths(query.shape[1], k_len)
            context = blockwise_attention(
                _heads_first(q),
                _heads_first(k),
                _heads_first(v),
                None if mask is None else mask[:, None],
                causal=use_causal_mask,
                block_size=self.key_block_size,
                scale=self.scale_attention,
                bias=attention_bias,
            )  # (batch, heads, q_len, key_dim)
            return self._output_projection(ops.transpose(context, (0, 2, 1, 3)), training)
        if self.scale_attention:
            q = q * ops.cast(1.0 / math.sqrt(self.key_dim), q.dtype)
        scores = ops.einsum(f"bqhk,{key_axes}->bhqs", q, k)  # (batch, heads, q_len, k_len)
        if attention_bias is not None:
            scores = scores + ops.cast(attention_bias, scores.dtype)
        weights = masked_softmax(scores, None if mask is None else mask[:, None])
        dropped = self.dropout_layer(weights, training=training)
        context = ops.einsum(f"bhqs,{key_axes}->bqhk", dropped, v)
        output = self._output_projection(context, training)

        outputs = (output,)
        if return_attention_scores:
            outputs += (weights,)
        if cache is not None:
            outputs += (cache,)
        return outputs[0] if len(outputs) == 1 else outputs

    def _keys_and_values(self, value, key, cache, cache_update_index, training):
        """`(keys, values, cache, their axes)`: projected, or the cache's with this step's written in."""
        if cache is None:
            k, v = self._project_keys_and_values(value, key, training)  # (batch, k_len, heads, key_dim)
            return k, v, None, "bshk"
        if not isinstance(cache, (tuple, list)) or len(cache) != 2:
            raise ValueError(
                "`cache` must be a pair (keys, values), each of shape (batch, num_heads, "
                f"length, key_dim). Received: cache of type {type(cache).__name__}"
            )
        k, v = cache  # (batch, heads, k_len, key_dim)
        if cache_update_index is not None:
            start = (0, 0, cache_update_index, 0)
            k, v = (
                ops.slice_update(old, start, ops.cast(_heads_first(new), old.dtype))
                for old, new in zip((k, v), self._project_keys_and_values(value, key, training))
            )
            cache = (k, v)
        return k, v, cache, "bhsk"

    def _attention_mask(
        self, query, k_len, attention_mask, use_causal_mask, cache_update_index, key_padding, key_padding_name
    ):
        """Merges explicit, implicit (Keras) and causal masks to (batch, q, k)."""
        batch, q_len = query.shape[0], query.shape[1]
        if attention_mask is not None:
            attention_mask = ops.convert_to_tensor(attention_mask)
            check_mask_shape(
                attention_mask, "attention_mask", ("batch", "q_len", "k_len"), (batch, q_len, k_len), ranks=(2, 3)
            )
            if len(attention_mask.shape) == 2:
                attention_mask = attention_mask[None]
        if key_padding is not None:
            check_mask_shape(key_padding, key_padding_name, ("batch", "k_len"), (batch, k_len))
            key_padding = ops.expand_dims(key_padding, 1)
        causal = None
        if use_causal_mask:
            q_len = ops.shape(query)[1] if q_len is None else q_len
            if cache_update_index is None:
                self._check_causal_lengths(q_len, k_len)
                causal = causal_mask(q_len)
            else:
                query_positions = ops.arange(q_len)[:, None] + cache_update_index
                causal = ops.greater_equal(query_positions, ops.arange(k_len)[None])
            causal = causal[None]
        return merge_masks(attention_mask, key_padding, causal)

    @staticmethod
    def _check_causal_lengths(q_len, k_len):
        """Without a cache index, the look-ahead mask is square: query `i` attends keys `0..i`."""
        if isinstance(q_len, int) and isinstance(k_len, int) and q_len != k_len:
            raise ValueError(
                "`use_causal_mask=True` needs as many queries as keys (query i attends "
                "keys 0..i); for one step of cached decoding pass `cache` with "
                "`cache_update_index`, for any other pattern a boolean `attention_mask`. "
                f"Received: q_len={q_len}, k_len={k_len}"
            )

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "d_model": self.d_model,
                "num_heads": self.num_heads,
                "dropout": self.dropout,
                "use_bias": self.use_bias,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "key_block_size": self.key_block_size,
            }
        )
        if self._given_key_dim is not None:  # written where given, so that earlier files' configs read alike
            config["key_dim"] = self._given_key_dim
        if not self.scale_attention:
            config["scale_attention"] = False
        return config
