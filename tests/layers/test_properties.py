"""Property tests (hypothesis) for the attention layers and the model.

Random batch sizes, lengths, padding patterns (including examples that are
all padding) and head counts, under the `float32`, `mixed_float16` and
`mixed_bfloat16` policies. The properties:

* outputs are finite, also for fully padded rows and fully blocked queries;
* a blocked key (padding, `attention_mask`, or the future) gets exactly zero
  attention weight, in inference and in training mode with dropout;
* causality: changing the tokens after position t changes no output at
  positions <= t, in training mode with every dropout > 0. The two forward
  passes must see the same dropout masks, so each pair of calls replays the
  layer's random state (its `SeedGenerator` variables are saved before the
  first call and restored before the second); each test also checks that
  dropout was really active and that the perturbation really changed later
  positions, so it cannot pass vacuously;
* padding invariance: changing what sits at padded positions changes no
  output at real positions;
* mixed precision tracks float32: with the same weights, `mixed_float16` and
  `mixed_bfloat16` models give nearly float32's logits (variables stay float32).

Every test resets the global dtype policy to float32 when it ends.
"""

import keras
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import keras_transformer as kt

pytestmark = pytest.mark.filterwarnings("ignore:You are using a softmax over axis")

POLICIES = ["float32", "mixed_float16", "mixed_bfloat16"]
SETTINGS = settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


# The whole model under each policy: float32 in the default run, the mixed ones with the slow tests.
FLOAT32_ONLY_BY_DEFAULT = [
    policy if policy == "float32" else pytest.param(policy, marks=pytest.mark.slow) for policy in POLICIES
]


@pytest.fixture(params=POLICIES)
def policy(request):
    """Sets the global dtype policy for the test, and resets it afterwards."""
    keras.mixed_precision.set_global_policy(request.param)
    try:
        yield request.param
    finally:
        keras.mixed_precision.set_global_policy("float32")


def _np(x):
    return keras.ops.convert_to_numpy(keras.ops.cast(x, "float32"))


def _seed_variables(layer):
    return [v for v in layer.non_trainable_variables if "seed_generator" in v.path]


def _replayed(layer, first, second):
    """Runs `first()` and `second()` with the same random (dropout) state."""
    seeds = _seed_variables(layer)
    assert seeds, "the layer has no dropout seed to replay"
    saved = [keras.ops.convert_to_numpy(v) for v in seeds]
    a = first()
    for variable, value in zip(seeds, saved):
        variable.assign(value)
    return a, second()


def _assert_finite(*arrays):
    for array in arrays:
        assert np.isfinite(_np(array)).all()


def _lengths_mask(lengths, length):
    return np.arange(length)[None, :] < np.asarray(lengths)[:, None]


@st.composite
def shapes(draw, min_length=1):
    """(batch, heads, d_model, q_len, k_len) of a tiny attention problem."""
    heads = draw(st.sampled_from([1, 2, 4]))
    key_dim = draw(st.sampled_from([2, 4]))
    batch = draw(st.integers(1, 3))
    q_len = draw(st.integers(min_length, 6))
    k_len = draw(st.integers(1, 6))
    # d_model >= 4: a LayerNorm over 2 features always gives (±1, ∓1).
    return batch, heads, max(4, heads * key_dim), q_len, k_len


def _lengths(draw, batch, length, allow_empty=True):
    """Real-token count per example; 0 = an example that is all padding."""
    return draw(st.lists(st.integers(0 if allow_empty else 1, length), min_size=batch, max_size=batch))


# --------------------------------------------------------------------------
# MultiHeadAttention
# --------------------------------------------------------------------------


@SETTINGS
@given(data=st.data(), shape=shapes(), training=st.booleans(), seed=st.integers(0, 2**16))
def test_attention_blocked_keys_get_zero_weight(policy, data, shape, training, seed):
    batch, heads, d_model, q_len, k_len = shape
    rng = np.random.default_rng(seed)
    query = rng.normal(size=(batch, q_len, d_model)).astype("float32")
    value = rng.normal(size=(batch, k_len, d_model)).astype("float32")
    attention_mask = rng.random((batch, q_len, k_len)) < data.draw(st.sampled_from([0.3, 0.7, 1.0]))
    keys = _lengths_mask(data.draw(st.lists(st.integers(0, k_len), min_size=batch, max_size=batch)), k_len)

    layer = kt.MultiHeadAttention(d_model, heads, dropout=0.5)
    output, weights = layer(
        query,
        value,
        attention_mask=attention_mask,
        value_mask=keys,
        return_attention_scores=True,
        training=training,
    )
    assert tuple(weights.shape) == (batch, heads, q_len, k_len)
    _assert_finite(output, weights)
    weights = _np(weights)
    allowed = np.broadcast_to((attention_mask & keys[:, None, :])[:, None], weights.shape)
    assert (weights[~allowed] == 0).all()
    assert (weights >= 0).all()
    row_sums = weights.sum(-1)
    has_key = allowed.any(-1)
    tolerance = 1e-5 if policy == "float32" else 2e-2
    np.testing.assert_allclose(row_sums[has_key], 1.0, atol=tolerance)
    assert (row_sums[~has_key] == 0).all()  # no allowed key: zeros, not NaN or uniform


@SETTINGS
@given(data=st.data(), shape=shapes(min_length=2), seed=st.integers(0, 2**16))
def test_attention_causal_output_never_depends_on_the_future(policy, data, shape, seed):
    batch, heads, d_model, length, _ = shape
    t = data.draw(st.integers(0, length - 2))  # the last position that must not change
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(batch, length, d_model)).astype("float32")
    changed = x.copy()
    changed[:, t + 1 :] = rng.normal(size=changed[:, t + 1 :].shape)

    layer = kt.MultiHeadAttention(d_model, heads, dropout=0.5)
    layer(x, x)  # build
    call = lambda inputs: layer(  # noqa: E731
        inputs, inputs, use_causal_mask=True, return_attention_scores=True, training=True
    )
    (out, weights), (out_changed, weights_changed) = _replayed(layer, lambda: call(x), lambda: call(changed))
    out, out_changed = _np(out), _np(out_changed)
    _assert_finite(out, out_changed)
    np.testing.assert_array_equal(out[:, : t + 1], out_changed[:, : t + 1])
    future = np.triu(np.ones((length, length), bool), k=1)
    assert (_np(weights)[:, :, future] == 0).all() and (_np(weights_changed)[:, :, future] == 0).all()
    # Not vacuous: dropout was on (inference differs), and in inference mode the
    # perturbation is seen at the later positions.
    inference = _np(layer(x, x, use_causal_mask=True, training=False))
    inference_changed = _np(layer(changed, changed, use_causal_mask=True, training=False))
    assert not np.allclose(inference, out)
    assert not np.allclose(inference[:, t + 1 :], inference_changed[:, t + 1 :])


# --------------------------------------------------------------------------
# EncoderLayer
# --------------------------------------------------------------------------


@SETTINGS
@given(data=st.data(), shape=shapes(), norm_first=st.booleans(), seed=st.integers(0, 2**16))
def test_encoder_layer_ignores_padding_and_stays_finite(policy, data, shape, norm_first, seed):
    batch, heads, d_model, length, _ = shape
    lengths = _lengths(data.draw, batch, length)
    real = _lengths_mask(lengths, length)
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(batch, length, d_model)).astype("float32")
    changed = np.where(real[..., None], x, rng.normal(size=x.shape)).astype("float32")

    layer = kt.EncoderLayer(
        d_model,
        heads,
        2 * d_model,
        dropout=0.3,
        attention_dropout=0.3,
        activation_dropout=0.3,
        norm_first=norm_first,
    )
    layer(x, padding_mask=real)  # build
    call = lambda inputs: layer(  # noqa: E731
        inputs, padding_mask=real, return_attention_scores=True, training=True
    )
    (out, scores), (out_changed, _) = _replayed(layer, lambda: call(x), lambda: call(changed))
    out, out_changed, scores = _np(out), _np(out_changed), _np(scores)
    _assert_finite(out, out_changed, scores)  # all-padding examples included
    np.testing.assert_array_equal(out[real], out_changed[real])
    assert (scores[np.broadcast_to(~real[:, None, None, :], scores.shape)] == 0).all()
    # The same in inference mode, through the implicit Keras mask.
    embedded = keras.ops.convert_to_tensor(x)
    keras.src.backend.set_keras_mask(embedded, keras.ops.convert_to_tensor(real))
    implicit = _np(layer(embedded, training=False))
    np.testing.assert_allclose(implicit, _np(layer(x, padding_mask=real)), rtol=1e-6, atol=1e-6)


# --------------------------------------------------------------------------
# DecoderLayer
# --------------------------------------------------------------------------


@pytest.mark.parametrize("policy", FLOAT32_ONLY_BY_DEFAULT, indirect=True)
@SETTINGS
@given(data=st.data(), shape=shapes(min_length=2), norm_first=st.booleans(), seed=st.integers(0, 2**16))
def test_decoder_layer_is_causal_under_dropout(policy, data, shape, norm_first, seed):
    batch, heads, d_model, length, source_length = shape
    t = data.draw(st.integers(0, length - 2))
    target_real = _lengths_mask(_lengths(data.draw, batch, length), length)
    source_real = _lengths_mask(_lengths(data.draw, batch, source_length), source_length)
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(batch, length, d_model)).astype("float32")
    memory = rng.normal(size=(batch, source_length, d_model)).astype("float32")
    changed = x.copy()
    changed[:, t + 1 :] = rng.normal(size=changed[:, t + 1 :].shape)
    # Padded source positions may hold anything.
    memory_changed = np.where(source_real[..., None], memory, 100 * rng.normal(size=memory.shape))
    memory_changed = memory_changed.astype("float32")

    layer = kt.DecoderLayer(
        d_model,
        heads,
        2 * d_model,
        dropout=0.3,
        attention_dropout=0.3,
        activation_dropout=0.3,
        norm_first=norm_first,
    )
    layer(x, memory)  # build

    def call(target, source):
        return layer(
            target,
            source,
            decoder_padding_mask=target_real,
            encoder_padding_mask=source_real,
            return_attention_scores=True,
            training=True,
        )

    (out, self_scores, cross_scores), (out_changed, *_) = _replayed(
        layer, lambda: call(x, memory), lambda: call(changed, memory_changed)
    )
    out, out_changed = _np(out), _np(out_changed)
    _assert_finite(out, out_changed, self_scores, cross_scores)
    np.testing.assert_array_equal(out[:, : t + 1], out_changed[:, : t + 1])

    self_scores, cross_scores = _np(self_scores), _np(cross_scores)
    future = np.triu(np.ones((length, length), bool), k=1)
    assert (self_scores[:, :, future] == 0).all()
    assert (self_scores[np.broadcast_to(~target_real[:, None, None, :], self_scores.shape)] == 0).all()
    assert (cross_scores[np.broadcast_to(~source_real[:, None, None, :], cross_scores.shape)] == 0).all()
    # Not vacuous: dropout was on, and the perturbation shows at later positions.
    inference, inference_changed = (
        _np(layer(target, memory, decoder_padding_mask=target_real, encoder_padding_mask=source_real, training=False))
        for target in (x, changed)
    )
    _assert_finite(inference)
    assert not np.allclose(inference, out)
    assert not np.allclose(inference[:, t + 1 :], inference_changed[:, t + 1 :])


# --------------------------------------------------------------------------
# build_transformer
# --------------------------------------------------------------------------

VOCAB, MAX_LENGTH = 13, 8
_MODELS = {}


def _tiny_model(policy, norm_first):
    """One tiny model per policy and norm placement (building is the slow part)."""
    key = (policy, norm_first)
    if key not in _MODELS:
        _MODELS[key] = kt.build_transformer(
            VOCAB,
            VOCAB,
            num_layers=1,
            d_model=8,
            num_heads=2,
            d_ff=16,
            dropout=0.3,
            attention_dropout=0.3,
            activation_dropout=0.3,
            max_length=MAX_LENGTH,
            norm_first=norm_first,
        )
    return _MODELS[key]


@st.composite
def token_batches(draw):
    """Right-padded (source, target) id batches; whole rows of padding allowed."""
    batch = draw(st.integers(1, 3))
    source_length = draw(st.integers(1, MAX_LENGTH - 2))
    target_length = draw(st.integers(2, MAX_LENGTH - 2))

    def ids(length):
        rows = []
        for n in _lengths(draw, batch, length):
            row = draw(st.lists(st.integers(1, VOCAB - 1), min_size=n, max_size=n))
            rows.append(row + [0] * (length - n))
        return np.array(rows, dtype="int32")

    return ids(source_length), ids(target_length)


@pytest.mark.parametrize("policy", FLOAT32_ONLY_BY_DEFAULT, indirect=True)
@SETTINGS
@given(batches=token_batches(), norm_first=st.booleans(), data=st.data())
def test_transformer_is_causal_finite_and_ignores_padding(policy, batches, norm_first, data):
    source, target = batches
    model = _tiny_model(policy, norm_first)
    t = data.draw(st.integers(0, target.shape[1] - 2))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    changed = target.copy()
    future = changed[:, t + 1 :]  # every future token becomes a different real token
    changed[:, t + 1 :] = (future - 1 + rng.integers(1, VOCAB - 1, size=future.shape)) % (VOCAB - 1) + 1
    assert (changed[:, t + 1 :] != target[:, t + 1 :]).all() and (changed[:, t + 1 :] > 0).all()

    def call(target_ids):
        return model({"encoder_inputs": source, "decoder_inputs": target_ids}, training=True)

    logits, logits_changed = _replayed(model, lambda: call(target), lambda: call(changed))
    logits, logits_changed = _np(logits), _np(logits_changed)
    assert logits.shape == (*target.shape, VOCAB)
    _assert_finite(logits, logits_changed)  # also all-padding source or target rows
    np.testing.assert_array_equal(logits[:, : t + 1], logits_changed[:, : t + 1])
    inference = _np(model({"encoder_inputs": source, "decoder_inputs": target}, training=False))
    inference_changed = _np(model({"encoder_inputs": source, "decoder_inputs": changed}, training=False))
    assert not np.allclose(inference, logits)  # dropout was on
    assert not np.allclose(inference[:, t + 1 :], inference_changed[:, t + 1 :])

    # Inference: more source padding changes nothing.
    inputs = {"encoder_inputs": source, "decoder_inputs": target}
    padded = {"encoder_inputs": np.pad(source, ((0, 0), (0, 2))), "decoder_inputs": target}
    tolerance = dict(rtol=1e-5, atol=1e-5) if policy == "float32" else dict(rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(_np(model(padded, training=False)), _np(model(inputs, training=False)), **tolerance)


@pytest.mark.parametrize("mixed_policy, tolerance", [("mixed_float16", 0.02), ("mixed_bfloat16", 0.06)])
def test_mixed_precision_tracks_float32(mixed_policy, tolerance):
    """Given float32's weights, a mixed-precision model computes nearly the same logits."""
    rng = np.random.default_rng(0)
    source = rng.integers(1, VOCAB, size=(3, 7)).astype("int32")
    target = rng.integers(1, VOCAB, size=(3, 5)).astype("int32")
    source[1, 3:], target[2, 2:], source[2] = 0, 0, 0  # padding, and a source of padding only
    inputs = {"encoder_inputs": source, "decoder_inputs": target}
    args = dict(num_layers=2, d_model=16, num_heads=4, d_ff=32, max_length=MAX_LENGTH)
    reference = kt.build_transformer(VOCAB, VOCAB, **args)
    expected = _np(reference(inputs))
    keras.mixed_precision.set_global_policy(mixed_policy)
    try:
        model = kt.build_transformer(VOCAB, VOCAB, **args)
        model.set_weights(reference.get_weights())
        logits = model(inputs)
        assert keras.backend.standardize_dtype(logits.dtype) == mixed_policy.split("_")[1]
        assert all(w.dtype == "float32" for w in model.weights)  # variables stay float32
    finally:
        keras.mixed_precision.set_global_policy("float32")
    logits = _np(logits)
    assert np.isfinite(logits).all()
    assert np.abs(logits - expected).max() <= tolerance * np.abs(expected).max()
