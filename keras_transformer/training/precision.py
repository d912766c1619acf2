"""How to train in `mixed_bfloat16` on a CPU: the fast route where the CPU has bf16 units.

XLA:CPU (TensorFlow 2.21, jax 0.10) runs bfloat16 matmuls no faster than
float32 ones: it does not use the CPU's bf16 instructions, so a
`mixed_bfloat16` model compiled with `jit_compile=True` trains about twice as
slowly as float32. TensorFlow's own kernels (oneDNN) do use them, but without
XLA every elementwise op of the step is a separate pass over memory, and the
label-smoothed loss over the vocabulary (batch x length x vocabulary floats)
alone costs as much as the matmuls. The *hybrid* route takes the best of both:
the model runs without XLA (its matmuls in oneDNN's bf16 kernels) while the
loss, and its gradient, are one XLA-compiled function nested in the step, and
TensorFlow's autoclustering compiles the model's elementwise ops (only those:
`--tf_xla_ops_to_cluster=FUSIBLE`) into small XLA clusters between the matmuls.

`benchmarks/bf16_routes.py` measures these routes against float32 + XLA.

Example:

>>> route = training_route("mixed_bfloat16")   # "hybrid" on a CPU with bf16 units
>>> route in ("hybrid", "xla")
True
"""

import warnings

from keras_transformer import cpu_units
from keras_transformer.errors import KerasTransformerWarning


def cpu_bf16_units(cpuinfo_path="/proc/cpuinfo"):
    """The bf16 instruction sets this CPU reports (`avx512_bf16`, `amx_bf16`), as a sorted tuple; () if none.

    Example:

    >>> isinstance(cpu_bf16_units(), tuple)
    True
    """
    return cpu_units.units("bfloat16", cpuinfo_path)


def _has_accelerator():
    import tensorflow as tf

    return bool(tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("TPU"))


def training_route(mixed_precision, cpuinfo_path="/proc/cpuinfo"):
    """`"hybrid"` or `"xla"`: how to compile a model trained with `mixed_precision` on this machine.

    `"hybrid"` (model without XLA, loss with XLA) for `"mixed_bfloat16"` on a CPU-only
    TensorFlow machine whose CPU has bf16 units; `"xla"` (`jit_compile=True`) otherwise.
    For `"mixed_bfloat16"` on a CPU without bf16 units it warns (a
    `KerasTransformerWarning`, one line on the command line) that the run
    trains in bfloat16 through XLA, slower than float32 would: the policy
    asked for is kept, never swapped for another behind the user's back.

    Example:

    >>> training_route(None)
    'xla'
    """
    import keras

    if mixed_precision != "mixed_bfloat16" or keras.backend.backend() != "tensorflow" or _has_accelerator():
        return "xla"
    if not cpu_bf16_units(cpuinfo_path):
        warnings.warn(
            "this CPU has no bf16 units (avx512_bf16 or amx_bf16): this run trains in bfloat16 through XLA, "
            "slower than float32 would here; train without mixed precision for float32",
            KerasTransformerWarning,
            stacklevel=2,
        )
        return "xla"
    return "hybrid"


def use_policy(mixed_precision, strategy="default"):
    """Sets Keras's global dtype policy to `mixed_precision` (nothing for None), with the route it trains by.

    Where the hybrid route applies (`training_route`, with the default
    strategy), it asks for autoclustering (`enable_elementwise_autoclustering`):
    call this before any graph runs.
    """
    import keras

    if not mixed_precision:
        return
    keras.mixed_precision.set_global_policy(mixed_precision)
    with warnings.catch_warnings():  # `compile_model` warns about a CPU without bf16 units, once
        warnings.simplefilter("ignore")
        route = training_route(mixed_precision)
    if strategy == "default" and route == "hybrid":
        enable_elementwise_autoclustering()


AUTOCLUSTER_FLAGS = ("--tf_xla_auto_jit=2", "--tf_xla_cpu_global_jit", "--tf_xla_ops_to_cluster=FUSIBLE")


def enable_elementwise_autoclustering(environ=None):
    """Asks TensorFlow to XLA-compile the elementwise ops of graphs run without `jit_compile` (adds to `TF_XLA_FLAGS`).

    TensorFlow reads `TF_XLA_FLAGS` once, when it first optimizes a graph
    function (a `tf.function` or a `tf.data` map): call this before that, or it
    has no effect (training is then only somewhat slower, never wrong). Flags
    already in `TF_XLA_FLAGS` are kept. `environ` defaults to `os.environ`.
    Returns the new value.

    Example:

    >>> environ = {"TF_XLA_FLAGS": "--tf_xla_min_cluster_size=4"}
    >>> enable_elementwise_autoclustering(environ).split()
    ['--tf_xla_min_cluster_size=4', '--tf_xla_auto_jit=2', '--tf_xla_cpu_global_jit', '--tf_xla_ops_to_cluster=FUSIBLE']
    """
    import os

    environ = os.environ if environ is None else environ
    flags = environ.get("TF_XLA_FLAGS", "").split()
    names = {flag.split("=")[0] for flag in flags}
    flags += [flag for flag in AUTOCLUSTER_FLAGS if flag.split("=")[0] not in names]
    environ["TF_XLA_FLAGS"] = " ".join(flags)
    return environ["TF_XLA_FLAGS"]


def compile_loss_with_xla(loss):
    """Makes `loss` (a `keras.losses.Loss`) compute its value, and its gradient, as one XLA-compiled function.

    Meant for a model compiled with `jit_compile=False` on TensorFlow: its
    elementwise work over the logits then runs fused, while the model's
    matmuls keep TensorFlow's kernels. The loss's config is unchanged. Returns `loss`.

    Example:

    >>> from keras_transformer.losses import MaskedSparseCategoricalCrossentropy
    >>> loss = compile_loss_with_xla(MaskedSparseCategoricalCrossentropy())
    """
    import tensorflow as tf

    loss.call = tf.function(loss.call, jit_compile=True, reduce_retracing=True)
    return loss


def compile_arguments(model, loss, jit_compile=True):
    """`(loss, jit_compile)` for `model.compile`: the hybrid route's where `model` trains in bf16 on a bf16 CPU.

    Where `training_route` says `"hybrid"` for the model's dtype policy and
    `jit_compile` is asked for, the model compiles without XLA and the loss
    with it; otherwise both are returned unchanged.

    Example:

    >>> import keras
    >>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    >>> compile_arguments(model, "mse")   # float32: XLA as asked
    ('mse', True)
    """
    if not jit_compile or training_route(model.dtype_policy.name) != "hybrid":
        return loss, jit_compile
    return compile_loss_with_xla(loss), False
