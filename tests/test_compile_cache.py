"""XLA's persistent compilation cache: the folder and its flags, and a second process that compiles nothing."""

import os
import pathlib
import subprocess
import sys

import pytest

from keras_transformer import compile_cache
from keras_transformer.errors import KerasTransformerWarning

from trained_runs import tiny_run_dir


def test_enable_sets_the_flags_and_makes_a_private_folder(tmp_path):
    environ = {"TF_XLA_FLAGS": "--tf_xla_min_cluster_size=4", "KERAS_TRANSFORMER_XLA_CACHE": str(tmp_path / "x")}
    assert compile_cache.enable(environ=environ) == tmp_path / "x"
    flags = environ["TF_XLA_FLAGS"].split()
    assert flags[0] == "--tf_xla_min_cluster_size=4"
    assert f"--tf_xla_persistent_cache_directory={tmp_path / 'x'}" in flags
    assert (tmp_path / "x").stat().st_mode & 0o777 == 0o700


def test_a_folder_already_in_the_flags_is_kept_and_off_turns_it_off(tmp_path):
    mine = {"TF_XLA_FLAGS": f"--tf_xla_persistent_cache_directory={tmp_path}"}
    assert compile_cache.enable(tmp_path / "other", environ=mine) == tmp_path
    assert mine["TF_XLA_FLAGS"] == f"--tf_xla_persistent_cache_directory={tmp_path}"
    off = {"KERAS_TRANSFORMER_XLA_CACHE": "off"}
    assert compile_cache.enable(environ=off) is None and "TF_XLA_FLAGS" not in off


def test_a_folder_others_may_write_to_is_not_used(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    environ = {}
    with pytest.warns(KerasTransformerWarning, match="writable by others"):
        assert compile_cache.enable(shared, environ=environ) is None
    assert "TF_XLA_FLAGS" not in environ


def test_the_default_folder_names_the_machine_under_the_user_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_TRANSFORMER_CACHE", str(tmp_path))
    folder = compile_cache.default_folder()
    assert folder.parent == tmp_path / "xla" and folder.name == compile_cache.machine_tag()
    assert "-tf" in folder.name


def _translate(run, sentence, cache):
    environ = dict(os.environ, KERAS_TRANSFORMER_XLA_CACHE=str(cache))
    flags = [f for f in environ.get("TF_XLA_FLAGS", "").split() if "persistent_cache" not in f]
    environ["TF_XLA_FLAGS"] = " ".join(flags)  # the test run's own cache (conftest) left out
    command = [sys.executable, "-m", "keras_transformer_cli", "translate", "--model", str(run), "--beam", "2"]
    done = subprocess.run([*command, sentence], env=environ, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _programs(cache):
    return {path.name: path.stat().st_mtime_ns for path in pathlib.Path(cache).iterdir()}


def test_a_second_translate_loads_every_program_and_compiles_none(tmp_path):
    run, pairs = tiny_run_dir()
    cache = tmp_path / "xla"
    first = _translate(run, pairs[3][0], cache)
    written = _programs(cache)
    assert written  # the first process compiled and kept its programs
    assert _translate(run, pairs[3][0], cache) == first
    assert _programs(cache) == written  # none compiled again: a compiled program would have been written
