"""Importing the package turns on TensorFlow's BFC CPU allocator, unless the user said otherwise.

Each check runs in a fresh interpreter: TensorFlow picks its CPU allocator once, at
its first allocation. Only TensorFlow's BFC allocator keeps statistics, so
`tf.config.experimental.get_memory_info("CPU:0")` tells which one is in use, and
whether the package changed it is seen against the same probe without the package.
"""

import os
import subprocess
import sys

import pytest

VARIABLE = "TF_CPU_ALLOCATOR_USE_BFC"
PROBE = """
import os
import tensorflow as tf
tf.matmul(tf.ones([256, 256]), tf.ones([256, 256]))
print("variable", os.environ.get("TF_CPU_ALLOCATOR_USE_BFC"))
try:
    print("bfc peak", tf.config.experimental.get_memory_info("CPU:0")["peak"])
except ValueError:
    print("default allocator")
"""


def run_probe(value, import_package=True):
    env = {k: v for k, v in os.environ.items() if k != VARIABLE}
    if value is not None:
        env[VARIABLE] = value
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    probe = ("import keras_transformer\n" if import_package else "") + PROBE
    result = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout.strip().splitlines()[-2:]


def test_import_turns_on_the_bfc_allocator():
    variable, allocator = run_probe(None)
    assert variable == "variable true"
    words = allocator.split()
    assert words[:2] == ["bfc", "peak"]
    assert int(words[2]) >= 256 * 256 * 4  # it holds at least the matmul's output


@pytest.mark.parametrize("value", [pytest.param("false", marks=pytest.mark.slow), "0"])  # the same rule, two words
def test_the_users_setting_wins(value):
    variable, allocator = run_probe(value)
    assert variable == f"variable {value}"  # left as the user set it
    # TensorFlow then picks the allocator it picks without the package: its default
    # allocator, except where TensorFlow loads its CUDA platform (it logs "failed
    # call to cuInit" without a GPU); there its CPU device reports BFC statistics
    # with the variable "false" too.
    assert allocator == run_probe(value, import_package=False)[1]
