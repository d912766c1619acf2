"""Levers on the real-size decoder outside TensorFlow's XLA:CPU: Keras on JAX, bf16 products, rows per product.

The same source ids (the first `--sentences` English sentences of multi30k's
`test_2016_flickr`, sorted by length, tokenized by the run's translator, in
batches of 32 padded to one width) are decoded greedy and with beam 4, at most
64 tokens, from the same run (`--run`: an imported OPUS-MT-base-shaped
run, as `benchmarks/real_size.py` builds), by the package's searches
(`decoding.compile_search` / `decoding.bind`), each system in a process of
its own, the processes alternating for `--rounds` rounds:

- `tf`: Keras on TensorFlow, the search one XLA program per shape (what
  `export.load` decodes with);
- `jax`: Keras on JAX (jaxlib's newer XLA:CPU), the search under `jax.jit`
  with the weights passed as arguments (`keras.StatelessScope`), not
  captured as constants (constants compiled 4x slower and held a copy of
  the weights per program);
- `jax-bf16`: the same with the 2-D weights held in bfloat16 and every
  projection a bf16 x bf16 product summed in float32 (`preferred_element_type`),
  which jaxlib's XLA:CPU runs on the CPU's bf16 units. The layers cast a
  kernel to the input's dtype before the product, so this system patches
  that cast and `matmul_last_axis` in this process only: a measurement of the
  route, not a shipped engine.

Then, in `tf`, greedy with 64 and 128 rows per product (two and four
batches' rows in one step) against 32, and the parts of a beam step at 128
rows (4 beams x 32 sentences) timed apart as XLA programs: the 58,101-word
output projection, the log-softmax, the top-k over 4 x 58,101 candidates
and the reorder of a 6-layer cache.

Every system's warm time (one pass) is per round (the first pass compiles and is
reported apart), with the output ids compared to `tf`'s. Writes JSON with the
command and the machine (its CPU flags among them). Not run by CI.

Example:

    python benchmarks/decode_levers.py --run /path/to/opus-mt-base-run --rounds 3
"""

import argparse
import gzip
import json
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent
DATA = REPO.parent / "shared" / "data" / "multi30k_task1" / "raw" / "test_2016_flickr.en.gz"
RESULTS = REPO / "benchmarks" / "results" / "real_size" / "decode_levers.json"
MAX_LENGTH = 64
BATCH = 32


def peak_rss_mb():
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


# -- the parent: ids, then the children in turn ---------------------------------------------------


def write_ids(run, sentences, path):
    """The run's translator's source ids of the sentences, sorted by length, one width."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import numpy as np
    import tensorflow as tf

    from keras_transformer import export

    translator = export.load(run)
    lines = sorted(gzip.open(DATA, "rt", encoding="utf-8").read().splitlines()[:sentences], key=len)
    batches = [lines[i : i + BATCH] for i in range(0, len(lines), BATCH)]
    defaults = [tf.fill([len(batch)], "") for batch in batches]  # the run's languages, no prefix
    rows = [translator.search_inputs(tf.constant(b), d, d, d)[0].numpy() for b, d in zip(batches, defaults)]
    width = max(r.shape[1] for r in rows)
    pad = translator.model.config.pad_id
    ids = np.concatenate([np.pad(r, ((0, 0), (0, width - r.shape[1])), constant_values=pad) for r in rows])
    np.save(path, ids[: len(lines)].astype("int32"))


def child(args, system, search, extra=()):
    env = dict(os.environ, KERAS_BACKEND="jax" if system.startswith("jax") else "tensorflow", TF_CPP_MIN_LOG_LEVEL="3")
    command = [sys.executable, __file__, "--child", system, "--search", search, "--run", args.run]
    command += ["--ids", args.ids, "--out", args.out, *extra]
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        raise SystemExit(f"{system} {search} failed:\n{done.stderr[-3000:]}")
    result = json.loads(lines[-1])
    print(json.dumps(result), flush=True)
    return result


def summary(results, reference):
    """Per system and search: median warm seconds, the ratio to `tf`, ids equal to `tf`'s."""
    import numpy as np

    table = {}
    for (system, search), runs in results.items():
        warm = statistics.median(t for run in runs for t in run["warm_s"])
        base = statistics.median(t for run in results[("tf", search)] for t in run["warm_s"])
        ids, ref = np.load(runs[0]["ids_file"]), np.load(reference[search])
        table[f"{system} {search}"] = {
            "warm_s_median": round(warm, 3),
            "tf_over_this": round(base / warm, 3),
            "first_pass_s": [run["first_s"] for run in runs],
            "peak_rss_mb": max(run["peak_rss_mb"] for run in runs),
            "ids_equal_to_tf": int((ids == ref).all(axis=1).sum()),
            "sentences": int(len(ref)),
        }
    return table


def main(args):
    sys.path.insert(0, str(HERE))
    from machine import describe_machine

    scratch = pathlib.Path(tempfile.mkdtemp(prefix="decode-levers-"))
    args.ids, args.out = str(scratch / "ids.npy"), str(scratch)
    write_ids(args.run, args.sentences, args.ids)
    results = {}
    for _ in range(args.rounds):
        for search in ("greedy", "beam"):
            for system in ("tf", "jax", "jax-bf16"):
                results.setdefault((system, search), []).append(child(args, system, search))
    reference = {search: results[("tf", search)][0]["ids_file"] for search in ("greedy", "beam")}
    rows = {r: child(args, "tf", "greedy", ("--rows", str(r))) for r in (32, 64, 128)}
    parts = child(args, "tf", "beam-parts")
    report = {
        "benchmark": "decode_levers",
        "command": " ".join([sys.executable.rsplit("/", 1)[-1], *sys.argv]),
        "machine": describe_machine(),
        "settings": {
            "sentences": args.sentences,
            "batch": BATCH,
            "max_length": MAX_LENGTH,
            "beam": 4,
            "rounds": args.rounds,
            "run": args.run,
        },
        "systems": summary(results, reference),
        "rows_per_product": {str(r): {k: v for k, v in res.items() if k != "ids_file"} for r, res in rows.items()},
        "beam_step_parts_ms": parts["parts_ms"],
    }
    pathlib.Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(args.output).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(report["systems"], indent=1))


# -- the children ---------------------------------------------------------------------------------


def bf16_products():
    """Patches the layers' projections to bf16 x bf16 products summed in float32 (JAX), bf16 kernels kept."""
    import types

    import jax.numpy as jnp
    from keras import ops

    import keras_transformer.layers.attention as attention
    import keras_transformer.layers.embedding as embedding
    import keras_transformer.layers.feed_forward as feed_forward

    def product(x, kernel):
        rows = jnp.reshape(x, (-1, x.shape[-1])).astype(jnp.bfloat16)
        out = jnp.matmul(rows, kernel.astype(jnp.bfloat16), preferred_element_type=jnp.float32)
        return jnp.reshape(out, (*x.shape[:-1], kernel.shape[-1]))

    def cast(x, dtype):  # a bf16 kernel stays bf16 for `product`
        if getattr(x, "dtype", None) == jnp.bfloat16 and len(x.shape) == 2:
            return x
        return ops.cast(x, dtype)

    patched_ops = types.SimpleNamespace(**{name: getattr(ops, name) for name in dir(ops) if not name.startswith("_")})
    patched_ops.cast = cast
    for module in (attention, embedding, feed_forward):
        module.matmul_last_axis, module.ops = product, patched_ops


def jax_decoder(model, search, bf16):
    import jax
    import jax.numpy as jnp
    import keras

    from keras_transformer import decoding

    bound = decoding.bind(model, search, MAX_LENGTH)
    variables = model.variables
    values = [v.value for v in variables]
    if bf16:
        bf16_products()
        values = [v.astype(jnp.bfloat16) if v.ndim >= 2 and v.dtype == jnp.float32 else v for v in values]

    @jax.jit
    def decode(values, source):
        with keras.StatelessScope(state_mapping=list(zip(variables, values))) as scope:
            scope.state_mapping.update({id(k): v for k, v in zip(variables, values)})  # bf16 kept as given
            return bound.run(source).best().ids

    return lambda source: decode(values, source)


def run_child(args):
    import keras
    import numpy as np

    from keras_transformer import decoding
    from keras_transformer.models.loading import load_model

    if args.search == "beam-parts":
        print(json.dumps({"parts_ms": beam_parts()}))
        return
    ids = np.load(args.ids)
    model = load_model(pathlib.Path(args.run) / "model.keras")
    search = decoding.GreedySearch(alpha=0.0) if args.search == "greedy" else decoding.BeamSearch(4, alpha=0.0)
    if args.child == "tf":
        compiled = decoding.compile_search(model, search, max_length=MAX_LENGTH)
        decode = lambda source: compiled(source).best().ids  # noqa: E731
    else:
        decode = jax_decoder(model, search, bf16=args.child == "jax-bf16")
    rows = args.rows or BATCH
    batches = [keras.ops.convert_to_tensor(ids[i : i + rows]) for i in range(0, len(ids), rows)]

    def run():
        return np.concatenate([np.asarray(keras.ops.convert_to_numpy(decode(b))) for b in batches])

    start = time.perf_counter()
    out = run()
    first = time.perf_counter() - start
    start = time.perf_counter()
    run()
    warm = [round(time.perf_counter() - start, 3)]
    ids_file = pathlib.Path(args.out) / f"{args.child}-{args.search}-{rows}-{time.time_ns()}.npy"
    np.save(ids_file, np.pad(out, ((0, 0), (0, MAX_LENGTH - out.shape[1]))))
    result = {
        "system": args.child,
        "search": args.search,
        "rows": rows,
        "first_s": round(first, 2),
        "warm_s": warm,
        "peak_rss_mb": peak_rss_mb(),
        "load_1min": round(os.getloadavg()[0], 2),
        "ids_file": str(ids_file),
    }
    print(json.dumps(result))


def beam_parts(rows=128, vocab=58101, width=512, layers=6, length=32, repeats=20):
    """Milliseconds of a beam step's parts at `rows` rows, each an XLA program timed alone (TensorFlow)."""
    import numpy as np
    import tensorflow as tf

    hidden = tf.constant(np.random.randn(rows, width).astype("float32"))
    table = tf.Variable(np.random.randn(vocab, width).astype("float32") * 0.05)
    logits = tf.constant(np.random.randn(rows, vocab).astype("float32"))
    flat = tf.reshape(logits, (rows // 4, 4 * vocab))
    cache = [tf.constant(np.random.randn(rows, length, width).astype("float32")) for _ in range(2 * layers)]
    order = tf.constant(np.random.randint(0, rows, rows).astype("int32"))
    parts = {
        "output_projection": (lambda: tf.matmul(hidden, table, transpose_b=True), ()),
        "log_softmax": (lambda: tf.nn.log_softmax(logits), ()),
        "top_k_8_of_4x58101": (lambda: tf.math.top_k(flat, 8).values, ()),
        "cache_reorder_6_layers": (lambda: [tf.gather(c, order) for c in cache], ()),
    }
    timed = {}
    for name, (fn, _) in parts.items():
        compiled = tf.function(fn, jit_compile=True)
        compiled()
        start = time.perf_counter()
        for _ in range(repeats):
            out = compiled()
        tf.nest.map_structure(lambda t: t.numpy(), out)
        timed[name] = round((time.perf_counter() - start) / repeats * 1e3, 3)
    return timed


def parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", required=True, help="an imported OPUS-MT-base-shaped run directory")
    parser.add_argument("--sentences", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--output", default=str(RESULTS))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--search", help=argparse.SUPPRESS)
    parser.add_argument("--rows", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--ids", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


if __name__ == "__main__":
    arguments = parse()
    if arguments.child:
        run_child(arguments)
    else:
        main(arguments)
