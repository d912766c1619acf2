"""Bad arguments to the layers fail loudly (issue #36).

* Masks must be boolean, True = may attend: the TensorFlow tutorial's float
  padding mask (1 = padding) and int 0/1 masks are ValueErrors that say how
  to convert them, not silently inverted attention.
* Token ids outside [0, vocab_size): a ValueError when called eagerly, NaN
  embeddings (so NaN logits and loss) inside compiled functions.
* Sizes that are not positive ints, and dropout rates outside [0, 1), are
  ValueErrors naming the argument, not a ZeroDivisionError.
* `use_causal_mask=True` with different query and key lengths is a ValueError.
"""

import json
import re

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import ops

import keras_transformer as kt
from keras_transformer.config import MAX_LENGTH
from keras_transformer.layers.attention import masked_softmax
from keras_transformer.layers.masks import key_padding_to_attention_mask

KEYS = np.array([[10, 0, 0], [0, 10, 0], [0, 0, 10], [0, 0, 10]], dtype="float32")
VALUES = np.array([[1, 0], [10, 0], [100, 5], [1000, 6]], dtype="float32")
SEQUENCE = np.array([[7, 6, 0, 0], [3, 0, 0, 0]], dtype="int32")
RNG = np.random.default_rng(36)
HIDDEN = RNG.normal(size=(2, 4, 16)).astype("float32")
MEMORY = RNG.normal(size=(2, 3, 16)).astype("float32")
CONVERSION = re.escape("keras.ops.equal(mask, 0)")


def tutorial_padding_mask(sequence):
    """The TensorFlow tutorial's `create_padding_mask`: float, 1.0 at padding, (batch, 1, 1, seq)."""
    mask = tf.cast(tf.math.equal(sequence, 0), tf.float32)
    return mask[:, tf.newaxis, tf.newaxis, :]


def _np(x):
    return ops.convert_to_numpy(x)


# -- masks --------------------------------------------------------------------


def test_the_tutorials_float_padding_mask_is_rejected_with_how_to_convert_it():
    mask = tutorial_padding_mask(SEQUENCE)
    x = HIDDEN[:, None]  # (batch, 1 head, 4, 16)
    with pytest.raises(
        ValueError,
        match=rf"`mask` must be a boolean mask, True where attention is allowed.*"
        rf"dtype float32.*{CONVERSION}",
    ):
        kt.scaled_dot_product_attention(x, x, x, mask=mask)
    mha = kt.MultiHeadAttention(d_model=16, num_heads=4)
    with pytest.raises(
        ValueError,
        match=r"`attention_mask` must be a boolean mask.*True.*"
        r"attention_mask = keras\.ops\.equal\(mask, 0\)",
    ):
        mha(HIDDEN, HIDDEN, attention_mask=mask[:, 0])


INT_MASK = np.ones((2, 4), "int32")
INT_ATTENTION_MASK = np.ones((2, 4, 4), "int32")


def _mha(**kwargs):
    return kt.MultiHeadAttention(d_model=16, num_heads=4)(HIDDEN, HIDDEN, **kwargs)


def _encoder_layer(**kwargs):
    return kt.EncoderLayer(d_model=16, num_heads=4, d_ff=32)(HIDDEN, **kwargs)


def _decoder_layer(**kwargs):
    return kt.DecoderLayer(d_model=16, num_heads=4, d_ff=32)(HIDDEN, MEMORY, **kwargs)


def _decoder(**kwargs):
    decoder = kt.Decoder(1, vocab_size=10, max_length=8, d_model=16, num_heads=4, d_ff=32)
    return decoder(SEQUENCE, MEMORY, **kwargs)


INT_MASK_CALLS = {
    "scaled_dot_product_attention": (
        lambda: kt.scaled_dot_product_attention(HIDDEN, HIDDEN, HIDDEN, mask=INT_ATTENTION_MASK),
        "mask",
    ),
    "masked_softmax": (lambda: masked_softmax(ops.ones((2, 4, 4)), INT_ATTENTION_MASK), "mask"),
    "merge_masks": (lambda: kt.merge_masks(kt.causal_mask(4), INT_ATTENTION_MASK), "masks[1]"),
    "key_padding_to_attention_mask": (lambda: key_padding_to_attention_mask(INT_MASK), "key_mask"),
    "mha_attention_mask": (lambda: _mha(attention_mask=INT_ATTENTION_MASK), "attention_mask"),
    "mha_value_mask": (lambda: _mha(value_mask=INT_MASK), "value_mask"),
    "mha_key_mask": (lambda: _mha(key_mask=INT_MASK), "key_mask"),
    "mha_query_mask": (lambda: _mha(query_mask=INT_MASK), "query_mask"),
    "encoder_layer_padding_mask": (lambda: _encoder_layer(padding_mask=INT_MASK), "padding_mask"),
    "encoder_layer_attention_mask": (lambda: _encoder_layer(attention_mask=INT_ATTENTION_MASK), "attention_mask"),
    "decoder_layer_decoder_padding_mask": (
        lambda: _decoder_layer(decoder_padding_mask=INT_MASK),
        "decoder_padding_mask",
    ),
    "decoder_layer_encoder_padding_mask": (
        lambda: _decoder_layer(encoder_padding_mask=np.ones((2, 3), "int32")),
        "encoder_padding_mask",
    ),
    "decoder_layer_decoder_attention_mask": (
        lambda: _decoder_layer(decoder_attention_mask=INT_ATTENTION_MASK),
        "decoder_attention_mask",
    ),
    "decoder_encoder_padding_mask": (
        lambda: _decoder(encoder_padding_mask=np.ones((2, 3), "int32")),
        "encoder_padding_mask",
    ),
}


@pytest.mark.parametrize("case", sorted(INT_MASK_CALLS))
def test_an_int_mask_is_rejected_wherever_a_mask_is_taken(case):
    """0/1 ints are not read as "1 = may attend" either: that inverts the tutorial's masks."""
    call, name = INT_MASK_CALLS[case]
    with pytest.raises(ValueError, match=rf"`{re.escape(name)}` must be a boolean mask.*dtype int32"):
        call()


def test_a_float_mask_in_a_compiled_function_fails_when_traced():
    """The check reads the dtype only, so it also works on symbolic and traced tensors."""
    mha = kt.MultiHeadAttention(d_model=16, num_heads=4)
    query = keras.Input((4, 16))
    with pytest.raises(ValueError, match="`attention_mask` must be a boolean mask"):
        mha(query, query, attention_mask=keras.Input((4, 4), dtype="float32"))

    layer = kt.EncoderLayer(d_model=16, num_heads=4, d_ff=32)
    # Built beforehand: a tf.function whose first trace raised while creating
    # variables returns None afterwards (TensorFlow's behaviour, any error).
    expected = _np(layer(HIDDEN, padding_mask=INT_MASK.astype(bool)))

    @tf.function(jit_compile=True)
    def compiled(x, mask):
        return layer(x, padding_mask=mask)

    with pytest.raises(ValueError, match="`padding_mask` must be a boolean mask"):
        compiled(HIDDEN, INT_MASK.astype("float32"))
    # The boolean mask compiles and runs.
    np.testing.assert_allclose(_np(compiled(HIDDEN, INT_MASK.astype(bool))), expected, rtol=1e-5, atol=1e-5)


def test_a_boolean_mask_still_gives_the_tutorials_known_values():
    """Query [0,0,10] shares its weight between keys 2 and 3; with key 2 blocked, key 3 takes it all."""
    query = np.array([[0, 0, 10]], "float32")
    output, weights = kt.scaled_dot_product_attention(query, KEYS, VALUES, mask=[[True, True, False, True]])
    np.testing.assert_allclose(_np(weights), [[0, 0, 0, 1]], atol=1e-6)
    np.testing.assert_allclose(_np(output), [[1000, 6]], atol=1e-3)


def test_the_converted_tutorial_mask_equals_the_boolean_padding_mask():
    converted = ops.equal(tutorial_padding_mask(SEQUENCE), 0)  # (batch, 1, 1, seq), True = real token
    boolean = kt.padding_mask(SEQUENCE)[:, None, None, :]
    x = RNG.normal(size=(2, 3, 4, 8)).astype("float32")  # (batch, heads, seq, depth)
    out, weights = kt.scaled_dot_product_attention(x, x, x, mask=converted)
    expected_out, expected_weights = kt.scaled_dot_product_attention(x, x, x, mask=boolean)
    np.testing.assert_array_equal(_np(out), _np(expected_out))
    np.testing.assert_array_equal(_np(weights), _np(expected_weights))
    assert (_np(weights)[..., 2:] == 0).all()  # padding is not attended

    mha = kt.MultiHeadAttention(d_model=16, num_heads=4)
    np.testing.assert_allclose(
        _np(mha(HIDDEN, HIDDEN, attention_mask=converted[:, 0])),
        _np(mha(HIDDEN, HIDDEN, value_mask=kt.padding_mask(SEQUENCE))),
        rtol=1e-6,
        atol=1e-6,
    )


# -- token ids ----------------------------------------------------------------


VOCAB = 10
BAD_IDS = {"negative": -3, "vocab_size": VOCAB, "past_the_end": VOCAB + 5}


def _embedding():
    return kt.TokenAndPositionEmbedding(vocab_size=VOCAB, d_model=8, max_length=8, name="source_embedding")


def _with_bad_id(bad):
    ids = np.array([[4, 5, 6, 0], [1, 2, 3, 0]], "int32")
    ids[0, 1] = bad
    return ids


@pytest.mark.parametrize("case", sorted(BAD_IDS))
def test_ids_outside_the_vocabulary_are_a_value_error_when_eager(case):
    bad = BAD_IDS[case]
    ids = _with_bad_id(bad)
    message = rf"`token_ids` must hold ids in \[0, vocab_size={VOCAB}\) \(layer 'source_embedding'\)"
    with pytest.raises(ValueError, match=message + rf".*{min(bad, 0)} to {max(bad, 6)}"):
        _embedding()(ids)
    encoder = kt.Encoder(1, vocab_size=VOCAB, max_length=8, d_model=8, num_heads=2, d_ff=16)
    with pytest.raises(ValueError, match=rf"`token_ids` must hold ids in \[0, vocab_size={VOCAB}\)"):
        encoder(ids)


@pytest.fixture(scope="module")
def tiny_model():
    return kt.build_transformer(VOCAB, VOCAB, num_layers=1, d_model=8, num_heads=2, d_ff=16, max_length=8)


def test_the_model_called_eagerly_names_the_bad_ids(tiny_model):
    inputs = {"encoder_inputs": _with_bad_id(-1), "decoder_inputs": _with_bad_id(1)}
    with pytest.raises(ValueError, match=r"`token_ids` must hold ids .*'encoder_embedding'.* from -1 to 6"):
        tiny_model(inputs)


@pytest.mark.parametrize("jit_compile", [True, False])
@pytest.mark.parametrize("case", sorted(BAD_IDS))
def test_compiled_an_out_of_range_id_embeds_as_nan(case, jit_compile):
    """The docstring's graph behaviour: NaN rows at bad ids, the other rows unchanged."""
    embedding = _embedding()
    ids = _with_bad_id(BAD_IDS[case])
    good = np.where(ids < 0, 0, np.minimum(ids, VOCAB - 1))
    compiled = tf.function(embedding.__call__, jit_compile=jit_compile)
    out = _np(compiled(tf.constant(ids)))
    nan_rows = np.isnan(out).all(axis=-1)
    np.testing.assert_array_equal(nan_rows, (ids < 0) | (ids >= VOCAB))
    assert not np.isnan(out[~nan_rows]).any()
    np.testing.assert_allclose(out[~nan_rows], _np(embedding(good))[~nan_rows], rtol=1e-5, atol=1e-6)


def test_predict_with_a_bad_id_gives_nan_logits_and_loss(tiny_model):
    """`predict` runs compiled: the bad example's logits are NaN, so is the loss; the other example is intact."""
    source = _with_bad_id(VOCAB)
    target = np.array([[1, 2, 3, 0], [1, 4, 0, 0]], "int32")
    inputs = {"encoder_inputs": source, "decoder_inputs": target}
    logits = tiny_model.predict(inputs, verbose=0)
    assert np.isnan(logits[0]).all() and np.isfinite(logits[1]).all()
    np.testing.assert_allclose(
        logits[1],
        _np(tiny_model({"encoder_inputs": source[1:], "decoder_inputs": target[1:]}))[0],
        rtol=1e-5,
        atol=1e-5,
    )
    assert np.isnan(_np(kt.MaskedSparseCategoricalCrossentropy()(target, logits)))


def test_in_range_ids_compile_to_the_eager_values():
    embedding = _embedding()
    ids = np.array([[0, 9, 1, 5]], "int32")
    compiled = tf.function(embedding.__call__, jit_compile=True)
    np.testing.assert_allclose(_np(compiled(tf.constant(ids))), _np(embedding(ids)), rtol=1e-5, atol=1e-6)


# -- constructor arguments ---------------------------------------------------


LAYER_ARGS = {
    kt.MultiHeadAttention: dict(d_model=16, num_heads=4, dropout=0.1),
    kt.PositionwiseFeedForward: dict(d_model=16, d_ff=32, dropout=0.1),
    kt.EncoderLayer: dict(
        d_model=16,
        num_heads=4,
        d_ff=32,
        dropout=0.1,
        attention_dropout=0.1,
        activation_dropout=0.1,
        layer_norm_epsilon=1e-6,
    ),
    kt.DecoderLayer: dict(
        d_model=16,
        num_heads=4,
        d_ff=32,
        dropout=0.1,
        attention_dropout=0.1,
        activation_dropout=0.1,
        layer_norm_epsilon=1e-6,
    ),
    kt.Encoder: dict(
        num_layers=1,
        vocab_size=10,
        max_length=8,
        d_model=16,
        num_heads=4,
        d_ff=32,
        dropout=0.1,
        layer_norm_epsilon=1e-6,
    ),
    kt.Decoder: dict(
        num_layers=1,
        vocab_size=10,
        max_length=8,
        d_model=16,
        num_heads=4,
        d_ff=32,
        dropout=0.1,
        layer_norm_epsilon=1e-6,
    ),
    kt.TokenAndPositionEmbedding: dict(vocab_size=10, d_model=16, max_length=8, dropout=0.1),
    kt.PositionalEncoding: dict(position=8, d_model=16),
    kt.positional_encoding: dict(length=8, depth=16),
    kt.build_transformer: dict(
        source_vocab_size=10,
        target_vocab_size=10,
        num_layers=1,
        num_decoder_layers=1,
        d_model=16,
        num_heads=4,
        d_ff=32,
        max_length=8,
        dropout=0.1,
        attention_dropout=0.1,
        activation_dropout=0.1,
        layer_norm_epsilon=1e-6,
    ),
}
RATES = {"dropout", "attention_dropout", "activation_dropout"}


def _bad_values(name, constructor=None):
    if name in RATES:
        return [(-0.1, "a number in [0, 1)"), (1.0, "a number in [0, 1)"), ("0.1", "a number in [0, 1)")]
    if name == "layer_norm_epsilon":
        return [(0.0, "a positive number"), (-1e-6, "a positive number")]
    values = [0, -2, 4.0, True, None]
    if name == "num_decoder_layers":
        values.remove(None)  # None: as many as `num_layers`
    if constructor is kt.build_transformer and name == "max_length":  # the model's positions: bounded
        return [(value, f"an int in [1, {MAX_LENGTH}]") for value in values]
    return [(value, "a positive int") for value in values]


BAD_ARGUMENTS = [
    (constructor, name, value, expected)
    for constructor, kwargs in LAYER_ARGS.items()
    for name in kwargs
    for value, expected in _bad_values(name, constructor)
]


@pytest.mark.parametrize(
    "constructor,name,value,expected",
    BAD_ARGUMENTS,
    ids=[f"{c.__name__}-{n}={v!r}" for c, n, v, _ in BAD_ARGUMENTS],
)
def test_each_bad_constructor_argument_is_a_value_error_naming_it(constructor, name, value, expected):
    kwargs = dict(LAYER_ARGS[constructor], **{name: value})
    message = f"`{name}` must be {expected}. Received: {name}={value!r}"
    with pytest.raises(ValueError, match=re.escape(message)):
        constructor(**kwargs)


def test_numpy_ints_are_accepted_and_stored_as_python_ints():
    layer = kt.EncoderLayer(d_model=np.int64(16), num_heads=np.int32(4), d_ff=np.int64(32))
    config = layer.get_config()
    assert (config["d_model"], config["num_heads"], config["d_ff"]) == (16, 4, 32)
    json.dumps(config)  # a NumPy int would not serialize


def test_d_model_not_divisible_by_num_heads_still_says_so():
    with pytest.raises(ValueError, match=r"divisible by `num_heads`. Received: d_model=30, num_heads=4"):
        kt.EncoderLayer(d_model=30, num_heads=4, d_ff=32)


# -- causal mask --------------------------------------------------------------


def test_causal_attention_with_different_query_and_key_lengths_is_a_value_error():
    mha = kt.MultiHeadAttention(d_model=16, num_heads=4)
    message = r"`use_causal_mask=True` needs as many queries as keys.*Received: q_len=4, k_len=3"
    with pytest.raises(ValueError, match=message):
        mha(HIDDEN, MEMORY, use_causal_mask=True)
    with pytest.raises(ValueError, match=message):  # symbolic shapes too
        mha(keras.Input((4, 16)), keras.Input((3, 16)), use_causal_mask=True)
    with pytest.raises(ValueError, match=message):  # a cache without an index is used as it is
        mha(HIDDEN, HIDDEN, use_causal_mask=True, cache=mha.compute_cache(MEMORY))


def test_a_cached_causal_step_with_an_index_still_works():
    """One query against a 5-position cache: the decoding case, defined by `cache_update_index`."""
    mha = kt.MultiHeadAttention(d_model=16, num_heads=4)
    cache = (ops.zeros((2, 4, 5, 4)), ops.zeros((2, 4, 5, 4)))
    step = HIDDEN[:, :1]
    out, scores, _ = mha(
        step, step, use_causal_mask=True, cache=cache, cache_update_index=2, return_attention_scores=True
    )
    assert tuple(out.shape) == (2, 1, 16)
    assert (_np(scores)[..., 3:] == 0).all() and np.allclose(_np(scores).sum(-1), 1.0)


# -- shapes: masks, sequences, token ids (issue #55) --------------------------


def _shape_message(name, shape):
    return rf"`{re.escape(name)}` must have shape .*Received: {re.escape(name)}\.shape={re.escape(str(shape))}"


WRONG_MASKS = {
    # (call(mask), argument, mask shape); HIDDEN is (2, 4, 16), MEMORY (2, 3, 16).
    "encoder padding, rank 1": (lambda m: _encoder_layer(padding_mask=m), "padding_mask", (4,)),
    "encoder padding, too long": (lambda m: _encoder_layer(padding_mask=m), "padding_mask", (2, 5)),
    "encoder padding, other batch": (lambda m: _encoder_layer(padding_mask=m), "padding_mask", (3, 4)),
    "encoder padding, rank 3": (lambda m: _encoder_layer(padding_mask=m), "padding_mask", (2, 4, 4)),
    "encoder attention, rank 1": (lambda m: _encoder_layer(attention_mask=m), "attention_mask", (4,)),
    "encoder attention, keys": (lambda m: _encoder_layer(attention_mask=m), "attention_mask", (2, 4, 5)),
    "encoder attention, rank 4": (lambda m: _encoder_layer(attention_mask=m), "attention_mask", (2, 1, 4, 4)),
    "decoder self padding": (lambda m: _decoder_layer(decoder_padding_mask=m), "decoder_padding_mask", (2, 3)),
    "decoder self padding, rank 3": (
        lambda m: _decoder_layer(decoder_padding_mask=m),
        "decoder_padding_mask",
        (2, 1, 4),
    ),
    "decoder cross padding": (lambda m: _decoder_layer(encoder_padding_mask=m), "encoder_padding_mask", (2, 4)),
    "decoder cross padding, rank 1": (lambda m: _decoder_layer(encoder_padding_mask=m), "encoder_padding_mask", (3,)),
    "decoder self attention": (
        lambda m: _decoder_layer(decoder_attention_mask=m),
        "decoder_attention_mask",
        (2, 4, 3),
    ),
    "decoder stack cross padding": (lambda m: _decoder(encoder_padding_mask=m), "encoder_padding_mask", (2, 5)),
    "attention value mask": (lambda m: _mha(value_mask=m), "value_mask", (2, 5)),
    "attention mask": (lambda m: _mha(attention_mask=m), "attention_mask", (2, 5)),
}


@pytest.mark.parametrize("case", sorted(WRONG_MASKS))
def test_a_mask_of_the_wrong_shape_is_a_value_error_naming_it(case):
    """Before: a TensorFlow SelectV2 broadcast error, or a rank-1 padding mask broadcast silently."""
    call, name, shape = WRONG_MASKS[case]
    with pytest.raises(ValueError, match=_shape_message(name, shape)):
        call(np.ones(shape, bool))


def test_masks_of_the_right_shape_or_broadcasting_still_work():
    padding = np.array([[True, True, False, False], [True, False, False, False]])
    out = _encoder_layer(padding_mask=padding, attention_mask=np.ones((4, 4), bool))
    assert tuple(out.shape) == (2, 4, 16)
    out = _decoder_layer(encoder_padding_mask=np.ones((1, 3), bool), decoder_attention_mask=np.ones((2, 1, 4), bool))
    assert tuple(out.shape) == (2, 4, 16)
    with pytest.raises(ValueError, match=r"`mask` must broadcast to the scores' shape .*\(2, 4, 4\).*\(2, 5\)"):
        kt.scaled_dot_product_attention(HIDDEN, HIDDEN, HIDDEN, mask=np.ones((2, 5), bool))


def test_wrong_mask_shapes_fail_on_symbolic_inputs_and_when_traced():
    """Static shapes only: keras.Inputs and jit-compiled traces are checked; unknown sizes pass."""
    layer = kt.EncoderLayer(d_model=16, num_heads=4, d_ff=32)
    with pytest.raises(ValueError, match=_shape_message("padding_mask", (None, 5))):
        layer(keras.Input((4, 16)), padding_mask=keras.Input((5,), dtype="bool"))
    assert tuple(layer(keras.Input((None, 16)), padding_mask=keras.Input((None,), dtype="bool")).shape) == (
        None,
        None,
        16,
    )
    decoder_layer = kt.DecoderLayer(d_model=16, num_heads=4, d_ff=32)
    expected = _np(decoder_layer(HIDDEN, MEMORY, encoder_padding_mask=np.ones((2, 3), bool)))

    @tf.function(jit_compile=True)
    def compiled(x, memory, mask):
        return decoder_layer(x, memory, encoder_padding_mask=mask)

    with pytest.raises(ValueError, match=_shape_message("encoder_padding_mask", (2, 4))):
        compiled(HIDDEN, MEMORY, np.ones((2, 4), bool))
    np.testing.assert_allclose(_np(compiled(HIDDEN, MEMORY, np.ones((2, 3), bool))), expected, rtol=1e-5, atol=1e-5)
    sequences = [tf.TensorSpec([None, None, 16])] * 2
    relaxed = tf.function(compiled.python_function, input_signature=[*sequences, tf.TensorSpec([None, None], tf.bool)])
    np.testing.assert_allclose(_np(relaxed(HIDDEN, MEMORY, np.ones((2, 3), bool))), expected, rtol=1e-5, atol=1e-5)


def test_a_cached_decoder_step_checks_its_masks_against_the_caches():
    layer = kt.DecoderLayer(d_model=16, num_heads=4, d_ff=32)
    layer(HIDDEN, MEMORY)
    cache = (ops.zeros((2, 4, 6, 4)), ops.zeros((2, 4, 6, 4)))
    cross = layer.compute_cross_attention_cache(MEMORY)  # 3 source positions
    step = dict(self_attention_cache=cache, self_attention_cache_update_index=1, cross_attention_cache=cross)
    out, _, _ = layer(HIDDEN[:, :1], encoder_padding_mask=np.ones((2, 3), bool), **step)
    assert tuple(out.shape) == (2, 1, 16)
    with pytest.raises(ValueError, match=_shape_message("encoder_padding_mask", (2, 4))):
        layer(HIDDEN[:, :1], encoder_padding_mask=np.ones((2, 4), bool), **step)
    with pytest.raises(ValueError, match=_shape_message("decoder_attention_mask", (2, 1, 5))):
        layer(HIDDEN[:, :1], decoder_attention_mask=np.ones((2, 1, 5), bool), **step)


RANK_2 = np.ones((2, 16), "float32")
WRONG_SEQUENCES = {
    "EncoderLayer": (lambda x: kt.EncoderLayer(16, 4, 32)(x), "inputs"),
    "DecoderLayer decoder_sequence": (lambda x: kt.DecoderLayer(16, 4, 32)(x, MEMORY), "decoder_sequence"),
    "DecoderLayer encoder_sequence": (lambda x: kt.DecoderLayer(16, 4, 32)(HIDDEN, x), "encoder_sequence"),
    "MultiHeadAttention query": (lambda x: kt.MultiHeadAttention(16, 4)(x, HIDDEN), "query"),
    "MultiHeadAttention value": (lambda x: kt.MultiHeadAttention(16, 4)(HIDDEN, x), "value"),
    "PositionwiseFeedForward": (lambda x: kt.PositionwiseFeedForward(16, 32)(x), "inputs"),
    "PositionalEncoding": (lambda x: kt.PositionalEncoding(8, 16)(x), "inputs"),
    "TokenAndPositionEmbedding reverse": (lambda x: _embedding_16()(x, reverse=True), "inputs"),
    "Decoder encoder_outputs": (
        lambda x: kt.Decoder(1, 10, 8, d_model=16, num_heads=4, d_ff=32)(SEQUENCE, x),
        "encoder_outputs",
    ),
}


def _embedding_16():
    embedding = kt.TokenAndPositionEmbedding(vocab_size=VOCAB, d_model=16, max_length=8)
    embedding(SEQUENCE)
    return embedding


@pytest.mark.parametrize("case", sorted(WRONG_SEQUENCES))
@pytest.mark.parametrize("symbolic", [False, True], ids=["eager", "keras.Input"])
def test_a_rank_2_sequence_is_a_value_error_naming_it(case, symbolic):
    """Before: an IndexError ("tuple index out of range"), or a quietly wrong rank-2 output."""
    call, name = WRONG_SEQUENCES[case]
    shape = (None, 16) if symbolic else (2, 16)
    message = rf"`{name}` must have shape \(batch, length, d_model.*{re.escape(str(shape))}"
    with pytest.raises(ValueError, match=message):
        call(keras.Input((16,)) if symbolic else RANK_2)


ID_LAYERS = {
    "TokenAndPositionEmbedding": lambda ids: _embedding()(ids),
    "Encoder": lambda ids: kt.Encoder(1, vocab_size=VOCAB, max_length=8, d_model=8, num_heads=2, d_ff=16)(ids),
    "Decoder": lambda ids: kt.Decoder(1, vocab_size=VOCAB, max_length=8, d_model=8, num_heads=2, d_ff=16)(
        ids, np.ones((2, 3, 8), "float32")
    ),
}
WRONG_IDS = {"rank 1": (4,), "rank 3": (2, 4, 1)}


@pytest.mark.parametrize("rank", sorted(WRONG_IDS))
@pytest.mark.parametrize("layer", sorted(ID_LAYERS))
def test_token_ids_of_rank_1_or_3_are_a_value_error(layer, rank):
    shape = WRONG_IDS[rank]
    message = rf"`token_ids` must have shape \(batch, length\). Received: shape={re.escape(str(shape))}"
    with pytest.raises(ValueError, match=message):
        ID_LAYERS[layer](np.ones(shape, "int32"))
    if layer != "Decoder":  # symbolic: the shape without its batch size
        with pytest.raises(ValueError, match=r"`token_ids` must have shape \(batch, length\)"):
            ID_LAYERS[layer](keras.Input(shape[1:], dtype="int32"))


@pytest.mark.parametrize(
    "length, offset, message",
    [
        (-3, 0, "`length` must be a positive int. Received: length=-3"),
        (0, 0, "`length` must be a positive int. Received: length=0"),
        (2.5, 0, "`length` must be a positive int. Received: length=2.5"),
        (True, 0, "`length` must be a positive int. Received: length=True"),
        ("3", 0, "`length` must be a positive int. Received: length='3'"),
        (3, -1, "`offset` must be a non-negative int. Received: offset=-1"),
        (3, 0.5, "`offset` must be a non-negative int. Received: offset=0.5"),
        (tf.constant(2.0), 0, "`length` must be an int. Received: length of dtype"),
    ],
)
def test_causal_mask_of_a_bad_length_is_a_value_error(length, offset, message):
    """Before: -3 gave TensorFlow's InvalidArgumentError, 2.5 a 3x3 mask, 0 an empty one."""
    with pytest.raises(ValueError, match=re.escape(message)):
        kt.causal_mask(length, offset)


def test_causal_mask_takes_numpy_ints_and_traced_lengths():
    np.testing.assert_array_equal(_np(kt.causal_mask(np.int64(2), offset=np.int32(1))), [[1, 1, 0], [1, 1, 1]])
    traced = tf.function(lambda x: kt.causal_mask(tf.shape(x)[1]), input_signature=[tf.TensorSpec([1, None])])
    np.testing.assert_array_equal(_np(traced(tf.zeros((1, 2)))), [[True, False], [True, True]])
