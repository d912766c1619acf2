"""The bf16 training route: picked from the CPU's flags, and a hybrid step that trains with finite loss."""

import os

import keras
import numpy as np
import pytest

from keras_transformer.errors import KerasTransformerWarning
from keras_transformer.models import build_transformer
from keras_transformer.presets import get_preset
from keras_transformer.training import compile_model, precision


def _cpuinfo(tmp_path, flags):
    path = tmp_path / "cpuinfo"
    path.write_text(f"processor\t: 0\nflags\t\t: fpu sse2 avx512f {flags}\n")
    return str(path)


@pytest.fixture
def bf16_policy():
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    yield
    keras.mixed_precision.set_global_policy("float32")


def test_bf16_units_are_read_from_cpuinfo(tmp_path):
    assert precision.cpu_bf16_units(_cpuinfo(tmp_path, "amx_bf16 avx512_bf16")) == ("amx_bf16", "avx512_bf16")
    assert precision.cpu_bf16_units(_cpuinfo(tmp_path, "avx2")) == ()
    assert precision.cpu_bf16_units(str(tmp_path / "missing")) == ()


def test_bf16_route_is_hybrid_with_bf16_units_and_xla_with_a_warning_without(tmp_path):
    assert precision.training_route("mixed_bfloat16", _cpuinfo(tmp_path, "avx512_bf16")) == "hybrid"
    # One line on the command line (a KerasTransformerWarning), saying what this run does.
    with pytest.warns(KerasTransformerWarning, match="no bf16 units.*this run trains in bfloat16 through XLA"):
        assert precision.training_route("mixed_bfloat16", _cpuinfo(tmp_path, "avx2")) == "xla"
    assert precision.training_route("mixed_float16", _cpuinfo(tmp_path, "avx512_bf16")) == "xla"
    assert precision.training_route(None, _cpuinfo(tmp_path, "avx512_bf16")) == "xla"


def test_autoclustering_flags_keep_the_users_own(monkeypatch):
    monkeypatch.setenv("TF_XLA_FLAGS", "--tf_xla_auto_jit=1 --tf_xla_min_cluster_size=4")
    flags = precision.enable_elementwise_autoclustering().split()
    assert "--tf_xla_auto_jit=1" in flags and "--tf_xla_auto_jit=2" not in flags
    assert "--tf_xla_min_cluster_size=4" in flags and "--tf_xla_ops_to_cluster=FUSIBLE" in flags
    assert os.environ["TF_XLA_FLAGS"] == " ".join(flags)


def test_hybrid_bf16_step_has_finite_loss_on_fully_padded_rows(bf16_policy, monkeypatch):
    monkeypatch.setattr(precision, "cpu_bf16_units", lambda *args: ("avx512_bf16",))  # the route on any CPU
    preset = get_preset("tiny")
    keras.utils.set_random_seed(0)
    model = build_transformer(config=preset.model_config(64))
    compile_model(model, preset)
    assert model.jit_compile is False  # the model runs TensorFlow's bf16 kernels, the loss XLA
    assert model.compute_dtype == "bfloat16"
    rng = np.random.default_rng(0)
    source = rng.integers(1, 64, (4, 8)).astype("int32")
    target = rng.integers(1, 64, (4, 9)).astype("int32")
    source[1:3] = 0  # two rows of padding only, in source and target
    target[1:3] = 0
    before = [w.numpy().copy() for w in model.trainable_weights]
    logs = model.train_on_batch(
        {"encoder_inputs": source, "decoder_inputs": target[:, :-1]}, target[:, 1:], return_dict=True
    )
    assert np.isfinite(logs["loss"]) and logs["loss"] > 0
    after = model.trainable_weights
    assert all(np.isfinite(w.numpy()).all() for w in after)
    assert any(not np.array_equal(b, a.numpy()) for b, a in zip(before, after))
