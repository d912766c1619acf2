"""TransformerModel's interface: parts, encode/decode, the cached step, and 0.1.0 `.keras` files."""

import functools
import gc
import json
import pathlib

import keras
import numpy as np
import pytest

import keras_transformer as kt
from keras_transformer import decoding
from keras_transformer.layers import padding_mask
from keras_transformer.models import TransformerModel, as_transformer
from keras_transformer.plotting import attention_maps

DATA = pathlib.Path(__file__).parent / "data"
SOURCE = np.array([[5, 6, 7, 8, 0, 0], [9, 4, 0, 0, 0, 0]], "int32")
TARGET = np.array([[2, 11, 12, 0], [2, 13, 0, 0]], "int32")
SIZES = dict(num_layers=2, d_model=16, num_heads=2, d_ff=32, max_length=8)


def _np(x):
    return keras.ops.convert_to_numpy(x)


@pytest.fixture(scope="module", params=["post_norm", "pre_norm_shared_tied"])
def model(request):
    keras.utils.set_random_seed(3)
    options = (
        {} if request.param == "post_norm" else dict(norm_first=True, share_embeddings=True, tie_output_embedding=True)
    )
    return kt.build_transformer(40, 40, num_decoder_layers=3, **SIZES, **options)


def test_the_parts_are_the_named_layers(model):
    named = {layer.name: layer for layer in model.layers}
    assert model.encoder_layers == [named["encoder_layer_0"], named["encoder_layer_1"]]
    assert model.decoder_layers == [named[f"decoder_layer_{i}"] for i in range(3)]
    assert model.encoder_embedding is named["encoder_embedding"]
    shared = model.encoder_norm is not None
    assert (model.decoder_embedding is model.encoder_embedding) == shared
    assert (model.output_layer is None) == shared and (model.decoder_norm is not None) == shared
    assert (model.max_length, model.source_vocab_size, model.target_vocab_size) == (8, 40, 40)


def test_encode_and_decode_are_the_functional_graph(model):
    logits = _np(model({"encoder_inputs": SOURCE, "decoder_inputs": TARGET}))
    memory = model.encode(SOURCE)
    np.testing.assert_allclose(_np(model.decode(TARGET, memory, padding_mask(SOURCE))), logits, atol=1e-5)
    # The encoder output is the graph's, padding included.
    last = model.encoder_norm or model.encoder_layers[-1]
    graph_encoder = keras.Model(model.input["encoder_inputs"], last.output)
    np.testing.assert_allclose(_np(memory), _np(graph_encoder(SOURCE)), atol=1e-6)


def test_the_cached_step_gives_the_teacher_forced_logits(model):
    logits = _np(model({"encoder_inputs": SOURCE, "decoder_inputs": TARGET}))
    memory = model.encode(SOURCE)
    cross = model.cross_attention_caches(memory)
    caches = model.empty_self_attention_caches(2, 8)
    for index in range(TARGET.shape[1]):
        step_logits, caches = model.decoder_step(
            TARGET[:, index : index + 1], index, caches, cross, padding_mask(SOURCE)
        )
        real = TARGET[:, index] != 0
        np.testing.assert_allclose(_np(step_logits)[real, 0], logits[real, index], atol=1e-4)


def test_attention_maps_run_through_the_interface(model):
    weights = attention_maps.attention_weights(model, SOURCE, TARGET)
    assert [w.shape for w in weights["encoder"]] == [(2, 2, 6, 6)] * 2
    assert [w.shape for w in weights["decoder_cross"]] == [(2, 2, 4, 6)] * 3
    assert np.all(weights["decoder_cross"][0][1, :, :, 2:] == 0)  # padded source keys


def test_a_functional_model_with_the_layer_names_is_wrapped_not_copied(model):
    functional = keras.Model(model.input, model.output)
    wrapped = as_transformer(functional)
    assert isinstance(wrapped, TransformerModel) and wrapped.encoder_layers == model.encoder_layers
    assert as_transformer(model) is model
    np.testing.assert_array_equal(
        _np(decoding.greedy_decode(functional, SOURCE, max_length=5)),
        _np(decoding.greedy_decode(model, SOURCE, max_length=5)),
    )


def test_other_models_are_refused_with_the_argument_named():
    dense = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    with pytest.raises(ValueError, match="`model` must come from `build_transformer`"):
        as_transformer(dense)
    with pytest.raises(ValueError, match="`model` must come from `build_transformer`"):
        attention_maps.attention_weights(dense, SOURCE, TARGET)


def test_a_keras_file_saved_by_version_0_1_0_loads_with_identical_outputs():
    """tests/data/transformer_0.1.0.keras was saved by the code at 6e200c6:

    keras.utils.set_random_seed(0)
    build_transformer(30, 30, num_layers=1, d_model=8, num_heads=2, d_ff=16, max_length=8,
                      norm_first=True).save(...)

    with its logits on (source, target) and its greedy output (max_length=8) in the .npz.
    """
    expected = np.load(DATA / "transformer_0.1.0_outputs.npz")
    model = keras.models.load_model(DATA / "transformer_0.1.0.keras")
    assert isinstance(model, TransformerModel)
    inputs = {"encoder_inputs": expected["source"], "decoder_inputs": expected["target"]}
    # The same weights and graph; the last bits differ with the CPU's kernels (AVX2 vs AVX-512: 4.5e-7).
    np.testing.assert_allclose(_np(model(inputs)), expected["logits"], rtol=0, atol=1e-5)
    np.testing.assert_array_equal(
        _np(decoding.greedy_decode(model, expected["source"], max_length=8)), expected["greedy"]
    )
    # Built today with the same seed, the model is the same graph with the same weights.
    keras.utils.set_random_seed(0)
    today = kt.build_transformer(30, 30, num_layers=1, d_model=8, num_heads=2, d_ff=16, max_length=8, norm_first=True)

    def config(model):  # as saved (JSON: tuples are lists); Keras numbers mask ops per process
        return json.dumps([(layer.name, layer.get_config()) for layer in model.layers], sort_keys=True)

    assert config(today) == config(model)
    assert [w.path for w in today.weights] == [w.path for w in model.weights]


def test_encoder_and_decoder_layers_take_the_builder_options_and_run_the_same_passes(model):
    options = dict(
        num_layers=2,
        vocab_size=40,
        max_length=8,
        d_model=16,
        num_heads=2,
        d_ff=32,
        norm_first=model.encoder_norm is not None,
        attention_dropout=0.2,
        activation_dropout=0.1,
        kernel_initializer="he_normal",
    )
    encoder = kt.Encoder(**options)
    decoder = kt.Decoder(**dict(options, num_layers=3))
    config = encoder.get_config()
    assert (config["attention_dropout"], config["activation_dropout"]) == (0.2, 0.1)
    assert config["kernel_initializer"]["class_name"] == "HeNormal"
    assert all(
        layer.attention_dropout == 0.2 and layer.activation_dropout == 0.1 for layer in encoder.stack + decoder.stack
    )
    assert kt.Encoder.from_config(config).get_config() == config
    # Given the model's weights, they compute what the model does.
    memory = model.encode(SOURCE)
    encoder(SOURCE)
    decoder(TARGET, memory)
    encoder.set_weights(
        [
            w
            for part in [model.encoder_embedding, *model.encoder_layers, model.encoder_norm]
            if part is not None
            for w in part.get_weights()
        ]
    )
    decoder.set_weights(
        [
            w
            for part in [model.decoder_embedding, *model.decoder_layers, model.decoder_norm]
            if part is not None
            for w in part.get_weights()
        ]
    )
    np.testing.assert_allclose(_np(encoder(SOURCE)), _np(memory), atol=1e-5)
    hidden = decoder(TARGET, memory, encoder_padding_mask=padding_mask(SOURCE))
    logits = _np(model({"encoder_inputs": SOURCE, "decoder_inputs": TARGET}))
    # The Decoder's final norm is the model's decoder_norm: only the projection is left.
    project = model.output_layer or functools.partial(model.decoder_embedding, reverse=True)
    np.testing.assert_allclose(_np(project(hidden)), logits, atol=1e-5)


def test_int8_quantization_keeps_the_logits_of_a_tied_model(monkeypatch):
    # The tied output projection reads the embedding matrix: of a quantized
    # embedding, its dequantized rows, not its int8 values.
    keras.utils.set_random_seed(5)
    options = dict(norm_first=True, share_embeddings=True, tie_output_embedding=True)
    model = kt.build_transformer(40, 40, **SIZES, **options)
    inputs = {"encoder_inputs": SOURCE, "decoder_inputs": TARGET}
    expected = _np(model(inputs))
    # Keras runs a full gc.collect() for every float kernel it replaces (33 here), to free device memory
    # sooner: in a test worker holding thousands of compiled programs that took a minute. Nothing to free here.
    monkeypatch.setattr(gc, "collect", lambda *args: 0)
    model.quantize("int8")
    monkeypatch.undo()
    error = np.abs(_np(model(inputs)) - expected).max()
    assert error < 0.05 * np.abs(expected).max()
    ids = decoding.greedy_decode(model, SOURCE, max_length=6)
    assert _np(ids).shape == (2, 6)
