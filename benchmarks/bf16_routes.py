"""bfloat16 training routes on a CPU with bf16 units: which one is really faster than float32 + XLA?

Each *route* is a way to run the same work: a precision (float32 or Keras's
`mixed_bfloat16`), a compiler setting (`jit_compile=True`, no XLA, TensorFlow's
autoclustering) and the environment it needs (`XLA_FLAGS`, `TF_XLA_FLAGS`,
`KERAS_BACKEND`). XLA reads its flags once per process, so every route runs in
its own long-lived worker process; the parent asks the workers in turn (round
robin, the order rotating every round) to run a few steps, so the load of a
shared machine falls on all of them alike. Only one worker computes at a time.

Two measurements:

* **matmul**: a 2048 x 2048 matmul per route and dtype: the best rate each
  path reaches on this machine (the ceiling of the precision a step runs in).
* **train**: the training step of `train_throughput.py`'s configuration
  (3 + 3 layers, d_model 256, batch 64 x 32, Adam), with each route's
  precision, compiler and flags; its time, its ratio to float32 + XLA (median
  of per-round ratios) and its model GFLOP/s as a fraction of the best matmul
  rate in its precision.

Results go to `benchmarks/results/training/bf16_routes.json`, with the command,
the machine and the load average of every round. Not run by CI.

Example:

    python benchmarks/bf16_routes.py                       # both parts, ~10 minutes on 2 cores
    python benchmarks/bf16_routes.py --part matmul --rounds 5
    python benchmarks/bf16_routes.py --part train --routes f32_xla,bf16_no_xla,bf16_autocluster_fusible
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results" / "training"
for path in (REPO, REPO / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from keras_transformer.training.precision import AUTOCLUSTER_FLAGS  # noqa: E402

# name -> (policy, compiler, extra environment). compiler: "xla", "none", "auto" (autoclustering) or
# "hybrid" (the model without XLA, the loss XLA-compiled).
ROUTES = {
    "f32_xla": ("float32", "xla", {}),
    "f32_no_xla": ("float32", "none", {}),
    "bf16_xla": ("mixed_bfloat16", "xla", {}),
    "bf16_no_xla": ("mixed_bfloat16", "none", {}),
    "bf16_xla_onednn": ("mixed_bfloat16", "xla", {"XLA_FLAGS": "--xla_cpu_use_onednn=true"}),
    "bf16_xla_onednn_custom_call": (
        "mixed_bfloat16",
        "xla",
        {"XLA_FLAGS": "--xla_cpu_use_onednn=true --xla_cpu_experimental_onednn_custom_call=true"},
    ),
    "bf16_xla_onednn_fusion_dot": (
        "mixed_bfloat16",
        "xla",
        {"XLA_FLAGS": "--xla_cpu_experimental_onednn_fusion_type=dot"},
    ),
    "bf16_xla_xnn_dot": ("mixed_bfloat16", "xla", {"XLA_FLAGS": "--xla_cpu_experimental_xnn_fusion_type=dot"}),
    "bf16_xla_ynn_dot": ("mixed_bfloat16", "xla", {"XLA_FLAGS": "--xla_cpu_experimental_ynn_fusion_type=dot"}),
    "bf16_xla_no_thunks": ("mixed_bfloat16", "xla", {"XLA_FLAGS": "--xla_cpu_use_thunk_runtime=false"}),
    # TensorFlow autoclustering: XLA compiles clusters of the graph, the rest runs as TensorFlow (oneDNN) ops.
    "bf16_autocluster": (
        "mixed_bfloat16",
        "auto",
        {"TF_XLA_FLAGS": "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit"},
    ),
    # ... clustering only the elementwise ops, so the matmuls stay oneDNN's: the hybrid.
    "bf16_autocluster_fusible": (
        "mixed_bfloat16",
        "auto",
        {"TF_XLA_FLAGS": "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit --tf_xla_ops_to_cluster=FUSIBLE"},
    ),
    # The model without XLA (oneDNN's bf16 matmuls), the loss and its gradient XLA-compiled ...
    "bf16_hybrid_loss_only": ("mixed_bfloat16", "hybrid", {}),
    # ... and the model's elementwise ops autoclustered: keras_transformer.training.precision's route.
    "bf16_hybrid": ("mixed_bfloat16", "hybrid", {"TF_XLA_FLAGS": " ".join(AUTOCLUSTER_FLAGS)}),
    "f32_hybrid": ("float32", "hybrid", {"TF_XLA_FLAGS": " ".join(AUTOCLUSTER_FLAGS)}),
    "jax_f32": ("float32", "xla", {"KERAS_BACKEND": "jax"}),
    "jax_bf16": ("mixed_bfloat16", "xla", {"KERAS_BACKEND": "jax"}),
}
# The matmul paths: name -> (compiler, extra environment); each times float32 and bfloat16.
MATMUL_PATHS = {
    "tf_xla": ("xla", {}),
    "tf_onednn": ("none", {}),  # TensorFlow's own kernels, no XLA
    "tf_xla_onednn": ("xla", {"XLA_FLAGS": "--xla_cpu_use_onednn=true"}),
    "tf_xla_onednn_custom_call": (
        "xla",
        {"XLA_FLAGS": "--xla_cpu_use_onednn=true --xla_cpu_experimental_onednn_custom_call=true"},
    ),
    "tf_xla_onednn_fusion_dot": ("xla", {"XLA_FLAGS": "--xla_cpu_experimental_onednn_fusion_type=dot"}),
    "tf_xla_xnn_dot": ("xla", {"XLA_FLAGS": "--xla_cpu_experimental_xnn_fusion_type=dot"}),
    "tf_xla_ynn_dot": ("xla", {"XLA_FLAGS": "--xla_cpu_experimental_ynn_fusion_type=dot"}),
    "jax_xla": ("xla", {"KERAS_BACKEND": "jax"}),
}
MATMUL_ROUTES = ("tf_xla", "tf_onednn", "tf_xla_onednn", "tf_xla_onednn_custom_call", "tf_xla_xnn_dot", "jax_xla")
DEFAULT_TRAIN_ROUTES = (
    "f32_xla",
    "f32_no_xla",
    "bf16_xla",
    "bf16_no_xla",
    "bf16_autocluster_fusible",
    "bf16_hybrid_loss_only",
    "bf16_hybrid",
    "jax_bf16",
)


# --------------------------------------------------------------------------
# Worker side: builds one route's work, then runs `n` steps per request
# --------------------------------------------------------------------------


def _matmul_steps(path, size):
    """`step(n)` per dtype: `size`² matmuls the route's way (JAX, XLA or TensorFlow ops)."""
    compiler, env = MATMUL_PATHS[path]
    steps = {}
    for dtype in ("float32", "bfloat16"):
        if env.get("KERAS_BACKEND") == "jax":
            import jax
            import jax.numpy as jnp

            a = jax.random.normal(jax.random.PRNGKey(0), (size, size)).astype(dtype)
            b = jax.random.normal(jax.random.PRNGKey(1), (size, size)).astype(dtype)
            matmul = jax.jit(jnp.matmul)

            def step(n, a=a, b=b, matmul=matmul):
                for _ in range(n):
                    out = matmul(a, b)
                out.block_until_ready()
                return n
        else:
            import tensorflow as tf

            a = tf.cast(tf.random.stateless_normal((size, size), seed=(1, 2)), dtype)
            b = tf.cast(tf.random.stateless_normal((size, size), seed=(3, 4)), dtype)
            matmul = tf.function(lambda a, b: tf.matmul(a, b), jit_compile=compiler == "xla")

            def step(n, a=a, b=b, matmul=matmul):
                for _ in range(n):
                    out = matmul(a, b)
                out.numpy()
                return n

        step(1)
        steps[dtype] = step
    return steps


def _train_step(route):
    """`step(n)`: n training steps of the benchmark configuration, the route's way."""
    import keras
    import train_throughput

    from keras_transformer import MaskedSparseCategoricalCrossentropy
    from keras_transformer.training.precision import compile_loss_with_xla

    policy, compiler, _ = ROUTES[route]
    keras.mixed_precision.set_global_policy(policy)
    keras.utils.set_random_seed(0)
    config = train_throughput.CONFIG
    model = train_throughput.build_ours(config)
    loss = MaskedSparseCategoricalCrossentropy(label_smoothing=0.1)
    if compiler == "hybrid":
        loss = compile_loss_with_xla(loss)
    model.compile(optimizer=keras.optimizers.Adam(1e-4), loss=loss, jit_compile=compiler == "xla")
    source, decoder_inputs, labels = train_throughput.make_batch(**config)
    inputs = {"encoder_inputs": source, "decoder_inputs": decoder_inputs}

    def step(n):
        for _ in range(n):
            loss = model.train_on_batch(inputs, labels, return_dict=True)["loss"]
        return n, float(loss)

    step(2)  # compile and warm up
    return step


def worker(route, part, size):
    """Reads `RUN n` lines, answers one JSON line each: seconds per step of the route's work."""
    work = _matmul_steps(route, size) if part == "matmul" else {"train": _train_step(route)}
    print(json.dumps({"ready": sorted(work)}), flush=True)
    for line in sys.stdin:
        name, n = line.split()
        start, cpu = time.perf_counter(), time.process_time()
        result = work[name](int(n))
        done, loss = result if isinstance(result, tuple) else (result, None)
        seconds, cpu_seconds = (time.perf_counter() - start) / done, (time.process_time() - cpu) / done
        print(json.dumps({"seconds": seconds, "cpu_seconds": cpu_seconds, "loss": loss}), flush=True)


# --------------------------------------------------------------------------
# Parent side
# --------------------------------------------------------------------------


class Worker:
    """One route's process; `run(name, n)` returns seconds per step."""

    def __init__(self, route, part, size):
        env = dict(
            os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
        )
        env.update(ROUTES[route][2] if part == "train" else MATMUL_PATHS[route][1])
        command = [sys.executable, __file__, "--worker", route, "--part", part, "--size", str(size)]
        self.route = route
        self.process = subprocess.Popen(
            command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.names = None

    def wait_ready(self):
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.route} failed to start:\n{self.process.stderr.read()[-3000:]}")
        self.names = json.loads(line)["ready"]

    def run(self, name, n):
        self.process.stdin.write(f"{name} {n}\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.route} died:\n{self.process.stderr.read()[-3000:]}")
        return json.loads(line)

    def close(self):
        self.process.stdin.close()
        self.process.wait(timeout=60)


def median(values):
    values = sorted(values)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def round_robin(workers, rounds, steps):
    """Returns {(route, name): [seconds per step per round]}, [loadavg per round], {(route, name): last answer}.

    The last answer holds the loss and the process's CPU seconds per step (`cpu_rounds`: every round's).
    """
    keys = [(w.route, name) for w in workers for name in w.names]
    by_route = {w.route: w for w in workers}
    times, losses, loads = {key: [] for key in keys}, {key: {"cpu_rounds": []} for key in keys}, []
    for index in range(rounds):
        order = keys[index % len(keys) :] + keys[: index % len(keys)]
        for route, name in order:
            time.sleep(0.3)  # lets the previous worker's threads stop spinning
            answer = by_route[route].run(name, steps)
            times[(route, name)].append(answer["seconds"])
            losses[(route, name)]["loss"] = answer["loss"]
            losses[(route, name)]["cpu_rounds"].append(answer["cpu_seconds"])
        loads.append(os.getloadavg())
        summary = "  ".join(f"{r}/{n} {times[(r, n)][-1] * 1000:.0f}ms" for r, n in keys)
        print(f"  round {index + 1}/{rounds}: {summary}  load {loads[-1][0]:.2f}", flush=True)
    return times, loads, losses


def start_workers(routes, part, size):
    """Starts the workers one after the other (compiling on 2 cores is slow enough alone)."""
    workers = []
    for route in routes:
        print(f"  starting {route} ({part})...", flush=True)
        worker_ = Worker(route, part, size)
        try:
            worker_.wait_ready()
        except RuntimeError as error:
            print(f"  {route}: {error}", file=sys.stderr)
            continue
        workers.append(worker_)
    return workers


def measure_matmuls(args):
    workers = start_workers(args.matmul_paths.split(","), "matmul", args.size)
    times, loads, _ = round_robin(workers, args.rounds, 3)
    for w in workers:
        w.close()
    flops = 2 * args.size**3
    rows = {f"{route}/{dtype}": flops / median(t) / 1e9 for (route, dtype), t in times.items()}
    return rows, loads


def measure_training(args, best_matmul):
    import train_throughput

    routes = args.routes.split(",")
    workers = start_workers(routes, "train", args.size)
    times, loads, losses = round_robin(workers, args.rounds, args.steps)
    for w in workers:
        w.close()
    flops = train_throughput.train_flops(**train_throughput.CONFIG)
    baseline = times.get(("f32_xla", "train"))
    rows = {}
    for (route, _), t in times.items():
        precision = ROUTES[route][0]
        ceiling = best_matmul.get("bfloat16" if "bfloat16" in precision else "float32")
        gflops = flops / median(t) / 1e9
        rows[route] = {
            "precision": precision,
            "compiler": ROUTES[route][1],
            "environment": ROUTES[route][2],
            "step_ms": median(t) * 1000,
            "step_ms_rounds": [s * 1000 for s in t],
            "speedup_over_f32_xla": median(b / s for b, s in zip(baseline, t)) if baseline else None,
            "model_gflops_per_s": gflops,
            "fraction_of_best_matmul_in_its_precision": gflops / ceiling if ceiling else None,
            "cpu_ms_per_step": median(losses[(route, "train")]["cpu_rounds"]) * 1000,
            "last_loss": losses[(route, "train")]["loss"],
        }
    return rows, loads, flops


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("matmul", "train", "both"), default="both")
    parser.add_argument("--routes", default=",".join(DEFAULT_TRAIN_ROUTES), help="training routes: " + ",".join(ROUTES))
    parser.add_argument(
        "--matmul-paths", default=",".join(MATMUL_ROUTES), help="matmul paths: " + ",".join(MATMUL_PATHS)
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=3, help="training steps per route per round")
    parser.add_argument("--size", type=int, default=2048, help="matmul size")
    parser.add_argument("--output", default=str(RESULTS / "bf16_routes.json"))
    parser.add_argument("--worker", choices=tuple(ROUTES) + tuple(MATMUL_PATHS), help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        return worker(args.worker, args.part, args.size)
    from machine import describe_machine, machine_line

    machine = describe_machine()
    print(machine_line(machine), flush=True)
    report = {
        "command": " ".join(["python"] + sys.argv),
        "time": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": machine,
    }
    best = {}
    if args.part in ("matmul", "both"):
        matmul, loads = measure_matmuls(args)
        best = {dtype: max(v for k, v in matmul.items() if k.endswith(dtype)) for dtype in ("float32", "bfloat16")}
        report["matmul"] = {"size": args.size, "gflops_per_s": matmul, "best": best, "loadavg_per_round": loads}
        print(f"\n{args.size}² matmul, GFLOP/s (median of {args.rounds} rounds):")
        for key, rate in sorted(matmul.items(), key=lambda kv: -kv[1]):
            print(f"  {key:32s} {rate:7.1f}")
    if args.part in ("train", "both"):
        rows, loads, flops = measure_training(args, best)
        report["train"] = {
            "flops_per_step": flops,
            "rounds": args.rounds,
            "steps_per_round": args.steps,
            "loadavg_per_round": loads,
            "routes": rows,
        }
        print(f"\nTraining step ({flops / 1e9:.1f} GFLOP), median of {args.rounds} rounds of {args.steps} steps:")
        print("| route | policy | compiler | step ms | CPU ms | vs f32+XLA | model GFLOP/s | of best matmul | loss |")
        print("|---|---|---|---|---|---|---|---|---|")
        for route, row in rows.items():
            fraction = row["fraction_of_best_matmul_in_its_precision"]
            print(
                f"| {route} | {row['precision']} | {row['compiler']} "
                f"| {row['step_ms']:.0f} | {row['cpu_ms_per_step']:.0f} "
                f"| {row['speedup_over_f32_xla'] or 0:.2f}x | {row['model_gflops_per_s']:.0f} "
                f"| {fraction or 0:.0%} | {row['last_loss']:.3f} |"
            )
        print(f"Load average: first round {loads[0]}, last {loads[-1]}")
    output = pathlib.Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(report, indent=2) + "\n")
    print(f"Wrote {output}")


if __name__ == "__main__":
    main()
