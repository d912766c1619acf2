"""The console script hides TensorFlow's start-up log unless asked (`--verbose`, `TF_CPP_MIN_LOG_LEVEL=0`)."""

import os
import re
import subprocess
import sys

import pytest


def _help(*options, **env):
    environment = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    environment.update(env)
    command = [sys.executable, "-m", "keras_transformer_cli", *options, "translate", "--help"]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, env=environment)


@pytest.fixture(scope="module")
def verbose():
    """What TensorFlow writes at start-up on this machine, with `--verbose`."""
    result = _help("--verbose")
    assert result.returncode == 0 and "usage: keras-transformer translate" in result.stdout
    return result


def test_translate_help_prints_no_tensorflow_log_line(verbose):
    quiet = _help()
    assert quiet.returncode == 0 and quiet.stdout == verbose.stdout
    assert quiet.stderr == "", quiet.stderr


def test_a_users_log_level_0_shows_the_start_up_lines(verbose):
    chosen = _help(TF_CPP_MIN_LOG_LEVEL="0")
    assert chosen.returncode == 0
    if verbose.stderr:  # this TensorFlow logs at start-up: the user's own setting lets it through
        assert chosen.stderr, "TF_CPP_MIN_LOG_LEVEL=0 was overridden"


@pytest.mark.parametrize("level", ["1", "2"])
def test_a_users_quieter_log_level_hides_them_too(verbose, level):
    """TensorFlow writes its start-up lines whatever the level; a user who asked for fewer lines sees none."""
    quiet = _help(TF_CPP_MIN_LOG_LEVEL=level)
    assert quiet.returncode == 0 and quiet.stdout == verbose.stdout
    assert quiet.stderr == "", quiet.stderr


TENSORFLOW_LOG_LINE = re.compile(r"^([IWEF]\d{4} |WARNING: All log messages before absl)", re.M)


def test_a_command_that_runs_tensorflow_prints_no_tensorflow_log_line(tmp_path):
    """Past start-up too: device initialisation (cuInit on a CPU machine with CUDA libraries) logs errors."""
    environment = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    output = tmp_path / "schedule.png"
    command = [sys.executable, "-m", "keras_transformer_cli", "plot", "schedule", "--output", str(output)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, env=environment)
    assert result.returncode == 0 and output.is_file(), result.stderr
    assert not TENSORFLOW_LOG_LINE.search(result.stderr), result.stderr
