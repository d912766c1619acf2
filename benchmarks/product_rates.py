"""A decoder step's products alone: float32, bf16 and int8, by TensorFlow (XLA and oneDNN) and by JAX's XLA.

The shapes are an OPUS-MT-base decoder step's at 32 rows (one batch) and
128 rows (4 beams x 32): the tied output projection (512 x 58,101), the
feed-forward (512 x 2,048 and back) and an attention projection
(512 x 512). Each product runs `--repeats` times after two warm-up calls;
the table gives milliseconds and GFLOP/s. Routes:

- `tf xla f32`, `tf xla bf16`, `tf xla int8` (int32 sums): `tf.function(jit_compile=True)`,
  what the package's decoder compiles to;
- `tf onednn f32`, `tf onednn bf16`: the same products without XLA
  (TensorFlow's own kernels, oneDNN on x86);
- `jax f32`, `jax bf16 f32-sum` (`preferred_element_type=float32`), `jax int8`:
  `jax.jit`, jaxlib's XLA:CPU.

Writes JSON with the machine and its CPU flags. Not run by CI.

Example:

    python benchmarks/product_rates.py --output benchmarks/results/decoding/product_rates.json
"""

import argparse
import json
import os
import pathlib
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

HERE = pathlib.Path(__file__).resolve().parent
SHAPES = ((32, 512, 58101), (128, 512, 58101), (32, 512, 2048), (32, 2048, 512), (32, 512, 512))


def timed(fn, args, repeats, block):
    block(fn(*args))
    block(fn(*args))
    start = time.perf_counter()
    for _ in range(repeats):
        out = fn(*args)
    block(out)
    return (time.perf_counter() - start) / repeats


def tensorflow_routes(x, w, repeats):
    import tensorflow as tf

    def block(t):
        return t.numpy()

    xf, wf = tf.constant(x), tf.Variable(w)
    xb, wb = tf.cast(xf, tf.bfloat16), tf.Variable(tf.cast(w, tf.bfloat16))
    xi, wi = tf.cast(tf.round(xf * 20), tf.int8), tf.Variable(tf.cast(tf.round(w * 400), tf.int8))
    routes = {
        "tf xla f32": (tf.function(lambda a: tf.matmul(a, wf), jit_compile=True), xf),
        "tf xla bf16": (tf.function(lambda a: tf.matmul(a, wb), jit_compile=True), xb),
        "tf xla int8": (tf.function(lambda a: tf.matmul(a, wi, output_type=tf.int32), jit_compile=True), xi),
        "tf onednn f32": (tf.function(lambda a: tf.matmul(a, wf)), xf),
        "tf onednn bf16": (tf.function(lambda a: tf.matmul(a, wb)), xb),
    }
    return {name: timed(fn, (arg,), repeats, block) for name, (fn, arg) in routes.items()}


def jax_routes(x, w, repeats):
    import jax
    import jax.numpy as jnp
    import numpy as np

    def block(t):
        return t.block_until_ready()

    def product(dtype=None):
        return jax.jit(lambda a, b: jnp.matmul(a, b, preferred_element_type=dtype))

    xi, wi = jnp.asarray(np.round(x * 20), jnp.int8), jnp.asarray(np.round(w * 400), jnp.int8)
    routes = {
        "jax f32": (product(), jnp.asarray(x), jnp.asarray(w)),
        "jax bf16 f32-sum": (product(jnp.float32), jnp.asarray(x, jnp.bfloat16), jnp.asarray(w, jnp.bfloat16)),
        "jax int8": (product(jnp.int32), xi, wi),
    }
    return {name: timed(fn, args, repeats, block) for name, (fn, *args) in routes.items()}


def main(argv=None):
    import numpy as np

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--output", help="the JSON report (default: stdout only)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(HERE))
    from machine import describe_machine

    rng = np.random.default_rng(0)
    rows = []
    for m, k, n in SHAPES:
        x = rng.normal(size=(m, k)).astype("float32")
        w = (rng.normal(size=(k, n)) * 0.05).astype("float32")
        seconds = {**tensorflow_routes(x, w, args.repeats), **jax_routes(x, w, args.repeats)}
        row = {"shape": [m, k, n]}
        row.update(
            {
                name: {"ms": round(s * 1e3, 3), "gflops": round(2 * m * k * n / s / 1e9, 1)}
                for name, s in seconds.items()
            }
        )
        rows.append(row)
        print(json.dumps(row), flush=True)
    report = {
        "benchmark": "product_rates",
        "command": " ".join(["python", *sys.argv]),
        "machine": describe_machine(),
        "repeats": args.repeats,
        "results": rows,
    }
    if args.output:
        pathlib.Path(args.output).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
