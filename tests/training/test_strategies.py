"""Training under distribution strategies: mirrored on two CPU devices, multi-worker on two local processes."""

import json
import socket

import numpy as np
import pytest

from keras_transformer import runs

from test_training import _history, _train_in_subprocess


# About a minute on 2 cores: one of the long checks (`-m slow`).
@pytest.mark.slow
def test_mirrored_strategy_on_two_cpu_devices(tmp_path):
    process = _train_in_subprocess(tmp_path / "run", epochs=2, strategy="mirrored", cpu_devices=2)
    log = process.communicate(timeout=600)[0]
    assert process.returncode == 0, log[-3000:]
    losses = [float(row["loss"]) for row in _history(tmp_path / "run")]
    assert all(np.isfinite(losses)) and losses[1] < losses[0]


def _free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# Two worker processes, about a minute on 2 cores: one of the long checks (`-m slow`).
@pytest.mark.slow
def test_multi_worker_strategy_with_two_local_workers(tmp_path):
    workers = [f"127.0.0.1:{_free_port()}", f"127.0.0.1:{_free_port()}"]
    processes = []
    for index in range(2):
        tf_config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        output = tmp_path / ("run" if index == 0 else f"worker-{index}")
        processes.append(
            _train_in_subprocess(output, env={"TF_CONFIG": json.dumps(tf_config)}, epochs=2, strategy="multi-worker")
        )
    logs = [process.communicate(timeout=900)[0] for process in processes]
    for process, log in zip(processes, logs):
        assert process.returncode == 0, log[-3000:]
    losses = [float(row["loss"]) for row in _history(tmp_path / "run")]
    assert len(losses) == 2 and all(np.isfinite(losses)) and losses[1] < losses[0]
    assert runs.is_run_dir(tmp_path / "run")
