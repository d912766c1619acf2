"""The training step's trace and XLA compile with Keras's Adam and with `keras_transformer.Adam`.

Keras's Adam computes its step size once per weight; ours once per step
(the same updates). This builds the `multi30k-en-de` preset's model shape
(4+4 layers, width 128, 8,000 pieces, 169 weights), and for each optimizer
in turn, `--repeats` times, times a fresh `tf.function` training step:
tracing it, then its first call with `jit_compile=True` (XLA's compile and
one step of a batch of 8 x 32 tokens). Prints the times and their medians.

Example:

    python benchmarks/adam_step.py | tee benchmarks/results/training/adam_step.txt
"""

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from machine import machine_line  # noqa: E402

import keras_transformer as kt  # noqa: E402


def training_step(model, optimizer, loss_fn):
    @tf.function(jit_compile=True)
    def step(inputs, labels):
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(inputs, training=True))
        optimizer.apply(tape.gradient(loss, model.trainable_variables), model.trainable_variables)
        return loss

    return step


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(machine_line())
    keras.utils.set_random_seed(0)
    model = kt.build_transformer(
        8000, 8000, num_layers=4, d_model=128, num_heads=4, d_ff=256, dropout=0.1, max_length=32,
        share_embeddings=True, tie_output_embedding=True,
    )  # fmt: skip
    loss_fn = kt.MaskedSparseCategoricalCrossentropy(label_smoothing=0.1)
    optimizers = {"keras.optimizers.Adam": keras.optimizers.Adam(1e-3), "keras_transformer.Adam": kt.Adam(1e-3)}
    for optimizer in optimizers.values():
        optimizer.build(model.trainable_variables)
    rng = np.random.default_rng(0)
    tokens = lambda: tf.constant(rng.integers(1, 8000, (8, 32)), tf.int32)  # noqa: E731
    inputs, labels = {"encoder_inputs": tokens(), "decoder_inputs": tokens()}, tokens()
    times = {name: {"trace": [], "compile": []} for name in optimizers}
    for _ in range(args.repeats):
        for name, optimizer in optimizers.items():
            step = training_step(model, optimizer, loss_fn)
            started = time.perf_counter()
            graph = step.get_concrete_function(inputs, labels).graph
            times[name]["trace"].append(time.perf_counter() - started)
            started = time.perf_counter()
            step(inputs, labels).numpy()
            times[name]["compile"].append(time.perf_counter() - started)
            times[name]["operations"] = len(graph.get_operations())
    print(f"{len(model.trainable_variables)} weights; {args.repeats} repeats, the optimizers alternating")
    for name, result in times.items():
        trace, compile_ = result["trace"], result["compile"]
        print(
            f"{name}: {result['operations']} graph operations; trace {statistics.median(trace):.1f} s "
            f"({', '.join(f'{t:.1f}' for t in trace)}); XLA compile and first step "
            f"{statistics.median(compile_):.1f} s ({', '.join(f'{t:.1f}' for t in compile_)})"
        )


if __name__ == "__main__":
    main()
