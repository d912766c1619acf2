"""Attention computed one key block at a time (the online softmax): memory linear in the key length."""

import keras
from keras import ops

from keras_transformer.layers.masks import check_mask, large_negative


def blockwise_attention(query, key, value, mask=None, causal=False, block_size=256, scale=True, bias=None):
    """`softmax(Q Kᵀ / √d_k + bias) V` over blocks of `block_size` keys, never holding the `(q_len, k_len)` scores.

    The online softmax (Milakov & Gimelshein 2018; FlashAttention, Dao et
    al. 2022): a running row maximum and a running sum rescale each block's
    exponentials, so the result equals plain attention up to rounding. The
    gradient is written by hand: the backward pass recomputes each block's
    weights from the saved log-sum-exp instead of keeping them, so training
    memory too grows linearly with the key length (a plain softmax keeps
    `batch * heads * q_len * k_len` weights for the backward pass). Both
    passes are one `keras.ops.fori_loop` over the blocks (a while loop: static
    shapes, XLA-friendly). Computed in float32; a key length that is not a
    multiple of `block_size` is padded with blocked keys.

    Args:
        query: `(batch, heads, q_len, d_k)`.
        key: `(batch, heads, k_len, d_k)`.
        value: `(batch, heads, k_len, d_v)`.
        mask: optional boolean tensor broadcastable to `(batch, heads, q_len,
            k_len)` (rank 4): `True` where a query may attend a key, `False`
            where it may not (the Keras meaning; a float or int mask is a
            `ValueError`). A key-padding mask `(batch, 1, 1, k_len)` stays
            small; a full one is read block by block.
        causal: also block key `j > i` for query `i` (built per block, never
            as a `(q_len, k_len)` matrix).
        block_size: keys per block (one block of all the keys when there are fewer).
        scale: divide the scores by `√d_k` (T5's attention does not).
        bias: optional float tensor of rank 4 broadcast to the scores
            `(batch, heads, q_len, k_len)`, e.g. T5's relative position bias
            `(1, heads, q_len, k_len)`: read a block at a time, its gradient
            written a block at a time too.

    Returns:
        `(batch, heads, q_len, d_v)`, in `query`'s dtype. A query whose keys
        are all blocked gets a zero output (never NaN), as in
        `scaled_dot_product_attention`.

    Example:

    >>> k = [[[[10., 0, 0], [0, 10, 0], [0, 0, 10], [0, 0, 10]]]]
    >>> v = [[[[1., 0], [10, 0], [100, 5], [1000, 6]]]]
    >>> q = ops.convert_to_tensor([[[[0., 0, 10]]]])
    >>> ops.convert_to_numpy(blockwise_attention(q, k, v, block_size=3)).round(2)
    array([[[[550. ,   5.5]]]], dtype=float32)

    References:
        Dao et al., "FlashAttention: Fast and Memory-Efficient Exact Attention
        with IO-Awareness", 2022, algorithms 1 and 2.
    """
    mask = check_mask(mask, "mask")
    query = ops.convert_to_tensor(query)
    dtype = query.dtype
    q = ops.cast(query, "float32")
    if scale:
        q = q * (1.0 / float(query.shape[-1]) ** 0.5)
    k, v = (ops.cast(x, "float32") for x in (key, value))
    k_len = k.shape[2] if k.shape[2] is not None else ops.shape(k)[2]
    if isinstance(k_len, int):
        block_size = min(block_size, k_len)  # fewer keys than a block: one block, no padding
    blocks = _Blocks(k_len, block_size, ops.shape(q)[2], mask, causal)
    if bias is None:
        return ops.cast(_attend(blocks, q, blocks.split(k), blocks.split(v)), dtype)
    if len(bias.shape) != 4:
        raise ValueError(f"`bias` must have rank 4 (batch, heads, q_len, k_len). Received: bias.shape={bias.shape}")
    bias = blocks.split(ops.cast(bias, "float32"), keys_last=True)
    return ops.cast(_attend(blocks, q, blocks.split(k), blocks.split(v), bias), dtype)


class _Blocks:
    """The key axis cut into `count` blocks of `size`, and which keys each query may attend in one."""

    def __init__(self, k_len, size, q_len, mask, causal):
        self.k_len, self.size, self.causal = k_len, size, causal
        self.count = -(-k_len // size)  # ceil, an int or a traced scalar
        self.padding = self.count * size - k_len
        self.query_positions = ops.arange(q_len)[:, None]  # (q_len, 1)
        self.mask = self.mask_blocks = None  # the same for every block (one key), or cut like the keys
        if mask is not None and len(mask.shape) != 4:
            raise ValueError(f"`mask` must have rank 4 (batch, heads, q_len, k_len). Received: mask.shape={mask.shape}")
        if mask is not None and mask.shape[-1] == 1:
            self.mask = mask
        elif mask is not None:
            self.mask_blocks = self.split(mask)

    def split(self, x, keys_last=False):
        """`(..., k_len, d)`, or a mask or bias `(..., k_len)` (`keys_last`) -> `(count, ..., size[, d])`, the key
        axis padded."""
        is_mask = keras.backend.standardize_dtype(x.dtype) == "bool"
        keys_last = keys_last or is_mask
        axis = len(x.shape) - (1 if keys_last else 2)
        widths = [[0, 0]] * axis + [[0, self.padding]] + ([] if keys_last else [[0, 0]])
        x = ops.pad(x, widths, constant_values=False if is_mask else 0.0)
        shape = ops.shape(x)
        x = ops.reshape(x, (*shape[:axis], self.count, self.size, *shape[axis + 1 :]))
        return ops.moveaxis(x, axis, 0)

    def allowed(self, index, mask_block):
        """`(batch or 1, heads or 1, q_len, size)`: which keys of block `index` each query may attend."""
        positions = index * self.size + ops.arange(self.size)[None]  # (1, size)
        allowed = ops.less(positions, self.k_len)  # not padding
        if self.causal:
            allowed = ops.logical_and(allowed, ops.less_equal(positions, self.query_positions))
        allowed = ops.broadcast_to(allowed, (ops.shape(self.query_positions)[0], self.size))[None, None]
        for given in (self.mask, mask_block):
            if given is not None:
                allowed = ops.logical_and(allowed, given)
        return allowed

    def read(self, index, k, v):
        """Block `index` of `k`, `v` `(count, batch, heads, size, d)` and of the mask (`None` if not cut)."""
        tensors = (k, v) + (() if self.mask_blocks is None else (self.mask_blocks,))
        k_block, v_block, *mask_block = (ops.take(x, index, axis=0) for x in tensors)
        return k_block, v_block, mask_block[0] if mask_block else None


def _attend(blocks, q, k, v, bias=None):
    """The online softmax over `k`, `v` `(count, batch, heads, size, d)` (and the blocks of `bias`), its
    gradient written by hand."""

    if bias is None:

        @keras.ops.custom_gradient
        def attend(q, k, v):
            output, log_sum = _forward(blocks, q, k, v)

            def grad(*args, upstream=None):
                upstream = args[0] if upstream is None else upstream
                return _backward(blocks, q, k, v, output, log_sum, upstream)[:3]

            return output, grad

        return attend(q, k, v)

    @keras.ops.custom_gradient
    def attend_with_bias(q, k, v, bias):
        output, log_sum = _forward(blocks, q, k, v, bias)

        def grad(*args, upstream=None):
            upstream = args[0] if upstream is None else upstream
            return _backward(blocks, q, k, v, output, log_sum, upstream, bias)

        return output, grad

    return attend_with_bias(q, k, v, bias)


def _scores(blocks, q, k_block, index, mask_block, bias=None):
    """`(scores, allowed)` of one block: `(batch, heads, q_len, size)` each."""
    scores = ops.einsum("bhqd,bhkd->bhqk", q, k_block)
    if bias is not None:
        scores = scores + ops.take(bias, index, axis=0)
    return scores, blocks.allowed(index, mask_block)


def _forward(blocks, q, k, v, bias=None):
    """The output `(batch, heads, q_len, d_v)` and each row's log-sum-exp `(batch, heads, q_len, 1)`."""
    negative = large_negative("float32")
    rows = ops.shape(q)[:3] + (1,)

    def step(index, carry):
        maximum, total, accumulated = carry
        k_block, v_block, mask_block = blocks.read(index, k, v)
        scores, allowed = _scores(blocks, q, k_block, index, mask_block, bias)
        scores = ops.where(allowed, scores, negative)
        new_maximum = ops.maximum(maximum, ops.max(scores, axis=-1, keepdims=True))
        weights = ops.where(allowed, ops.exp(scores - new_maximum), 0.0)  # (batch, heads, q_len, size)
        rescale = ops.exp(maximum - new_maximum)
        total = total * rescale + ops.sum(weights, axis=-1, keepdims=True)
        accumulated = accumulated * rescale + ops.einsum("bhqk,bhkd->bhqd", weights, v_block)
        return new_maximum, total, accumulated

    init = (ops.full(rows, negative), ops.zeros(rows), ops.zeros(ops.shape(q)[:3] + ops.shape(v)[-1:]))
    maximum, total, accumulated = ops.fori_loop(0, blocks.count, step, init)
    seen = ops.greater(total, 0.0)  # rows with at least one allowed key
    safe_total = ops.where(seen, total, 1.0)
    output = ops.where(seen, accumulated / safe_total, 0.0)
    return output, ops.where(seen, maximum + ops.log(safe_total), 0.0)


def _backward(blocks, q, k, v, output, log_sum, d_output, bias=None):
    """Gradients of `q`, of the blocked `k`, `v` and of the blocked `bias` (zeros without one):
    FlashAttention-2's backward pass, one block at a time."""
    d_rows = ops.sum(d_output * output, axis=-1, keepdims=True)  # (batch, heads, q_len, 1)
    bias_axes = () if bias is None else tuple(i for i in range(4) if bias.shape[i + 1] == 1)  # broadcast axes

    def step(index, carry):
        d_q, d_k, d_v, d_bias = carry
        k_block, v_block, mask_block = blocks.read(index, k, v)
        scores, allowed = _scores(blocks, q, k_block, index, mask_block, bias)
        weights = ops.where(allowed, ops.exp(scores - log_sum), 0.0)
        d_scores = weights * (ops.einsum("bhqd,bhkd->bhqk", d_output, v_block) - d_rows)
        start = (index, 0, 0, 0, 0)
        d_k = ops.slice_update(d_k, start, ops.einsum("bhqk,bhqd->bhkd", d_scores, q)[None])
        d_v = ops.slice_update(d_v, start, ops.einsum("bhqk,bhqd->bhkd", weights, d_output)[None])
        if bias is not None:
            d_block = ops.sum(d_scores, axis=bias_axes, keepdims=True) if bias_axes else d_scores
            d_bias = ops.slice_update(d_bias, start, d_block[None])
        return d_q + ops.einsum("bhqk,bhkd->bhqd", d_scores, k_block), d_k, d_v, d_bias

    d_bias = ops.zeros((1,)) if bias is None else ops.zeros_like(bias)
    return ops.fori_loop(0, blocks.count, step, (ops.zeros_like(q), ops.zeros_like(k), ops.zeros_like(v), d_bias))
