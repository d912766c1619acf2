"""build_transformer: masks reach every attention, parameter count, saving, training."""

import pathlib
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_transformer as kt
from keras_transformer.presets import get_preset
from keras_transformer.training import compile_model

from conftest import TINY


@pytest.fixture(scope="module")
def model():
    keras.utils.set_random_seed(0)
    return kt.build_transformer(**TINY)


def _logits(model, source, target, training=False):
    inputs = {"encoder_inputs": np.asarray(source, "int32"), "decoder_inputs": np.asarray(target, "int32")}
    return keras.ops.convert_to_numpy(model(inputs, training=training))


def _dropout_state(model):
    return [v.numpy() for v in model.non_trainable_variables]


def _restore(model, state):
    for variable, value in zip(model.non_trainable_variables, state):
        variable.assign(value)


@pytest.mark.parametrize("training", [False, True])
def test_future_target_tokens_never_change_earlier_outputs(model, training):
    source = [[5, 6, 7, 8, 0]]
    target = np.array([[2, 9, 10, 11, 12, 13]])
    changed = target.copy()
    changed[0, 3:] = [40, 41, 42]
    state = _dropout_state(model)
    first = _logits(model, source, target, training)
    _restore(model, state)
    second = _logits(model, source, changed, training)
    np.testing.assert_allclose(first[:, :3], second[:, :3], rtol=1e-5, atol=1e-5)
    assert not np.allclose(first[:, 3:], second[:, 3:])
    if training:  # dropout really is active: a new draw changes the outputs
        assert not np.allclose(_logits(model, source, target, True), first)


def test_appended_padding_changes_nothing(model):
    target = [[2, 9, 10, 11]]
    base = _logits(model, [[5, 6, 7]], target)
    padded_source = _logits(model, [[5, 6, 7, 0, 0, 0, 0]], target)
    np.testing.assert_allclose(padded_source, base, rtol=1e-5, atol=1e-5)
    padded_target = _logits(model, [[5, 6, 7]], [[2, 9, 10, 11, 0, 0]])
    np.testing.assert_allclose(padded_target[:, :4], base, rtol=1e-5, atol=1e-5)


def _expected_parameters(v_src, v_tgt, n, d, d_ff, share, tie, norm_first=False):
    """Closed form: embeddings + N encoder layers + N decoder layers + output."""
    attention = 4 * (d * d + d)  # Q, K, V, output projections with biases
    ffn = d * d_ff + d_ff + d_ff * d + d
    norm = 2 * d  # gamma and beta
    encoder_layer = attention + ffn + 2 * norm
    decoder_layer = 2 * attention + ffn + 3 * norm
    embeddings = v_src * d if share else (v_src + v_tgt) * d
    output = 0 if tie else d * v_tgt + v_tgt
    final_norms = 2 * norm if norm_first else 0
    return embeddings + n * (encoder_layer + decoder_layer) + output + final_norms


def test_parameter_count_of_the_paper_base_model():
    base = kt.build_transformer(37000, 37000, share_embeddings=True, tie_output_embedding=True)
    expected = _expected_parameters(37000, 37000, 6, 512, 2048, share=True, tie=True)
    assert base.count_params() == expected
    assert 62e6 < expected < 64e6  # "about 63M"


@pytest.mark.parametrize("share,tie,norm_first", [(False, False, False), (True, False, True), (False, True, False)])
def test_parameter_count_of_other_configurations(share, tie, norm_first):
    v = 50
    small = kt.build_transformer(
        v,
        v,
        num_layers=2,
        d_model=16,
        num_heads=2,
        d_ff=24,
        share_embeddings=share,
        tie_output_embedding=tie,
        norm_first=norm_first,
    )
    assert small.count_params() == _expected_parameters(v, v, 2, 16, 24, share, tie, norm_first)


def test_bad_token_inputs_are_value_errors(model):
    good = np.ones((2, 4), "int32")
    with pytest.raises(ValueError, match=r"`encoder_inputs` must hold integer token ids.*float32"):
        model({"encoder_inputs": good.astype("float32"), "decoder_inputs": good})
    with pytest.raises(ValueError, match=r"`decoder_inputs` must have shape \(batch, length\).*\(2, 4, 1\)"):
        model({"encoder_inputs": good, "decoder_inputs": good[..., None]})
    with pytest.raises(ValueError, match=r"max_length`=24.*length=30"):
        model({"encoder_inputs": np.ones((2, 30), "int32"), "decoder_inputs": good})


def test_share_embeddings_needs_one_vocabulary():
    with pytest.raises(ValueError, match=r"source_vocab_size=10, target_vocab_size=12"):
        kt.build_transformer(10, 12, share_embeddings=True)


def test_keras_file_reloads_in_a_fresh_process_with_identical_outputs(model, tmp_path):
    inputs = {
        "encoder_inputs": np.array([[5, 6, 7, 0], [8, 9, 0, 0]], "int32"),
        "decoder_inputs": np.array([[2, 3, 4], [2, 5, 0]], "int32"),
    }
    model.compile(
        optimizer=keras.optimizers.Adam(kt.WarmupSchedule(32, 100)),
        loss=kt.MaskedSparseCategoricalCrossentropy(),
        metrics=[kt.MaskedAccuracy()],
    )
    path = tmp_path / "model.keras"
    model.save(path)
    np.savez(tmp_path / "inputs.npz", **inputs)
    script = f"""
import numpy as np, keras, keras_transformer
model = keras.models.load_model({str(path)!r})
inputs = dict(np.load({str(tmp_path / "inputs.npz")!r}))
np.save({str(tmp_path / "outputs.npy")!r}, keras.ops.convert_to_numpy(model(inputs)))
schedule = keras.saving.deserialize_keras_object(model.optimizer.get_config()["learning_rate"])
assert isinstance(schedule, keras_transformer.WarmupSchedule), schedule
assert schedule.get_config() == {{"d_model": 32, "warmup_steps": 100, "scale": 1.0, "cooldown": None}}
assert type(model).__name__ == "TransformerModel"
"""
    subprocess.run([sys.executable, "-c", script], check=True, cwd=pathlib.Path(__file__).parents[1])
    np.testing.assert_array_equal(
        np.load(tmp_path / "outputs.npy"),
        _logits(model, **{"source": inputs["encoder_inputs"], "target": inputs["decoder_inputs"]}),
    )


def _toy_dataset(batches=4, batch=8, length=6, vocab=64, seed=0):
    rng = np.random.default_rng(seed)
    source = rng.integers(4, vocab, size=(batches * batch, length)).astype("int32")
    source[:, -2:] = 0
    labels = np.concatenate([source[:, 1:], np.zeros((len(source), 1), "int32")], axis=1)
    decoder = np.concatenate([np.full((len(source), 1), 2, "int32"), labels[:, :-1]], axis=1)
    features = {"encoder_inputs": source, "decoder_inputs": decoder}
    return tf.data.Dataset.from_tensor_slices((features, labels)).batch(batch)


# mixed_float16 runs with the long checks (`-m slow`): the same trace count, another minute on 2 cores.
@pytest.mark.parametrize("policy", ["float32", pytest.param("mixed_float16", marks=pytest.mark.slow)])
def test_fit_with_xla_on_a_tf_data_dataset_traces_the_step_once(policy):
    keras.mixed_precision.set_global_policy(policy)
    keras.utils.set_random_seed(1)
    model = kt.build_transformer(**TINY)
    compile_model(model, get_preset("tiny").replace(warmup_steps=10))  # the paper's recipe, XLA
    traces = []
    train_step = model.train_step
    model.train_step = lambda data: traces.append(1) or train_step(data)  # runs once per trace
    history = model.fit(_toy_dataset(), epochs=3, verbose=0).history
    assert len(traces) == 1  # Adam's slots existed before it: no second trace
    assert np.isfinite(history["loss"]).all() and np.isfinite(history["accuracy"]).all()
    assert history["loss"][-1] < history["loss"][0]


@pytest.mark.slow  # compiles a training step: half a minute
def test_a_cooldown_set_after_compilation_reaches_the_compiled_step():
    keras.utils.set_random_seed(1)
    model = kt.build_transformer(**TINY)
    schedule = kt.WarmupSchedule(32, warmup_steps=10)
    model.compile(
        optimizer=keras.optimizers.Adam(schedule), loss=kt.MaskedSparseCategoricalCrossentropy(), jit_compile=True
    )
    traces = []
    train_step = model.train_step
    model.train_step = lambda data: traces.append(1) or train_step(data)  # runs once per trace
    model.fit(_toy_dataset(), epochs=1, verbose=0)  # compiles the step
    steps = int(model.optimizer.iterations.numpy())
    schedule.set_cooldown(0, steps)  # the rate is 0 from here on
    before = [variable.numpy().copy() for variable in model.trainable_weights]
    model.fit(_toy_dataset(), epochs=1, verbose=0)
    assert int(model.optimizer.iterations.numpy()) == 2 * steps
    assert len(traces) == 1  # compiled by hand, the optimizer was still built before the first trace
    for old, variable in zip(before, model.trainable_weights):
        np.testing.assert_array_equal(old, variable.numpy())


def _multi30k_pairs(shared_data_dir, count):
    root = shared_data_dir / "multi30k_task1"
    english = (root / "train.en").read_text(encoding="utf-8").splitlines()[:count]
    german = (root / "train.de").read_text(encoding="utf-8").splitlines()[:count]
    return english, german


@pytest.mark.slow  # trains to a loss: the training tests check the loss falls
def test_tiny_model_overfits_real_multi30k_pairs(shared_data_dir):
    english, german = _multi30k_pairs(shared_data_dir, 8)
    words = sorted({w for line in english + german for w in line.split()})
    ids = {w: i + 4 for i, w in enumerate(words)}  # 0 pad, 1 unk, 2 start, 3 end
    length = max(len(line.split()) for line in english + german) + 1

    def encode(line):
        tokens = [ids[w] for w in line.split()] + [3]
        return tokens + [0] * (length - len(tokens))

    source = np.array([encode(line) for line in english], "int32")
    labels = np.array([encode(line) for line in german], "int32")
    decoder = np.concatenate([np.full((len(labels), 1), 2, "int32"), labels[:, :-1]], axis=1)
    decoder[decoder == 3] = 0  # the end token is never an input
    keras.utils.set_random_seed(2)
    model = kt.build_transformer(
        len(ids) + 4,
        len(ids) + 4,
        num_layers=2,
        d_model=64,
        num_heads=4,
        d_ff=128,
        dropout=0.0,
        max_length=length,
        share_embeddings=True,
        tie_output_embedding=True,
    )
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=kt.MaskedSparseCategoricalCrossentropy(label_smoothing=0.0),
        metrics=[kt.MaskedAccuracy()],
        jit_compile=True,
    )
    history = model.fit(
        {"encoder_inputs": source, "decoder_inputs": decoder}, labels, batch_size=8, epochs=150, verbose=0
    ).history
    assert history["loss"][-1] < 0.05
    assert history["masked_accuracy"][-1] == 1.0
