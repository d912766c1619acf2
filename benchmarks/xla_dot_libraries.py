"""XLA:CPU's dot libraries (YNNPACK, XNNPACK, oneDNN) against its default dots, for decoding.

XLA:CPU can hand dots to a library (`XLA_FLAGS=--xla_cpu_experimental_<lib>_fusion_type=dot`);
the `keras on jax` setting decodes on Keras's JAX backend instead (jax's own
XLA:CPU). A flag or a backend holds for the whole process, so each setting runs in its own
process, the settings taking turns for `--rounds` rounds. Each process times:

- `projection` (TensorFlow only): the output projection's shape alone, `(rows, d_model)` by
  the tied embedding's transpose `(vocab, d_model)`, 50 steps in one XLA loop
  (best of 7, per step);
- `decode` (with `--model`): one-program decoding (`--search`: greedy, or
  beam search with 4 beams) of the batch of the `--rows` longest test sentences, compiled beforehand (the minimum of
  `--repeats` decodes); with `--profile`, then one more decode under
  `tf.profiler`, its XLA:CPU thunks summed by kind (set
  `--xla_cpu_enable_xprof_traceme=true` in `--extra-xla-flags` to see them).

Every setting must give the same ids: a setting that changed them would be
reported, not hidden. Not run by CI.

Example:

    python benchmarks/xla_dot_libraries.py --model RUN --data-dir DATA \\
        | tee benchmarks/results/decoding/xla_dot_libraries.txt
"""

import argparse
import hashlib
import os
import pathlib
import subprocess
import sys
import time

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

SETTINGS = {  # each setting's environment
    "default": {},
    "ynn dot": {"XLA_FLAGS": "--xla_cpu_experimental_ynn_fusion_type=dot"},
    "xnn dot": {"XLA_FLAGS": "--xla_cpu_experimental_xnn_fusion_type=dot"},
    "onednn dot": {"XLA_FLAGS": "--xla_cpu_experimental_onednn_fusion_type=dot"},
    "keras on jax": {"KERAS_BACKEND": "jax"},
}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a training run directory (without it, only the projection is timed)")
    parser.add_argument("--data-dir", help="the corpora's folder (default: $KERAS_TRANSFORMER_DATA_DIR, else bundled)")
    parser.add_argument("--settings", default="default,ynn dot", help=f"comma-separated, of: {', '.join(SETTINGS)}")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--rows", type=int, default=100)
    parser.add_argument("--search", choices=("greedy", "beam"), default="greedy", help="(beam: 4 beams, alpha 0.6)")
    parser.add_argument("--vocab", type=int, default=12000, help="the projection's vocabulary (without --model)")
    parser.add_argument("--d-model", type=int, default=128, help="the projection's width (without --model)")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--profile", action="store_true", help="also print where one decode spends its time")
    parser.add_argument("--extra-xla-flags", default="", help="added to every setting's XLA_FLAGS")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a child process: one measurement
    return parser.parse_args(argv)


def time_projection(rows, d_model, vocab):
    """Milliseconds a step of `(rows, d_model) @ (vocab, d_model)^T` and its row maxima, in an XLA loop."""
    import tensorflow as tf

    hidden, embedding = tf.random.normal([rows, d_model]), tf.random.normal([vocab, d_model])

    @tf.function(jit_compile=True)
    def fifty_steps(hidden, embedding):
        def body(i, total):
            logits = tf.matmul(hidden + tf.cast(i, tf.float32) * 1e-6, embedding, transpose_b=True)
            return i + 1, total + tf.reduce_max(logits, axis=1)

        return tf.while_loop(lambda i, _: i < 50, body, (0, tf.zeros([rows])))[1]

    fifty_steps(hidden, embedding).numpy()
    best = float("inf")
    for _ in range(7):
        start = time.perf_counter()
        fifty_steps(hidden, embedding).numpy()
        best = min(best, (time.perf_counter() - start) / 50)
    return best * 1e3


def time_decode(model, args):
    """(minimum milliseconds, ids digest) of one-program decoding of the longest test batch."""
    from ctranslate2_decode import batches_of, test_pairs, tokenize

    from keras_transformer import decoding

    run, max_length = pathlib.Path(args.model), min(64, model.max_length)
    _, _, pairs = test_pairs(run, args.data_dir, 1000)
    sources = sorted(tokenize(run, [s for s, _ in pairs], max_length), key=len)
    batch = batches_of(sources[-args.rows :], args.rows)[0][1].numpy()
    search = decoding.BeamSearch(4, alpha=0.6) if args.search == "beam" else decoding.GreedySearch()
    compiled = decoding.compile_search(model, search, max_length=max_length, compact=False)

    def decode(source_ids):
        return compiled(source_ids).best().ids

    ids = np.asarray(decode(batch))
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        np.asarray(decode(batch))
        times.append(time.perf_counter() - start)
    if args.profile:
        profile(lambda: np.asarray(decode(batch)))
    return min(times) * 1e3, hashlib.md5(ids.astype("int32").tobytes()).hexdigest()[:8]


def profile(call, top=20):
    """Runs `call` under `tf.profiler` and prints the events' total milliseconds by name (numbering dropped)."""
    import collections
    import glob
    import re
    import tempfile

    import tensorflow as tf
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    folder = tempfile.mkdtemp(prefix="xla-dot-profile-")
    tf.profiler.experimental.start(folder)
    call()
    tf.profiler.experimental.stop()
    space = xplane_pb2.XSpace()
    space.ParseFromString(pathlib.Path(glob.glob(f"{folder}/**/*.xplane.pb", recursive=True)[0]).read_bytes())
    milliseconds, counts = collections.Counter(), collections.Counter()
    for plane in space.planes:
        names = {key: value.name for key, value in plane.event_metadata.items()}
        for line in plane.lines:
            for event in line.events:
                name = re.sub(r"[.][0-9]+$", "", names.get(event.metadata_id, "?"))
                milliseconds[name] += event.duration_ps / 1e9
                counts[name] += 1
    for name, total in milliseconds.most_common(top):
        print(f"  {total:8.1f} ms {counts[name]:6d}x {name[:80]}")


def measure_one(args):
    """One process's line: the projection's step, and with `--model` its decode."""
    import keras

    model = None
    if args.model:
        from keras_transformer import runs

        model = keras.saving.load_model(pathlib.Path(args.model) / runs.MODEL, compile=False)
        args.vocab, args.d_model = model.decoder_embedding.weights[0].shape
    parts = []
    if keras.backend.backend() == "tensorflow":
        parts.append(f"projection {time_projection(args.rows, args.d_model, args.vocab):.3f} ms/step")
    if model is not None:
        milliseconds, digest = time_decode(model, args)
        parts.append(f"decode {milliseconds:.0f} ms (ids {digest})")
    print(" | ".join(parts), flush=True)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    if args.one:
        return measure_one(args)
    from machine import machine_line

    print(machine_line(), flush=True)
    print("command: python benchmarks/xla_dot_libraries.py " + " ".join(argv), flush=True)
    child = [sys.executable, __file__, "--one", *argv]
    for round_number in range(1, args.rounds + 1):
        for name in args.settings.split(","):
            environment = dict(os.environ, **SETTINGS[name])
            environment["XLA_FLAGS"] = f"{environment.get('XLA_FLAGS', '')} {args.extra_xla_flags}".strip()
            done = subprocess.run(child, env=environment, capture_output=True, text=True)
            lines = done.stdout.rstrip().splitlines() if done.returncode == 0 else [done.stderr[-500:]]
            print(f"round {round_number} | {name:10s} | {lines[-1]}", *lines[:-1], sep="\n", flush=True)


if __name__ == "__main__":
    main()
