"""Shared fixtures: tiny models, real data, a clean Keras state per test."""

import atexit
import os
import pathlib
import re
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# A download that a test did not point at its own server fails at once instead of reaching the real hosts.
os.environ.setdefault("KERAS_TRANSFORMER_MIRROR", "http://127.0.0.1:9/tests-never-download")

from run_cache import cache_root  # noqa: E402


def _append_flags(variable, flags):
    """Appends `flags` to the environment variable `variable` (XLA_FLAGS, TF_XLA_FLAGS), keeping what it holds."""
    os.environ[variable] = f"{os.environ.get(variable, '')} {flags}".strip()


# Every process of the test run (the workers and the command-line subprocesses) keeps the XLA programs it
# compiles in the test cache and loads those another process compiled: many tests train or decode the same
# tiny model, and compiling is most of their time. TensorFlow reads the flags at its first compile.
if "--tf_xla_persistent_cache_directory" not in os.environ.get("TF_XLA_FLAGS", ""):
    xla_cache = f"--tf_xla_persistent_cache_directory={cache_root() / 'xla'} --tf_xla_persistent_cache_device_types=CPU"
    _append_flags("TF_XLA_FLAGS", xla_cache)

import keras  # noqa: E402
import pytest  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"

TINY = dict(
    source_vocab_size=64,
    target_vocab_size=64,
    num_layers=2,
    d_model=32,
    num_heads=4,
    d_ff=64,
    dropout=0.1,
    max_length=24,
)


# Modules run as a second pytest process (the README's test command): every XLA program a process
# compiles stays in TensorFlow's compilation cache until it exits, and one process for the whole suite
# outgrew 24 GB. About half of the run's time each (2026-11-29, AVX2 EPYC: 1,837 and 1,793 seconds of
# worker time, 16 and 15 minutes; 11.3 GB used at most): when the first held four fifths, it reached 18.8 GB.
SECOND_PROCESS_MODULES = {
    "test_banned_words.py",
    "test_batching.py",
    "test_cli_inference.py",
    "test_cli_languages.py",
    "test_compaction.py",
    "test_ctranslate2_engine.py",
    "test_ctranslate2_export.py",
    "test_decoding.py",
    "test_ensembles.py",
    "test_export.py",
    "test_faults.py",
    "test_inflight.py",
    "test_litert.py",
    "test_load.py",
    "test_m2m100_decoding.py",
    "test_marian_decoding.py",
    "test_old_layouts.py",
    "test_precision.py",
    "test_properties.py",
    "test_serving.py",
    "test_serving_inputs.py",
    "test_serving_languages.py",
    "test_serving_model.py",
    "test_signatures.py",
    "test_strategies.py",
    "test_stream_api.py",
    "test_stream_cli.py",
    "test_stream_server.py",
    "test_t5_mbart_import.py",
    "test_training.py",
    "test_translation_lines.py",
}


# The modules that take longest, longest first: seconds of worker time in the default run (both processes,
# 2 workers each, 2026-11-29 on an AVX2 EPYC). pytest-xdist hands whole modules to the workers in test order
# (setup.cfg: --dist loadfile --no-loadscope-reorder): these go out first, so that no long module starts while
# the other worker has nothing left to do (unlisted modules that ran last left 70 s tails).
LONGEST_MODULES = (
    "test_decoding.py",  # 131
    "test_serving_languages.py",  # 128
    "test_cli_inference.py",  # 127
    "test_cli_languages.py",  # 123
    "test_t5_mbart_import.py",  # 118
    "test_data_safety.py",  # 116
    "test_serving_model.py",  # 102
    "test_serving_inputs.py",  # 96
    "test_marian_decoding.py",  # 96
    "test_multilingual_fine_tuning.py",  # 89
    "test_litert.py",  # 83
    "test_saved_outputs.py",  # 80
    "test_export.py",  # 80
    "test_serving.py",  # 77
    "test_layers.py",  # 77
    "test_stream_api.py",  # 72
    "test_m2m100_decoding.py",  # 69
    "test_transformers_export.py",  # 69
    "test_encoder_export.py",  # 69
    "test_ctranslate2_engine.py",  # 68
    "test_old_layouts.py",  # 63
    "test_stream_generator.py",  # 63
    "test_generate.py",  # 63
    "test_compaction.py",  # 62
    "test_fine_tuning.py",  # 61
    "test_inflight.py",  # 58
    "test_compile_cache.py",  # 58
    "test_docstrings.py",  # 58
    "test_banned_words.py",  # 58
    "test_downloads.py",  # 57
    "test_stream_server.py",  # 57
    "test_m2m100_engines.py",  # 54
    "test_signatures.py",  # 53
    "test_stream_cli.py",  # 51
    "test_hostile_checkpoints.py",  # 50
    "test_faults.py",  # 46
    "test_model.py",  # 45
    "test_training.py",  # 45
    "test_decoder_only.py",  # 42
    "test_text_classification.py",  # 38
    "test_properties.py",  # 38
    "test_cli_quiet.py",  # 35
    "test_model_loading.py",  # 34
    "test_marian_compatible.py",  # 33
    "test_m2m100_export.py",  # 32
    "test_import_command.py",  # 31
    "test_ensembles.py",
    "test_strategies.py",
)


def _run_order(item):
    name = item.path.name
    # The JAX lane's tests only read what its subprocess found: last, so that it runs beside the others.
    # Under pytest-xdist first instead: the worker that is sent them starts it and waits, the other works on.
    jax_lane_position = (name == JAX_LANE) != _XDIST_WORKER
    length_rank = LONGEST_MODULES.index(name) if name in LONGEST_MODULES else len(LONGEST_MODULES)
    return jax_lane_position, length_rank


def pytest_configure(config):
    """Compiles without LLVM's optimisation passes in a run that leaves the slow tests out.

    The same HLO programs, with results equal to float32 rounding (the tiny
    model's jit-compiled logits at most 1e-6 apart, its loss curve bit for
    bit), compiled faster: tests/test_decoding.py took 177 and 171 s against
    195 and 191 s with XLA's default (level 3), runs taking turns on 2 cores.
    The programs run slower (a 3+3-layer model of width 256: 1.2 and 1.5 s
    a training step against 1.0 and 0.9 s), so the slow tests, which train
    real models, keep the default. XLA reads XLA_FLAGS at its first compile,
    and pytest-xdist's workers and the tests' subprocesses inherit it. An
    `--xla_backend_optimization_level` of your own in XLA_FLAGS is kept.
    """
    leaves_out_slow_tests = re.search(r"\bnot slow\b", config.option.markexpr or "")
    if leaves_out_slow_tests and "--xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
        _append_flags("XLA_FLAGS", "--xla_backend_optimization_level=0")


def pytest_collection_modifyitems(items):
    for item in items:
        if item.path.name in SECOND_PROCESS_MODULES:
            item.add_marker(pytest.mark.second_process)
    items.sort(key=_run_order)


JAX_LANE = "test_backend_jax.py"
_XDIST_WORKER = "PYTEST_XDIST_WORKER" in os.environ


def pytest_collection_finish(session):
    """Starts the JAX lane's subprocess as soon as its tests are selected (see tests/test_backend_jax.py).

    Not in a pytest-xdist worker: every worker collects every test, and the
    subprocess starts with the first of them in the worker that runs them.
    """
    if session.config.option.collectonly or _XDIST_WORKER:
        return
    for item in session.items:
        if item.path.name == JAX_LANE:
            item.module.start_jax_checks()
            break


_SESSION = []


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    _SESSION.append(session)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """Ends the process once pytest is done, its exit handlers run, without the interpreter's own teardown.

    Tearing down a process that holds thousands of XLA programs (many GB) took
    over 2 minutes of the first process's wall time, after the summary; every
    report is written by now. `KERAS_TRANSFORMER_TESTS_FULL_EXIT=1` keeps the
    normal exit.
    """
    if not _SESSION or os.environ.get("KERAS_TRANSFORMER_TESTS_FULL_EXIT") == "1":
        return
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(int(_SESSION[0].exitstatus))


@pytest.fixture(scope="session")
def shared_data_dir():
    """`../shared/data` beside the repository: the real corpora."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"the real corpora are not at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(autouse=True)
def float32_policy():
    """Every test starts and ends with the float32 policy."""
    keras.mixed_precision.set_global_policy("float32")
    yield
    keras.mixed_precision.set_global_policy("float32")


@pytest.fixture
def forced_rows_languages(monkeypatch):
    """The `language` of each call of `decoding.rules.forced_rows` during the test (the calls go through)."""
    from keras_transformer.decoding import rules

    calls, original = [], rules.forced_rows

    def spied(pieces, language=None, concat=None):
        calls.append(language)
        return original(pieces, language, concat)

    monkeypatch.setattr(rules, "forced_rows", spied)
    return calls
