"""Importing the package turns on TensorFlow's BFC CPU allocator, unless the user said otherwise.

Each check runs in a fresh interpreter: TensorFlow picks its CPU allocator once, at
its first allocation. Only TensorFlow's BFC allocator keeps statistics, so
`tf.config.experimental.get_memory_info("CPU:0")` tells which one is in use.
"""

import os
import subprocess
import sys

import pytest

VARIABLE = "TF_CPU_ALLOCATOR_USE_BFC"
PROBE = """
import keras_transformer
import tensorflow as tf
tf.matmul(tf.ones([256, 256]), tf.ones([256, 256]))
try:
    print("bfc peak", tf.config.experimental.get_memory_info("CPU:0")["peak"])
except ValueError:
    print("default allocator")
"""


def run_probe(value):
    env = {k: v for k, v in os.environ.items() if k != VARIABLE}
    if value is not None:
        env[VARIABLE] = value
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    result = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout.strip().splitlines()[-1]


def test_import_turns_on_the_bfc_allocator():
    words = run_probe(None).split()
    assert words[:2] == ["bfc", "peak"]
    assert int(words[2]) >= 256 * 256 * 4  # it holds at least the matmul's output


@pytest.mark.parametrize("value", ["false", "0"])
def test_the_users_setting_wins(value):
    assert run_probe(value) == "default allocator"
