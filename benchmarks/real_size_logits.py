"""The real-size output projection, `(rows, 512) x 58,101 words`, written several ways under XLA:CPU.

Part 4 of the real-size profile (`real_size_profile.py`) found the logits
product most of a greedy step. This times it alone, on random weights of
OPUS-MT base's shape: as a Dense kernel `(512, V)`, as the tied embedding
`(V, 512)` transposed (what the model does), the embedding first, in vocabulary
chunks, as an einsum, and in TensorFlow's graph without XLA (oneDNN). XLA's own
options come from `XLA_FLAGS` (recorded in the report's machine settings), so a
sweep of them is one invocation each:

    python benchmarks/real_size_logits.py
    XLA_FLAGS=--xla_cpu_use_xnnpack=true python benchmarks/real_size_logits.py

Prints one JSON line a row (median ms of `--calls` calls after one) and the
machine; `--output` appends the report to a JSON-lines file. Not run by CI.
"""

import argparse
import json
import os
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from machine import describe_machine, machine_line  # noqa: E402

VOCAB, D_MODEL = 58101, 512


def variants(tf, embedding, kernel):
    """`{name: (function of h, jit_compile)}`."""
    chunks = [7263] * 7 + [VOCAB - 7263 * 7]
    return {
        "h @ kernel (Dense (512, V))": (lambda h: tf.matmul(h, kernel), True),
        "h @ embedding^T (tied, as the model)": (lambda h: tf.matmul(h, embedding, transpose_b=True), True),
        "(embedding @ h^T)^T": (lambda h: tf.transpose(tf.matmul(embedding, h, transpose_b=True)), True),
        "embedding @ h^T, (V, rows) out": (lambda h: tf.matmul(embedding, h, transpose_b=True), True),
        "h @ embedding^T in 8 chunks": (
            lambda h: tf.concat([tf.matmul(h, c, transpose_b=True) for c in tf.split(embedding, chunks)], 1),
            True,
        ),
        "h @ embedding^T, no XLA (oneDNN)": (lambda h: tf.matmul(h, embedding, transpose_b=True), False),
    }


def median_ms(function, h, calls):
    function(h).numpy()
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        function(h).numpy()
        times.append(time.perf_counter() - started)
    return round(sorted(times)[len(times) // 2] * 1000, 1)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default="32,128", help="batch rows (greedy 32, beam 4 x 32 = 128)")
    parser.add_argument("--calls", type=int, default=15)
    parser.add_argument("--output", help="append the JSON report to this file")
    args = parser.parse_args(argv)
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    embedding = tf.Variable(rng.random((VOCAB, D_MODEL), dtype=np.float32) / D_MODEL)
    kernel = tf.Variable(tf.transpose(embedding))
    rows_out = []
    for rows in (int(r) for r in args.rows.split(",")):
        h = tf.constant(rng.random((rows, D_MODEL), dtype=np.float32))
        for name, (function, jit) in variants(tf, embedding, kernel).items():
            ms = median_ms(tf.function(function, jit_compile=jit), h, args.calls)
            rows_out.append({"rows": rows, "variant": name, "ms": ms})
            print(json.dumps(rows_out[-1]), flush=True)
    report = {
        "benchmark": "real_size_logits",
        "command": "python " + " ".join(sys.argv),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "machine": describe_machine(),
        "rows": rows_out,
    }
    print(machine_line(report["machine"]))
    if args.output:
        with open(args.output, "a", encoding="utf-8") as stream:
            stream.write(json.dumps(report) + "\n")


if __name__ == "__main__":
    main()
