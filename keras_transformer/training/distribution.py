"""Where a run trains: its `tf.distribute` strategy, this worker's role, and what a strategy changes in a model.

A multi-worker run (TF_CONFIG) trains the same model on every worker: only
the chief writes the run directory, and each worker keeps its own resume
backup. The Keras workarounds a strategy needs are in `keras_workarounds`.
"""

import json
import os

from keras_transformer.training import keras_workarounds


def configure_devices(strategy, cpu_devices):
    """The `tf.distribute.Strategy` named `strategy` (see `options.STRATEGIES`), with the CPU split first.

    `cpu_devices` (more than 1) splits the CPU into that many logical devices,
    which `"mirrored"` then uses where there is no GPU.
    """
    import tensorflow as tf

    if cpu_devices and cpu_devices > 1:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(cpu_devices)]
        )
    if strategy == "default":
        return tf.distribute.get_strategy()
    if strategy == "mirrored":
        devices = [d.name for d in tf.config.list_logical_devices("GPU")] or [
            d.name for d in tf.config.list_logical_devices("CPU")
        ]
        return tf.distribute.MirroredStrategy(devices)
    return tf.distribute.MultiWorkerMirroredStrategy()  # `Options.check` allowed no other


def worker_role(strategy):
    """`(is_chief, worker index)`: from TF_CONFIG for a multi-worker run; a single process is the chief."""
    if strategy != "multi-worker":
        return True, 0
    config = json.loads(os.environ.get("TF_CONFIG", "{}"))
    task = config.get("task", {})
    kind, index = task.get("type", "chief"), int(task.get("index", 0))
    has_chief = "chief" in config.get("cluster", {})
    return (kind == "chief" or (kind == "worker" and index == 0 and not has_chief)), index


def uses_xla(strategy):
    """Whether the model is compiled with XLA (`jit_compile`) under `strategy`."""
    import tensorflow as tf

    # XLA has no collectives on CPU devices (b/194942685): data-parallel
    # runs without accelerators go without it; everything else uses it.
    return not (strategy != "default" and not tf.config.list_logical_devices("GPU"))


def prepare_model(model, strategy, train_batches):
    """What a compiled `model` needs before `fit` under `strategy` (call it in the strategy's scope)."""
    if strategy != "default":
        keras_workarounds.build_metrics_from_a_real_batch(model, train_batches)
    if strategy == "multi-worker":
        keras_workarounds.reduce_logs_across_workers(model)
