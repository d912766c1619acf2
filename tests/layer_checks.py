"""The standard checks every public layer must pass (design.md, style item 8).

`run_layer_checks` verifies: config round trip, eager and symbolic calls that
agree, `fit` with `jit_compile=True`, a `mixed_float16` call with finite
output, and a `.keras` save/reload with identical outputs.
"""

import keras
import numpy as np


def _outputs(layer_or_model, inputs, **kwargs):
    outputs = layer_or_model(*inputs, **kwargs) if isinstance(inputs, list) else layer_or_model(inputs, **kwargs)
    return keras.ops.convert_to_numpy(outputs)


def run_layer_checks(layer_class, init_kwargs, inputs, tmp_path, call_kwargs=None):
    """Runs the standard layer checks; `inputs` is a list of NumPy arrays."""
    call_kwargs = call_kwargs or {}

    # Config round trip: every argument stored under its own name.
    layer = layer_class(**init_kwargs)
    config = layer.get_config()
    for name, value in init_kwargs.items():
        assert name in config, f"{layer_class.__name__}.get_config() lacks {name!r}"
        if not callable(value):
            assert config[name] == value, (name, config[name], value)
    clone = layer_class.from_config(config)
    assert clone.get_config() == config

    # Eager call, then the same layer in a functional model.
    eager = _outputs(layer, [keras.ops.convert_to_tensor(x) for x in inputs], **call_kwargs)
    assert np.isfinite(eager).all()
    symbolic_inputs = [keras.Input(x.shape[1:], dtype=str(x.dtype), name=f"input_{i}") for i, x in enumerate(inputs)]
    outputs = layer(*symbolic_inputs, **call_kwargs)
    model = keras.Model(symbolic_inputs, outputs)
    np.testing.assert_allclose(model.predict(inputs, verbose=0), eager, rtol=1e-5, atol=1e-5)

    # .keras save and reload gives identical outputs.
    path = tmp_path / f"{layer_class.__name__}.keras"
    model.save(path)
    reloaded = keras.models.load_model(path)
    np.testing.assert_array_equal(reloaded.predict(inputs, verbose=0), model.predict(inputs, verbose=0))

    # fit with XLA.
    model.compile(optimizer="adam", loss="mse", jit_compile=True)
    target = np.zeros_like(eager)
    history = model.fit(inputs, target, batch_size=len(inputs[0]), epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()

    # mixed_float16: computes in float16, stays finite.
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        half = layer_class(**init_kwargs)
        result = half(*[keras.ops.convert_to_tensor(x) for x in inputs], **call_kwargs)
        if "float" in str(inputs[0].dtype):
            assert keras.backend.standardize_dtype(result.dtype) == "float16"
        assert np.isfinite(keras.ops.convert_to_numpy(keras.ops.cast(result, "float32"))).all()
    finally:
        keras.mixed_precision.set_global_policy("float32")
