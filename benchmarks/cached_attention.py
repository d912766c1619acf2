"""One decoding step's attention, four ways: which formulation XLA:CPU runs fastest.

A cached decoder step attends one query per row and head to `L` cached keys:
at the `multi30k-en-de` preset's shapes (100 rows, 4 heads of 32) that is 400
tiny products per dot, which XLA:CPU runs one by one. This times 8 chained
attentions (one step's 4 self- and 4 cross-attentions) in one XLA program,
for each formulation and cache length:

- `einsum`: what `MultiHeadAttention` does, batched dots over rows and heads;
- `head_blocks`: one dot per row against every head's keys, the diagonal head
  blocks kept (4x the multiplications, a quarter of the products);
- `keys_transposed`: multiply and sum, keys stored `(rows, heads, key_dim, L)`
  so that the sum runs along a non-minor axis;
- `flat_batch`: rows and heads flattened into one batch of `tf.matmul`.

Prints the best of 5 timings of 50 calls, and each output's largest
difference from `einsum`'s.

Example:

    python benchmarks/cached_attention.py | tee benchmarks/results/decoding/cached_attention.txt
"""

import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from machine import describe_machine, machine_line  # noqa: E402

ROWS, HEADS, KEY_DIM = 100, 4, 32


def einsum(query, keys, values):
    """query `(rows, 1, heads, key_dim)`; keys, values `(rows, heads, L, key_dim)`."""
    weights = tf.nn.softmax(tf.einsum("bqhk,bhsk->bhqs", query, keys), axis=-1)
    return tf.einsum("bhqs,bhsk->bqhk", weights, values)


def head_blocks(query, keys, values):
    length = keys.shape[2]
    eye = tf.eye(HEADS)[None, :, :, None]  # (1, heads, heads, 1)
    every_head = tf.einsum("bhk,bsk->bhs", query[:, 0], tf.reshape(keys, (ROWS, HEADS * length, KEY_DIM)))
    scores = tf.reduce_sum(tf.reshape(every_head, (ROWS, HEADS, HEADS, length)) * eye, axis=2)
    weights = tf.nn.softmax(scores, axis=-1)[:, :, None, :] * eye  # (rows, heads, heads, L)
    flat_weights = tf.reshape(weights, (ROWS, HEADS, HEADS * length))
    context = tf.einsum("bhs,bsk->bhk", flat_weights, tf.reshape(values, (ROWS, HEADS * length, KEY_DIM)))
    return context[:, None]


def keys_transposed(query, keys_t, values):
    """keys_t `(rows, heads, key_dim, L)`."""
    scores = tf.reduce_sum(tf.transpose(query, (0, 2, 3, 1)) * keys_t, axis=2)  # (rows, heads, L)
    weights = tf.nn.softmax(scores, axis=-1)
    return tf.reduce_sum(weights[..., None] * values, axis=2)[:, None]


def flat_batch(query, keys, values):
    length = keys.shape[2]
    flat_query = tf.reshape(tf.transpose(query, (0, 2, 1, 3)), (ROWS * HEADS, 1, KEY_DIM))
    scores = tf.matmul(flat_query, tf.reshape(keys, (ROWS * HEADS, length, KEY_DIM)), transpose_b=True)
    context = tf.matmul(tf.nn.softmax(scores, axis=-1), tf.reshape(values, (ROWS * HEADS, length, KEY_DIM)))
    return tf.reshape(context, (ROWS, HEADS, 1, KEY_DIM))


FORMULATIONS = {"einsum": einsum, "head_blocks": head_blocks, "keys_transposed": keys_transposed}
FORMULATIONS["flat_batch"] = flat_batch


def chained(attend):
    @tf.function(jit_compile=True)
    def run(query, keys, values):
        for layer_keys, layer_values in zip(keys, values):
            query = tf.reshape(attend(query, layer_keys, layer_values), (ROWS, 1, HEADS, KEY_DIM))
        return query

    return run


def best_ms(run, *args, calls=50, repeats=5):
    run(*args)
    timings = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            run(*args)
        timings.append((time.perf_counter() - start) / calls * 1e3)
    return min(timings)


def main():
    print(machine_line(describe_machine()), flush=True)
    rng = np.random.default_rng(0)
    for length in (16, 32, 64):
        query = tf.constant(rng.normal(size=(ROWS, 1, HEADS, KEY_DIM)), tf.float32)
        keys = [tf.constant(rng.normal(size=(ROWS, HEADS, length, KEY_DIM)), tf.float32) for _ in range(8)]
        values = [tf.constant(rng.normal(size=(ROWS, HEADS, length, KEY_DIM)), tf.float32) for _ in range(8)]
        reference = None
        for name, attend in FORMULATIONS.items():
            layer_keys = [tf.transpose(k, (0, 1, 3, 2)) for k in keys] if name == "keys_transposed" else keys
            run = chained(attend)
            output = run(query, layer_keys, values).numpy()
            reference = output if reference is None else reference
            milliseconds = best_ms(run, query, layer_keys, values)
            difference = np.abs(output - reference).max()
            print(f"L={length:3d} {name:16s} {milliseconds:6.3f} ms per 8 attentions, differs by {difference:.1e}")


if __name__ == "__main__":
    main()
