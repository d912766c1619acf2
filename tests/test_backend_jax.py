"""The optional JAX lane: the layers' and the model's core checks on Keras's JAX backend.

The layers are written with `keras.ops`, so they should run unchanged with
`KERAS_BACKEND=jax`. Keras fixes its backend at import, so the checks run in a
subprocess: this file, run as a script (`python tests/test_backend_jax.py`),
executes every check on the backend it finds and prints one JSON line of
results; the pytest side starts it with `KERAS_BACKEND=jax` and reports each
check as its own test.

The subprocess uses this interpreter when it can import `jax`, else the one in
`KERAS_TRANSFORMER_JAX_PYTHON`; without either the tests are skipped. `.ci/jax`
builds a virtual environment with the `jax` extra and runs this lane. The
checks run on the CPU unless `JAX_PLATFORMS` names another platform: on a
machine with an NVIDIA GPU and jax's CUDA plugin,
`KERAS_BACKEND=jax JAX_PLATFORMS=cuda python tests/test_backend_jax.py`.
"""

import atexit
import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import traceback

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
CHECKS = {}


def check(function):
    CHECKS[function.__name__] = function
    return function


# --------------------------------------------------------------------------
# The checks (run inside the JAX subprocess; each raises on failure)
# --------------------------------------------------------------------------


def _np(x):
    import keras

    return keras.ops.convert_to_numpy(keras.ops.cast(x, "float32"))


def _replayed(layer, first, second):
    """Both calls with the same dropout randomness (the seed state restored)."""
    import keras

    seeds = [v for v in layer.non_trainable_variables if "seed_generator" in v.path]
    assert seeds
    saved = [keras.ops.convert_to_numpy(v) for v in seeds]
    a = first()
    for variable, value in zip(seeds, saved):
        variable.assign(value)
    return a, second()


@check
def backend_is_jax():
    import keras

    assert keras.backend.backend() == "jax", keras.backend.backend()


@check
def attention_known_values():
    import numpy as np

    import keras_transformer as kt

    k = [[10.0, 0, 0], [0, 10, 0], [0, 0, 10], [0, 0, 10]]
    v = [[1.0, 0], [10, 0], [100, 5], [1000, 6]]
    out, weights = kt.scaled_dot_product_attention([[0.0, 10, 0], [0, 0, 10]], k, v)
    np.testing.assert_allclose(_np(weights), [[0, 1, 0, 0], [0, 0, 0.5, 0.5]], atol=1e-6)
    np.testing.assert_allclose(_np(out), [[10, 0], [550, 5.5]], rtol=1e-5, atol=1e-4)


@check
def attention_matches_keras():
    import keras
    import numpy as np

    import keras_transformer as kt

    rng = np.random.default_rng(0)
    q, v = rng.normal(size=(2, 5, 16)).astype("float32"), rng.normal(size=(2, 7, 16)).astype("float32")
    ours, ref = kt.MultiHeadAttention(16, 4), keras.layers.MultiHeadAttention(4, 4)
    ours(q, v), ref(q, v)
    ours.set_weights(ref.get_weights())
    mask = rng.random((2, 5, 7)) < 0.6
    mask[..., 0] = True
    for kwargs in ({}, {"attention_mask": mask}):
        out, scores = ours(q, v, return_attention_scores=True, **kwargs)
        ref_out, ref_scores = ref(q, v, return_attention_scores=True, **kwargs)
        np.testing.assert_allclose(_np(out), _np(ref_out), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(_np(scores), _np(ref_scores), rtol=1e-5, atol=1e-5)
    ours, ref = kt.MultiHeadAttention(16, 4), keras.layers.MultiHeadAttention(4, 4)
    ours(q, q), ref(q, q)
    ours.set_weights(ref.get_weights())
    np.testing.assert_allclose(
        _np(ours(q, q, use_causal_mask=True)), _np(ref(q, q, use_causal_mask=True)), rtol=1e-5, atol=1e-5
    )


@check
def blocked_keys_get_zero_weight():
    import numpy as np

    import keras_transformer as kt

    rng = np.random.default_rng(1)
    q, v = rng.normal(size=(2, 4, 8)).astype("float32"), rng.normal(size=(2, 6, 8)).astype("float32")
    mask = rng.random((2, 4, 6)) < 0.5
    mask[1, 2] = False  # a fully blocked query
    out, weights = kt.MultiHeadAttention(8, 2, dropout=0.5)(
        q, v, attention_mask=mask, return_attention_scores=True, training=True
    )
    weights = _np(weights)
    assert np.isfinite(_np(out)).all() and np.isfinite(weights).all()
    assert (weights[np.broadcast_to(~mask[:, None], weights.shape)] == 0).all()
    assert (weights[1, :, 2] == 0).all()


@check
def decoder_layer_is_causal_under_dropout():
    import numpy as np

    import keras_transformer as kt

    rng = np.random.default_rng(2)
    x, memory = rng.normal(size=(2, 6, 8)).astype("float32"), rng.normal(size=(2, 5, 8)).astype("float32")
    changed = x.copy()
    changed[:, 3:] = rng.normal(size=changed[:, 3:].shape)
    layer = kt.DecoderLayer(8, 2, 16, dropout=0.3, attention_dropout=0.3, activation_dropout=0.3)
    layer(x, memory)
    out, out_changed = _replayed(
        layer, lambda: layer(x, memory, training=True), lambda: layer(changed, memory, training=True)
    )
    np.testing.assert_array_equal(_np(out)[:, :3], _np(out_changed)[:, :3])
    assert not np.allclose(_np(out), _np(layer(x, memory, training=False)))  # dropout was on


@check
def encoder_layer_ignores_padding():
    import numpy as np

    import keras_transformer as kt

    rng = np.random.default_rng(3)
    x = rng.normal(size=(3, 5, 8)).astype("float32")
    real = np.arange(5)[None] < np.array([[5], [2], [0]])
    changed = np.where(real[..., None], x, 50 * rng.normal(size=x.shape)).astype("float32")
    for norm_first in (False, True):
        layer = kt.EncoderLayer(8, 2, 16, norm_first=norm_first)
        out, scores = layer(x, padding_mask=real, return_attention_scores=True)
        out_changed = layer(changed, padding_mask=real)
        assert np.isfinite(_np(out)).all()
        np.testing.assert_allclose(_np(out)[real], _np(out_changed)[real], rtol=1e-5, atol=1e-5)
        scores = _np(scores)
        assert (scores[np.broadcast_to(~real[:, None, None, :], scores.shape)] == 0).all()


@check
def cached_decoding_matches_full_pass():
    import keras
    import numpy as np

    import keras_transformer as kt

    rng = np.random.default_rng(4)
    length, d_model, heads = 5, 8, 2
    x, memory = rng.normal(size=(2, length, d_model)).astype("float32"), rng.normal(size=(2, 4, 8)).astype("float32")
    layer = kt.DecoderLayer(d_model, heads, 16)
    full = _np(layer(x, memory))
    cache = tuple(keras.ops.zeros((2, heads, length, d_model // heads)) for _ in "kv")
    cross_cache = layer.compute_cross_attention_cache(memory)
    steps = []
    for i in range(length):
        out, cache, cross_cache = layer(
            x[:, i : i + 1],
            self_attention_cache=cache,
            self_attention_cache_update_index=i,
            cross_attention_cache=cross_cache,
        )
        steps.append(_np(out))
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, rtol=1e-5, atol=1e-5)


@check
def stacks_carry_the_padding_mask():
    import numpy as np

    import keras_transformer as kt

    encoder = kt.Encoder(2, vocab_size=20, max_length=8, d_model=8, num_heads=2, d_ff=16)
    decoder = kt.Decoder(2, vocab_size=20, max_length=8, d_model=8, num_heads=2, d_ff=16)
    source = np.array([[4, 5, 6, 0], [7, 0, 0, 0]], "int32")
    target = np.array([[1, 3, 0], [1, 0, 0]], "int32")
    out = decoder(target, encoder(source))
    padded = decoder(target, encoder(np.pad(source, ((0, 0), (0, 3)))))
    np.testing.assert_allclose(_np(out), _np(padded), rtol=1e-5, atol=1e-5)


@check
def wrong_shapes_are_value_errors_naming_them():
    """Static shape checks work on JAX arrays and under `jax.jit` tracing (issue #55)."""
    import jax
    import numpy as np

    import keras_transformer as kt

    hidden, memory = np.ones((2, 4, 16), "float32"), np.ones((2, 3, 16), "float32")
    layer = kt.DecoderLayer(d_model=16, num_heads=4, d_ff=32)
    layer(hidden, memory)
    jitted = jax.jit(lambda x, m, mask: layer(x, m, encoder_padding_mask=mask))
    jitted(hidden, memory, np.ones((2, 3), bool))
    cases = [
        (lambda: jitted(hidden, memory, np.ones((2, 4), bool)), "`encoder_padding_mask` must have shape"),
        (lambda: layer(hidden, memory, decoder_padding_mask=np.ones((4,), bool)), "`decoder_padding_mask` must"),
        (lambda: kt.EncoderLayer(16, 4, 32)(np.ones((2, 16), "float32")), "`inputs` must have shape"),
        (lambda: kt.Encoder(1, 10, 8, 16, 4, 32)(np.ones((4,), "int32")), "`token_ids` must have shape"),
        (lambda: kt.causal_mask(-3), "`length` must be a positive int"),
    ]
    for call, message in cases:
        try:
            call()
        except ValueError as error:
            assert message in str(error), str(error)
        else:
            raise AssertionError(f"no ValueError: {message}")


def _tiny_transformer(**overrides):
    import keras_transformer as kt

    args = dict(
        source_vocab_size=24,
        target_vocab_size=24,
        num_layers=1,
        d_model=16,
        num_heads=2,
        d_ff=32,
        dropout=0.1,
        max_length=10,
    )
    args.update(overrides)
    return kt.build_transformer(**args)


def _batch():
    import numpy as np

    rng = np.random.default_rng(5)
    source = rng.integers(1, 24, size=(8, 7)).astype("int32")
    target = rng.integers(1, 24, size=(8, 6)).astype("int32")
    source[::2, 4:] = 0
    target[1::2, 3:] = 0
    decoder_inputs = np.concatenate([np.full((8, 1), 2, "int32"), target[:, :-1]], axis=1)
    return {"encoder_inputs": source, "decoder_inputs": decoder_inputs}, target


@check
def transformer_fits_with_xla_and_is_deterministic():
    import keras
    import numpy as np

    import keras_transformer as kt

    def run(seed):
        keras.utils.set_random_seed(seed)
        model = _tiny_transformer()
        model.compile(
            optimizer=keras.optimizers.Adam(kt.WarmupSchedule(16, warmup_steps=4)),
            loss=kt.MaskedSparseCategoricalCrossentropy(),
            metrics=[kt.MaskedAccuracy()],
            jit_compile=True,
        )
        inputs, labels = _batch()
        history = model.fit(inputs, labels, batch_size=4, epochs=2, verbose=0)
        return history.history["loss"]

    first, again = run(3), run(3)
    assert np.isfinite(first).all() and first[-1] != first[0]
    np.testing.assert_array_equal(first, again)


@check
def cooldown_to_end_reaches_the_traced_step():
    import keras
    import numpy as np

    import keras_transformer as kt
    from keras_transformer.training.callbacks import CooldownToEnd

    model = _tiny_transformer()
    schedule = kt.WarmupSchedule(16, warmup_steps=4)
    model.compile(
        optimizer=keras.optimizers.Adam(schedule), loss=kt.MaskedSparseCategoricalCrossentropy(), jit_compile=True
    )
    inputs, labels = _batch()
    # Epoch 2 is the cooldown, to end at step 4: later steps have a rate of 0.
    model.fit(inputs, labels, batch_size=4, epochs=2, verbose=0, callbacks=[CooldownToEnd(schedule, 0.5, epochs=2)])
    assert schedule.cooldown == (2, 4), schedule.cooldown
    # fit reuses the step the callback traced again: with the cooldown over, the weights stay.
    before = [keras.ops.convert_to_numpy(v) for v in model.trainable_weights]
    model.fit(inputs, labels, batch_size=4, epochs=1, verbose=0)
    for old, variable in zip(before, model.trainable_weights):
        np.testing.assert_array_equal(old, keras.ops.convert_to_numpy(variable))


@check
def transformer_saves_and_reloads():
    import tempfile

    import keras
    import numpy as np

    model = _tiny_transformer(norm_first=True, tie_output_embedding=True)
    inputs, _ = _batch()
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "model.keras")
        model.save(path)
        reloaded = keras.models.load_model(path)
    np.testing.assert_array_equal(_np(model(inputs)), _np(reloaded(inputs)))


@check
def transformer_mixed_precision():
    import keras
    import numpy as np

    inputs, _ = _batch()
    for policy in ("mixed_float16", "mixed_bfloat16"):
        keras.mixed_precision.set_global_policy(policy)
        try:
            logits = _tiny_transformer()(inputs, training=True)
            assert keras.backend.standardize_dtype(logits.dtype) == policy.split("_")[1]
            assert np.isfinite(_np(logits)).all()
        finally:
            keras.mixed_precision.set_global_policy("float32")


@check
def transformer_decodes_through_its_interface():
    import keras
    import numpy as np

    from keras_transformer import decoding
    from keras_transformer.plotting import attention_maps

    model = _tiny_transformer(dropout=0.0)
    source = np.array([[5, 6, 7, 0], [9, 4, 0, 0]], "int32")
    greedy = _np(decoding.greedy_decode(model, source, max_length=6))
    uncached = decoding.decode(model, source, decoding.GreedySearch(), max_length=6, cached=False)
    np.testing.assert_array_equal(_np(uncached.best().ids), greedy)
    beam = decoding.compile_search(model, decoding.BeamSearch(3), max_length=6)  # jax.jit
    assert _np(beam(keras.ops.convert_to_tensor(source)).best().ids).shape == (2, 6)
    weights = attention_maps.attention_weights(model, source, [[2, 11, 12], [2, 13, 0]])
    assert weights["decoder_cross"][0].shape == (2, 2, 3, 4)


@check
def cached_greedy_starts_from_an_id_shared_with_padding():
    """Marian starts the decoder from its padding id: the cached step must not mask START as padding."""
    import numpy as np

    import keras_transformer as kt
    from keras_transformer import decoding
    from keras_transformer.config import ModelConfig

    config = ModelConfig(
        source_vocab_size=24,
        target_vocab_size=24,
        num_layers=1,
        d_model=16,
        num_heads=2,
        d_ff=32,
        dropout=0.0,
        max_length=10,
        pad_id=6,
        start_id=6,
        end_id=1,
    )
    model = kt.build_transformer(config=config)
    source = np.array([[5, 7, 8, 1], [9, 4, 1, 6]], "int32")
    search = decoding.GreedySearch(**config.special_ids())
    cached = decoding.decode(model, source, search, max_length=6).best()
    uncached = decoding.decode(model, source, search, max_length=6, cached=False).best()
    np.testing.assert_array_equal(_np(cached.ids), _np(uncached.ids))
    np.testing.assert_allclose(_np(cached.scores), _np(uncached.scores), rtol=1e-5, atol=1e-5)


@check
def decoder_only_continues_prompts_as_its_forward_pass():
    import keras
    import numpy as np

    from keras_transformer import build_decoder_only, decoding

    keras.utils.set_random_seed(5)
    model = build_decoder_only(40, num_layers=1, d_model=16, num_heads=2, d_ff=32, max_length=16, dropout=0.0)
    prompts = np.array([[5, 6, 7], [8, 0, 0]], "int32")
    ids = _np(decoding.decode(model, prompts, decoding.GreedySearch(), max_length=4).best().ids).astype(int)
    for row, prompt in enumerate(([5, 6, 7], [8])):
        tokens = list(prompt)
        while len(tokens) < len(prompt) + 4 and tokens[-1] != 3:  # until END (3) or 4 new tokens
            logits = _np(model(np.array([tokens], "int32")))[0, -1]
            logits[[0, 2]] = -np.inf  # PAD and START are never generated
            tokens.append(int(logits.argmax()))
        continuation = tokens[len(prompt) :]
        assert ids[row, : len(continuation)].tolist() == continuation, (row, ids[row], continuation)
    beam = decoding.compile_search(model, decoding.BeamSearch(3), max_length=4)  # jax.jit
    assert _np(beam(keras.ops.convert_to_tensor(prompts)).best().ids).shape == (2, 4)


@check
def encoder_only_saves_and_reloads():
    import keras
    import numpy as np

    from keras_transformer import build_encoder_only

    model = build_encoder_only(60, num_layers=1, d_model=16, num_heads=2, d_ff=32, max_length=16, start_id=2, end_id=3)
    ids = np.array([[2, 7, 9, 3, 0]], "int32")
    path = pathlib.Path(tempfile.mkdtemp()) / "bert.keras"
    model.save(path)
    np.testing.assert_allclose(_np(keras.saving.load_model(path)(ids)), _np(model(ids)), atol=1e-6)


@check
def beam_candidates_equal_a_full_top_k():
    import keras
    import numpy as np

    from keras_transformer.decoding.beam_search import best_candidates

    rng = np.random.default_rng(0)
    logits = np.round(rng.normal(size=(6, 4, 1000)), 1).astype("float32")  # equal scores too
    log_probs = np.full((6, 4), -1.0, "float32")
    log_probs[0, 1:] = -np.inf
    shifted = logits - logits.max(-1, keepdims=True)
    scores = (log_probs[:, :, None] + shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))).reshape(6, -1)
    expected = np.argsort(-scores, axis=-1, kind="stable")[:, :8]
    got_scores, got = best_candidates(keras.ops.convert_to_tensor(logits.reshape(24, 1000)), log_probs, 8)
    np.testing.assert_array_equal(_np(got), expected)
    np.testing.assert_allclose(_np(got_scores), np.take_along_axis(scores, expected, 1), atol=1e-5)


@check
def adam_updates_equal_keras_adam():
    import keras
    import numpy as np

    import keras_transformer as kt

    rng = np.random.default_rng(6)
    start = [rng.normal(size=shape).astype("float32") for shape in ((3, 4), (4,))]
    gradients = [[rng.normal(size=w.shape).astype("float32") for w in start] for _ in range(3)]
    results = []
    for optimizer in (
        kt.Adam(kt.WarmupSchedule(16, 2), beta_2=0.98),
        keras.optimizers.Adam(kt.WarmupSchedule(16, 2), beta_2=0.98),
    ):
        weights = [keras.Variable(w) for w in start]
        for step in gradients:
            optimizer.apply([keras.ops.convert_to_tensor(g) for g in step], weights)
        results.append([_np(w) for w in weights])
    for ours, theirs, initial in zip(*results, start):
        assert not np.array_equal(ours, initial)
        np.testing.assert_array_equal(ours, theirs)


@check
def keras_file_saved_by_0_1_0_loads():
    import keras
    import numpy as np

    from keras_transformer import decoding

    expected = np.load(REPO / "tests" / "data" / "transformer_0.1.0_outputs.npz")
    model = keras.models.load_model(REPO / "tests" / "data" / "transformer_0.1.0.keras")
    logits = model({"encoder_inputs": expected["source"], "decoder_inputs": expected["target"]})
    np.testing.assert_allclose(_np(logits), expected["logits"], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(
        _np(decoding.greedy_decode(model, expected["source"], max_length=8)), expected["greedy"]
    )


def run_checks():
    """Runs every check in this process; returns {name: "ok" or the traceback}.

    Float32 matmuls run at full precision: on a GPU, JAX's default lets them
    round through TensorFloat-32 (about 3 significant digits; cached decoding
    then differs from the full pass by 1e-3), and the checks that compare two
    computations to 1e-5 would measure that rounding, not the layers. And a
    GPU runs deterministic ops, as a user who wants the same loss curve
    twice must ask: its scatter-adds (the embedding's gradient) otherwise
    add in any order, and two same-seed fits differed by 5e-7.
    """
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_gpu_deterministic_ops=true".strip()
    import jax

    jax.config.update("jax_default_matmul_precision", "highest")
    results = {}
    for name, function in CHECKS.items():
        try:
            function()
            results[name] = "ok"
        except Exception:  # noqa: BLE001 (reported, not swallowed)
            results[name] = traceback.format_exc()
    return results


# --------------------------------------------------------------------------
# The pytest side
# --------------------------------------------------------------------------


def _jax_python():
    if importlib.util.find_spec("jax") is not None:
        return sys.executable
    return os.environ.get("KERAS_TRANSFORMER_JAX_PYTHON")


_STARTED = []


def start_jax_checks():
    """Starts the JAX subprocess (once); `None` where no Python with jax is found.

    The conftest calls this as soon as these tests are selected, and puts them
    last in the session, so the subprocess (minutes of JAX compiles) runs
    beside the other tests; `jax_results` waits for it.
    """
    if not _STARTED:
        python = _jax_python()
        process = None
        if python:
            env = dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="3")
            env.setdefault("JAX_PLATFORMS", "cpu")
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
            outputs = [tempfile.TemporaryFile("w+") for _ in range(2)]  # not pipes: read once it ends
            process = subprocess.Popen([python, __file__], env=env, cwd=REPO, stdout=outputs[0], stderr=outputs[1])
            process.outputs = outputs
            atexit.register(_stop, process)  # a session that ends early does not leave it running
        _STARTED.append(process)
    return _STARTED[0]


def _read(stream):
    stream.seek(0)
    return stream.read()


def _stop(process):
    if process.poll() is None:
        process.kill()
        process.wait()


@pytest.fixture(scope="module")
def jax_results():
    process = start_jax_checks()
    if process is None:
        pytest.skip(
            "jax is not importable here: install the `jax` extra "
            "(pip install -e '.[jax]'), run .ci/jax, or point "
            "KERAS_TRANSFORMER_JAX_PYTHON at a Python that has jax"
        )
    try:
        process.wait(timeout=900)
    except subprocess.TimeoutExpired:
        _stop(process)
        pytest.fail("the JAX subprocess did not finish in 900 s")
    stdout, stderr = (_read(stream) for stream in process.outputs)
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    if process.returncode not in (0, 1) or not lines:
        pytest.fail(f"the JAX subprocess failed (exit {process.returncode}):\n{stderr[-4000:]}")
    return json.loads(lines[-1])


# Two minutes of JAX compiles beside the other tests: with the long checks (`-m slow`) and in `.ci/jax`.
@pytest.mark.slow
@pytest.mark.parametrize("name", list(CHECKS))
def test_on_jax_backend(jax_results, name):
    assert name in jax_results, f"{name} did not run"
    assert jax_results[name] == "ok", f"{name} failed on the JAX backend:\n{jax_results[name]}"


if __name__ == "__main__":
    results = run_checks()
    print(json.dumps(results))
    sys.exit(0 if all(value == "ok" for value in results.values()) else 1)
