"""`build_decoder_only` (GPT from the decoder's layers): its logits, its cache, and every search continuing prompts."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_transformer.config import ModelConfig
from keras_transformer.decoding import BeamSearch, GreedySearch, SamplingSearch, compile_search, decode
from keras_transformer.decoding.prompts import left_aligned
from keras_transformer.models import DecoderOnlyModel, build_decoder_only

END = 3
PROMPTS = [[5, 6, 7, 8], [9, 10], [11], [12, 13, 14, 15, 16, 17], []]


@pytest.fixture(scope="module")
def model():
    keras.utils.set_random_seed(3)
    model = build_decoder_only(40, num_layers=2, d_model=16, num_heads=2, d_ff=32, max_length=24, dropout=0.0)
    # Random weights repeat one token: a larger output scale makes the continuations vary.
    embeddings = model.decoder_embedding.embeddings
    embeddings.assign(embeddings * 8.0)
    return model


def padded(prompts, width=6):
    ids = np.zeros((len(prompts), width), "int32")
    for row, prompt in enumerate(prompts):
        ids[row, : len(prompt)] = prompt
    return ids


def greedy_alone(model, prompt, steps):
    """Greedy continuation from the whole model's logits, one forward pass per token (no cache)."""
    ids, out = list(prompt), []
    for _ in range(steps):
        logits = ops.convert_to_numpy(model(np.array([ids], "int32")))[0, -1]
        logits[[0, 2]] = -np.inf  # PAD and START are never generated
        out.append(int(logits.argmax()))
        ids.append(out[-1])
        if out[-1] == END:
            break
    return out


def test_the_config_records_gpt_2s_options(model):
    config = model.config
    assert (config.architecture, config.position_layout, config.activation) == ("decoder_only", "learned", "gelu_tanh")
    assert config.norm_first and config.tie_output_embedding and not config.scale_embeddings
    assert model.decoder_norm is not None and model.output_layer is None
    assert all(layer.self_attention.use_bias for layer in model.decoder_layers)


def test_a_saved_model_loads_with_its_config_and_logits(model, tmp_path):
    model.save(tmp_path / "model.keras")
    loaded = keras.saving.load_model(tmp_path / "model.keras")
    ids = np.array([[5, 6, 7]], "int32")
    assert isinstance(loaded, DecoderOnlyModel) and loaded.config == model.config
    np.testing.assert_allclose(ops.convert_to_numpy(loaded(ids)), ops.convert_to_numpy(model(ids)), atol=1e-6)


def test_the_cached_step_gives_the_models_logits(model):
    ids = np.array([[5, 6, 7, 8, 9]], "int32")
    full = ops.convert_to_numpy(model(ids))
    caches, steps = model.empty_self_attention_caches(1, 24), []
    for index in range(ids.shape[1]):
        logits, caches = model.decoder_step(ops.convert_to_tensor(ids[:, index : index + 1]), index, caches)
        steps.append(ops.convert_to_numpy(logits)[:, 0])
    np.testing.assert_allclose(np.stack(steps, 1), full, atol=1e-5)


def test_padding_after_a_prompt_changes_none_of_its_logits(model):
    ids = np.array([[5, 6, 7, 0, 0]], "int32")
    np.testing.assert_allclose(
        ops.convert_to_numpy(model(ids))[:, :3], ops.convert_to_numpy(model(ids[:, :3])), atol=1e-5
    )


def test_left_aligned_moves_each_prompt_to_the_end_of_its_row():
    ids, offsets = left_aligned(ops.convert_to_tensor(padded(PROMPTS)), 0)
    ids = ops.convert_to_numpy(ids)
    for row, prompt in enumerate(PROMPTS):
        assert ids[row, 6 - len(prompt) :].tolist() == prompt and not ids[row, : 6 - len(prompt)].any()
    assert ops.convert_to_numpy(offsets).tolist() == [6 - len(p) for p in PROMPTS]


def test_greedy_continues_every_prompt_of_a_batch_as_the_model_alone_does(model):
    result = decode(model, padded(PROMPTS), GreedySearch(alpha=0.0), max_length=8)
    ids = ops.convert_to_numpy(result.ids)[:, 0]
    continuations = [greedy_alone(model, prompt, 8) for prompt in PROMPTS[:-1]]
    assert len({tuple(c) for c in continuations}) > 1, "the prompts should continue differently"
    for row, expected in enumerate(continuations):
        assert ids[row, : len(expected)].tolist() == expected
    assert not ids[-1].any()  # the empty prompt: nothing


@pytest.mark.parametrize("search", [BeamSearch(3, alpha=1.0), SamplingSearch(temperature=1.0, seed=7)])
def test_a_batch_of_prompts_decodes_as_each_prompt_alone(model, search):
    batch = decode(model, padded(PROMPTS[:4]), search, max_length=6)
    for row, prompt in enumerate(PROMPTS[:4]):
        alone = decode(model, np.array([prompt], "int32"), search, max_length=6)
        if isinstance(search, BeamSearch):
            np.testing.assert_array_equal(ops.convert_to_numpy(alone.ids)[0], ops.convert_to_numpy(batch.ids)[row])
            np.testing.assert_allclose(ops.convert_to_numpy(alone.scores)[0], batch.scores[row], atol=1e-4)
        else:  # the noise is drawn per batch: the first row alone draws what the batch's first row does
            assert row or np.array_equal(ops.convert_to_numpy(alone.ids)[0], ops.convert_to_numpy(batch.ids)[0])


def test_the_compiled_beam_search_finds_what_the_loop_finds(model):
    ids = ops.convert_to_tensor(padded(PROMPTS))
    compiled = compile_search(model, BeamSearch(4, alpha=0.6), max_length=8)(ids)
    looped = decode(model, ids, BeamSearch(4, alpha=0.6), max_length=8)
    np.testing.assert_array_equal(ops.convert_to_numpy(compiled.ids), ops.convert_to_numpy(looped.ids))


def test_a_prompt_and_its_continuation_must_fit_the_positions(model):
    with pytest.raises(ValueError, match="needs 28 positions; the model has max_length=24"):
        decode(model, padded(PROMPTS, width=9), GreedySearch(), max_length=20)


def test_a_model_without_an_encoder_says_so(model):
    with pytest.raises(ValueError, match="no encoder"):
        model.encode(np.array([[5]], "int32"))
    with pytest.raises(ValueError, match="built by `build_decoder_only`"):
        from keras_transformer.models import build_transformer

        build_transformer(config=model.config)


def test_one_id_may_pad_start_and_end_a_decoder_only_model_as_gpt_2s_does():
    config = ModelConfig(source_vocab_size=9, target_vocab_size=9, architecture="decoder_only")
    config.replace(pad_id=8, start_id=8, end_id=8, d_model=8, num_heads=2).check()
    with pytest.raises(ValueError, match="end_id"):
        config.replace(architecture="encoder_decoder", pad_id=8, start_id=8, end_id=8).check()


def test_a_row_of_padding_is_the_prompt_of_the_start_id_where_one_id_is_both_as_in_gpt_2(model):
    gpt = build_decoder_only(config=model.config.replace(pad_id=31, start_id=31, end_id=31))
    gpt.set_weights(model.get_weights())
    rows = np.array([[31, 31, 31, 31], [7, 8, 31, 31]], "int32")  # GPT-2's empty text (31 goes on: 37), a prompt
    ids = ops.convert_to_numpy(decode(gpt, rows, GreedySearch(alpha=0.0), max_length=4).ids)[:, 0]
    for row, prompt in zip(ids, ([31], [7, 8])):
        expected = ops.convert_to_numpy(gpt(np.array([prompt], "int32")))[0, -1]  # nothing banned: START is END
        assert int(row[0]) == int(expected.argmax())  # the first token continues the prompt the row holds
    ids = ops.convert_to_numpy(decode(model, padded([[]]), GreedySearch(alpha=0.0), max_length=4).ids)
    assert (ids == 0).all()  # where padding is no start id, an empty row still decodes to nothing


def test_int8_quantization_keeps_the_logits_and_the_searches_run(monkeypatch):
    keras.utils.set_random_seed(6)
    model = build_decoder_only(40, num_layers=1, d_model=16, num_heads=2, d_ff=32, max_length=24, dropout=0.0)
    ids = padded(PROMPTS[:3])
    expected = ops.convert_to_numpy(model(ids))
    monkeypatch.setattr("gc.collect", lambda *args: 0)  # Keras collects per replaced kernel: nothing to free here
    model.quantize("int8")
    monkeypatch.undo()
    error = np.abs(ops.convert_to_numpy(model(ids)) - expected).max()
    assert error < 0.05 * np.abs(expected).max()
    result = decode(model, ids, BeamSearch(2, alpha=1.0), max_length=5)
    assert tuple(result.ids.shape) == (3, 2, 5)
