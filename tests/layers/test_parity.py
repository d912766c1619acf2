"""Parity with the reference implementations, given the same weights.

* `kt.MultiHeadAttention(d_model, h)` against
  `keras.layers.MultiHeadAttention(num_heads=h, key_dim=d_model // h)`: the
  weights have the same shapes, names and order, and the outputs (and the
  attention weights) agree to float32 tolerance with no mask, a padding mask,
  an explicit `attention_mask`, `use_causal_mask=True` and combinations.
* `kt.EncoderLayer` / `kt.DecoderLayer`, post-norm and pre-norm, against
  keras-hub's `TransformerEncoder` / `TransformerDecoder` (weights mapped by
  name, same `layer_norm_epsilon`), with and without padding masks.

All comparisons run with `training=False`. The intended differences that
remain, each pinned by a test below:

1. Padded *queries* (implicit Keras masks only). `keras.layers.MultiHeadAttention`
   turns the Keras mask of `query` into a `(batch, q_len, 1)` mask, so a padded
   query attends nothing and its output is the output projection's bias.
   `kt.MultiHeadAttention` (like keras-hub, PyTorch's `key_padding_mask` and
   the paper) masks keys only: a padded query attends the real keys as usual.
   Real query rows agree exactly; padded rows are compared against the
   documented behaviour of each side instead. keras-hub's layers inherit
   Keras's behaviour when the padding comes as an implicit Keras mask (its
   `MultiHeadAttention` reads the query's mask), and agree with ours on every
   row when it comes as an explicit `padding_mask`.
2. Dropout placement (training only). keras-hub uses one rate, `dropout`, for
   the attention probabilities *and* each sublayer's output. This package
   separates `dropout` (sublayer outputs and the residual, as in the paper),
   `attention_dropout` and `activation_dropout` (both 0 by default). keras-hub's
   placement is `EncoderLayer(dropout=r, attention_dropout=r,
   activation_dropout=0)`; see `KERAS_HUB_EQUIVALENT_DROPOUT`.
3. `layer_norm_epsilon` defaults: 1e-6 here (the TF tutorial, T2T), 1e-5 in
   keras-hub. The tests set keras-hub's to ours.
4. A side note, not a difference: `keras.layers.MultiHeadAttention` *clears*
   the Keras mask of the tensors it is called on (eagerly), so each reference
   call below gets freshly embedded inputs.
"""

import keras
import numpy as np
import pytest

import keras_transformer as kt

BATCH, Q_LEN, K_LEN, D_MODEL, HEADS, D_FF = 3, 5, 7, 16, 4, 32
TOL = dict(rtol=1e-5, atol=1e-5)

# keras-hub's dropout sites expressed in this package's arguments (difference 2).
KERAS_HUB_EQUIVALENT_DROPOUT = lambda rate: dict(  # noqa: E731
    dropout=rate, attention_dropout=rate, activation_dropout=0.0
)

# This package's sublayer names -> keras-hub's, per layer class.
ENCODER_NAMES = {
    "self_attention": "self_attention_layer",
    "self_attention_norm": "self_attention_layer_norm",
    "ffn/ffn_inner": "feedforward_intermediate_dense",
    "ffn/ffn_output": "feedforward_output_dense",
    "ffn_norm": "feedforward_layer_norm",
}
DECODER_NAMES = {
    "self_attention": "self_attention",
    "self_attention_norm": "self_attention_layer_norm",
    "cross_attention": "cross_attention",
    "cross_attention_norm": "cross_attention_layer_norm",
    "ffn/ffn_inner": "feedforward_intermediate_dense",
    "ffn/ffn_output": "feedforward_output_dense",
    "ffn_norm": "feedforward_layer_norm",
}


def _rng(seed=0):
    return np.random.default_rng(seed)


def _normal(shape, seed=0):
    return _rng(seed).normal(size=shape).astype("float32")


def _lengths_mask(lengths, length):
    """Right padding: `True` at the first `lengths[i]` positions of row i."""
    return np.arange(length)[None, :] < np.asarray(lengths)[:, None]


def _np(x):
    return keras.ops.convert_to_numpy(x)


def _randomize(layer, seed=1):
    """Non-trivial values for every weight (biases and LayerNorm included)."""
    rng = _rng(seed)
    for variable in layer.weights:
        variable.assign(rng.normal(scale=0.3, size=variable.shape).astype("float32"))


def _mha_pair(query_len=Q_LEN, value_len=K_LEN, dropout=0.0):
    ours = kt.MultiHeadAttention(D_MODEL, HEADS, dropout=dropout)
    ref = keras.layers.MultiHeadAttention(num_heads=HEADS, key_dim=D_MODEL // HEADS, dropout=dropout)
    ours.build((None, query_len, D_MODEL), (None, value_len, D_MODEL))
    ref.build((None, query_len, D_MODEL), (None, value_len, D_MODEL))
    _randomize(ref)
    ours.set_weights(ref.get_weights())
    return ours, ref


# --------------------------------------------------------------------------
# MultiHeadAttention vs keras.layers.MultiHeadAttention
# --------------------------------------------------------------------------


def test_attention_weights_have_the_keras_shapes_names_and_order():
    ours = kt.MultiHeadAttention(D_MODEL, HEADS)
    ref = keras.layers.MultiHeadAttention(num_heads=HEADS, key_dim=D_MODEL // HEADS)
    for layer in (ours, ref):
        layer.build((None, Q_LEN, D_MODEL), (None, K_LEN, D_MODEL))

    def signature(layer):
        return [(tuple(v.shape), "/".join(v.path.split("/")[1:])) for v in layer.weights]

    assert signature(ours) == signature(ref)
    assert signature(ours) == [
        ((D_MODEL, HEADS, D_MODEL // HEADS), "query/kernel"),
        ((HEADS, D_MODEL // HEADS), "query/bias"),
        ((D_MODEL, HEADS, D_MODEL // HEADS), "key/kernel"),
        ((HEADS, D_MODEL // HEADS), "key/bias"),
        ((D_MODEL, HEADS, D_MODEL // HEADS), "value/kernel"),
        ((HEADS, D_MODEL // HEADS), "value/bias"),
        ((HEADS, D_MODEL // HEADS, D_MODEL), "attention_output/kernel"),
        ((D_MODEL,), "attention_output/bias"),
    ]
    # And the other way round: Keras's trained weights load into ours.
    _randomize(ref)
    ours.set_weights(ref.get_weights())
    for a, b in zip(ours.weights, ref.weights):
        np.testing.assert_array_equal(_np(a), _np(b))


@pytest.mark.parametrize("dropout", [0.0, 0.3])
@pytest.mark.parametrize("separate_key", [False, True])
def test_attention_parity_without_mask(dropout, separate_key):
    ours, ref = _mha_pair(dropout=dropout)
    query, value = _normal((BATCH, Q_LEN, D_MODEL), 2), _normal((BATCH, K_LEN, D_MODEL), 3)
    key = _normal((BATCH, K_LEN, D_MODEL), 4) if separate_key else None
    out, scores = ours(query, value, key=key, return_attention_scores=True, training=False)
    ref_out, ref_scores = ref(query, value, key=key, return_attention_scores=True, training=False)
    np.testing.assert_allclose(_np(out), _np(ref_out), **TOL)
    np.testing.assert_allclose(_np(scores), _np(ref_scores), **TOL)
    # Keras's fused path (no scores requested) as well.
    np.testing.assert_allclose(_np(ours(query, value, key=key)), _np(ref(query, value, key=key)), **TOL)


def test_attention_parity_with_padding_as_attention_mask():
    ours, ref = _mha_pair()
    query, value = _normal((BATCH, Q_LEN, D_MODEL), 2), _normal((BATCH, K_LEN, D_MODEL), 3)
    keys = _lengths_mask([7, 3, 1], K_LEN)  # (batch, k_len), True = real
    full = np.broadcast_to(keys[:, None, :], (BATCH, Q_LEN, K_LEN))
    out, scores = ours(query, value, attention_mask=full, return_attention_scores=True)
    ref_out, ref_scores = ref(query, value, attention_mask=full, return_attention_scores=True)
    np.testing.assert_allclose(_np(out), _np(ref_out), **TOL)
    np.testing.assert_allclose(_np(scores), _np(ref_scores), **TOL)
    assert (_np(scores)[~np.broadcast_to(full[:, None], scores.shape)] == 0).all()
    np.testing.assert_allclose(_np(out), _np(ref(query, value, attention_mask=full)), **TOL)
    # The broadcastable (batch, 1, k_len) form and `value_mask` mean the same.
    np.testing.assert_allclose(_np(ours(query, value, attention_mask=keys[:, None, :])), _np(out), **TOL)
    np.testing.assert_allclose(_np(ours(query, value, value_mask=keys)), _np(out), **TOL)


def test_attention_parity_with_implicit_keras_masks():
    """Masks from `Embedding(mask_zero=True)` on query and value (difference 1)."""
    embedding = keras.layers.Embedding(20, D_MODEL, mask_zero=True, embeddings_initializer="normal")
    ids = np.array([[3, 4, 5, 6, 7], [8, 9, 0, 0, 0], [1, 0, 0, 0, 0]], dtype="int32")
    real = ids != 0
    ours, ref = _mha_pair(Q_LEN, Q_LEN)

    def embedded():  # fresh tensors: Keras's MHA clears the masks it reads
        x = embedding(ids)
        assert keras.src.backend.get_keras_mask(x) is not None
        return x

    x = embedded()
    out, scores = ours(x, x, return_attention_scores=True)
    x = embedded()
    ref_out, ref_scores = ref(x, x, return_attention_scores=True)
    out, scores, ref_out, ref_scores = map(_np, (out, scores, ref_out, ref_scores))

    # Real query rows: identical outputs and weights; padded keys get zero weight.
    np.testing.assert_allclose(out[real], ref_out[real], **TOL)
    real_rows = np.broadcast_to(real[:, None, :, None], scores.shape)
    np.testing.assert_allclose(scores[real_rows], ref_scores[real_rows], **TOL)
    assert (scores[np.broadcast_to(~real[:, None, None, :], scores.shape)] == 0).all()

    # Padded query rows (the documented difference). Keras: no key allowed, the
    # output is the projection bias. Ours: the real keys, as for a real query.
    bias = _np(ref.weights[-1])
    np.testing.assert_allclose(ref_out[~real], np.broadcast_to(bias, ref_out[~real].shape), **TOL)
    assert (ref_scores[np.broadcast_to(~real[:, None, :, None], scores.shape)] == 0).all()
    unmasked_query = ours(embedded(), embedded(), query_mask=None, value_mask=real)
    np.testing.assert_allclose(out, _np(unmasked_query), **TOL)
    padded_rows = np.broadcast_to(~real[:, None, :, None], scores.shape)
    np.testing.assert_allclose(scores[padded_rows].reshape(-1, Q_LEN).sum(-1), 1.0, rtol=1e-5)


def test_attention_parity_with_explicit_attention_mask():
    ours, ref = _mha_pair()
    query, value = _normal((BATCH, Q_LEN, D_MODEL), 2), _normal((BATCH, K_LEN, D_MODEL), 3)
    mask = _rng(5).random((BATCH, Q_LEN, K_LEN)) < 0.5
    mask[..., 0] = True  # no fully blocked row here: see the next test
    out, scores = ours(query, value, attention_mask=mask, return_attention_scores=True)
    ref_out, ref_scores = ref(query, value, attention_mask=mask, return_attention_scores=True)
    np.testing.assert_allclose(_np(out), _np(ref_out), **TOL)
    np.testing.assert_allclose(_np(scores), _np(ref_scores), **TOL)
    assert (_np(scores)[np.broadcast_to(~mask[:, None], scores.shape)] == 0).all()
    np.testing.assert_allclose(_np(out), _np(ref(query, value, attention_mask=mask)), **TOL)


def test_fully_blocked_query_rows_match_keras():
    """A query with no allowed key: zero weights and a bias-only output, no NaN."""
    ours, ref = _mha_pair()
    query, value = _normal((BATCH, Q_LEN, D_MODEL), 2), _normal((BATCH, K_LEN, D_MODEL), 3)
    mask = np.ones((BATCH, Q_LEN, K_LEN), bool)
    mask[0, 1] = False
    mask[2] = False  # a whole example blocked
    out, scores = map(_np, ours(query, value, attention_mask=mask, return_attention_scores=True))
    ref_out, ref_scores = map(_np, ref(query, value, attention_mask=mask, return_attention_scores=True))
    assert np.isfinite(out).all() and np.isfinite(scores).all()
    assert (scores[0, :, 1] == 0).all() and (scores[2] == 0).all()
    np.testing.assert_allclose(out[2], np.broadcast_to(_np(ours.weights[-1]), out[2].shape), **TOL)
    np.testing.assert_allclose(out, ref_out, **TOL)
    np.testing.assert_allclose(scores, ref_scores, **TOL)


@pytest.mark.parametrize("with_padding", [False, True])
@pytest.mark.parametrize("return_scores", [False, True])
def test_attention_parity_with_causal_mask(with_padding, return_scores):
    ours, ref = _mha_pair(Q_LEN, Q_LEN)
    x = _normal((BATCH, Q_LEN, D_MODEL), 6)
    kwargs = dict(use_causal_mask=True)
    if with_padding:
        kwargs["attention_mask"] = np.broadcast_to(_lengths_mask([5, 3, 1], Q_LEN)[:, None, :], (BATCH, Q_LEN, Q_LEN))
    if return_scores:
        out, scores = ours(x, x, return_attention_scores=True, **kwargs)
        ref_out, ref_scores = ref(x, x, return_attention_scores=True, **kwargs)
        np.testing.assert_allclose(_np(scores), _np(ref_scores), **TOL)
        future = np.triu(np.ones((Q_LEN, Q_LEN), bool), k=1)
        assert (_np(scores)[:, :, future] == 0).all()
    else:
        out, ref_out = ours(x, x, **kwargs), ref(x, x, **kwargs)
    np.testing.assert_allclose(_np(out), _np(ref_out), **TOL)


# --------------------------------------------------------------------------
# EncoderLayer / DecoderLayer vs keras-hub
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def keras_hub():
    return pytest.importorskip("keras_hub", reason="keras-hub (in the `test` extra) is not installed")


def _copy_weights_by_name(source, target, names):
    """Copies keras-hub's weights into ours through the sublayer name map."""
    source_by_path = {"/".join(v.path.split("/")[1:]): v for v in source.weights}
    used = set()
    for variable in target.weights:
        path = "/".join(variable.path.split("/")[1:])
        prefix = max((n for n in names if path.startswith(n + "/")), key=len)
        source_path = names[prefix] + path[len(prefix) :]
        source_variable = source_by_path[source_path]
        assert tuple(source_variable.shape) == tuple(variable.shape), path
        variable.assign(source_variable)
        used.add(source_path)
    assert used == set(source_by_path), f"unmapped keras-hub weights: {set(source_by_path) - used}"


def _encoder_pair(keras_hub, norm_first, dropout=0.1):
    ours = kt.EncoderLayer(
        D_MODEL,
        HEADS,
        D_FF,
        norm_first=norm_first,
        layer_norm_epsilon=1e-6,
        **KERAS_HUB_EQUIVALENT_DROPOUT(dropout),
    )
    ref = keras_hub.layers.TransformerEncoder(
        intermediate_dim=D_FF,
        num_heads=HEADS,
        dropout=dropout,
        normalize_first=norm_first,
        layer_norm_epsilon=1e-6,
    )
    ours.build((None, Q_LEN, D_MODEL))
    ref.build((None, Q_LEN, D_MODEL))
    _randomize(ref, seed=7)
    _copy_weights_by_name(ref, ours, ENCODER_NAMES)
    return ours, ref


def _decoder_pair(keras_hub, norm_first, cross=True, dropout=0.1):
    ours = kt.DecoderLayer(
        D_MODEL,
        HEADS,
        D_FF,
        norm_first=norm_first,
        layer_norm_epsilon=1e-6,
        **KERAS_HUB_EQUIVALENT_DROPOUT(dropout),
    )
    ref = keras_hub.layers.TransformerDecoder(
        intermediate_dim=D_FF,
        num_heads=HEADS,
        dropout=dropout,
        normalize_first=norm_first,
        layer_norm_epsilon=1e-6,
    )
    memory_shape = (None, K_LEN, D_MODEL) if cross else None
    ours.build((None, Q_LEN, D_MODEL), memory_shape)
    ref.build((None, Q_LEN, D_MODEL), memory_shape)
    _randomize(ref, seed=8)
    _copy_weights_by_name(ref, ours, DECODER_NAMES)
    return ours, ref


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_norm", "pre_norm"])
@pytest.mark.parametrize("masks", ["none", "padding", "padding_and_attention"])
def test_encoder_layer_matches_keras_hub(keras_hub, norm_first, masks):
    ours, ref = _encoder_pair(keras_hub, norm_first)
    x = _normal((BATCH, Q_LEN, D_MODEL), 9)
    kwargs = {}
    if masks != "none":
        kwargs["padding_mask"] = _lengths_mask([5, 2, 1], Q_LEN)
    if masks == "padding_and_attention":
        attention = _rng(10).random((BATCH, Q_LEN, Q_LEN)) < 0.6
        attention[..., 0] = True  # every query keeps a key (see the MHA tests)
        kwargs["attention_mask"] = attention
    out, scores = ours(x, return_attention_scores=True, training=False, **kwargs)
    ref_out, ref_scores = ref(x, return_attention_scores=True, training=False, **kwargs)
    # All rows, padded queries included: both sides mask keys only.
    np.testing.assert_allclose(_np(out), _np(ref_out), **TOL)
    np.testing.assert_allclose(_np(scores), _np(ref_scores), **TOL)
    np.testing.assert_allclose(_np(ours(x, **kwargs)), _np(ref(x, **kwargs)), **TOL)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_norm", "pre_norm"])
def test_encoder_layer_matches_keras_hub_with_implicit_mask(keras_hub, norm_first):
    ours, ref = _encoder_pair(keras_hub, norm_first)
    embedding = keras.layers.Embedding(20, D_MODEL, mask_zero=True, embeddings_initializer="normal")
    ids = np.array([[3, 4, 5, 6, 7], [8, 9, 0, 0, 0], [1, 0, 0, 0, 0]], dtype="int32")
    out, ref_out = _np(ours(embedding(ids))), _np(ref(embedding(ids)))
    real = ids != 0
    np.testing.assert_allclose(out[real], ref_out[real], **TOL)
    # Padded queries: keras-hub hands the Keras mask on to
    # `keras.layers.MultiHeadAttention`, which blocks padded queries (difference
    # 1); with an explicit `padding_mask` it does not (the test above).
    assert not np.allclose(out[~real], ref_out[~real], **TOL)
    no_query_mask = ref(_np(embedding(ids)), padding_mask=real)
    np.testing.assert_allclose(out, _np(no_query_mask), **TOL)
    explicit = ours(_np(embedding(ids)), padding_mask=ids != 0)
    np.testing.assert_allclose(_np(out), _np(explicit), **TOL)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_norm", "pre_norm"])
@pytest.mark.parametrize("padding", [False, True])
def test_decoder_layer_matches_keras_hub(keras_hub, norm_first, padding):
    ours, ref = _decoder_pair(keras_hub, norm_first)
    x, memory = _normal((BATCH, Q_LEN, D_MODEL), 11), _normal((BATCH, K_LEN, D_MODEL), 12)
    kwargs = {}
    if padding:
        kwargs = dict(
            decoder_padding_mask=_lengths_mask([5, 3, 1], Q_LEN),
            encoder_padding_mask=_lengths_mask([2, 7, 1], K_LEN),
        )
    out = ours(x, memory, training=False, **kwargs)
    ref_out = ref(x, memory, training=False, **kwargs)
    np.testing.assert_allclose(_np(out), _np(ref_out), **TOL)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_norm", "pre_norm"])
def test_decoder_only_layer_matches_keras_hub(keras_hub, norm_first):
    """Without an encoder sequence both are GPT-style blocks (no cross-attention)."""
    ours, ref = _decoder_pair(keras_hub, norm_first, cross=False)
    x = _normal((BATCH, Q_LEN, D_MODEL), 13)
    padding = _lengths_mask([5, 4, 2], Q_LEN)
    np.testing.assert_allclose(
        _np(ours(x, decoder_padding_mask=padding)), _np(ref(x, decoder_padding_mask=padding)), **TOL
    )
    np.testing.assert_allclose(_np(ours(x)), _np(ref(x)), **TOL)


def test_decoder_layer_dropout_sites_match_keras_hub_equivalent(keras_hub):
    """Difference 2, pinned: with the mapped rates both have the same dropout layers."""

    def rates(layer):
        return sorted(
            sub.rate
            for sub in layer._flatten_layers(include_self=False, recursive=True)
            if isinstance(sub, keras.layers.Dropout) and sub.rate
        )

    ours, ref = _decoder_pair(keras_hub, norm_first=False, dropout=0.25)
    # keras-hub: self/cross attention probabilities + three sublayer outputs.
    assert rates(ref) == [0.25] * 5
    assert rates(ours) == [0.25] * 5
