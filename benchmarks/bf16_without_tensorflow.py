"""bfloat16 on a CPU with bf16 units where TensorFlow is not installed: PyTorch and Keras on JAX.

`bf16_routes.py` compares this package's bfloat16 routes inside TensorFlow.
Some machines with bf16 units (`avx512_bf16`, `amx_bf16` in /proc/cpuinfo)
have PyTorch and JAX but no TensorFlow; there this script measures what can
run, pinned to `--cores` (default: the first two usable cores):

* **matmul**: a `--size`² product in float32 and bfloat16, through PyTorch
  (oneDNN) and through JAX (XLA:CPU): the best rate each precision reaches;
* **train**: `train_throughput.py`'s configuration (3 + 3 layers, d_model 256,
  batch 64 x 32, Adam), PyTorch eager in float32 and under
  `torch.autocast("cpu", dtype=torch.bfloat16)`, and this package's
  `build_transformer` on Keras's JAX backend (`jit_compile=True`) in float32
  and `mixed_bfloat16`.

PyTorch and XLA both load LLVM, so each framework runs in its own process, one
after the other; inside a process its two precisions take turns (round robin,
the order rotating each round). Step times are medians over rounds; bf16's
speed-up is the median of per-round ratios. Results go to
`benchmarks/results/training/bf16_without_tensorflow.json`. Not run by CI.

Example:

    python benchmarks/bf16_without_tensorflow.py                 # ~3 minutes on 2 cores
    python benchmarks/bf16_without_tensorflow.py --rounds 5 --frameworks torch
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

from machine import describe_machine  # noqa: E402
from train_throughput import (  # noqa: E402
    CONFIG,
    build_ours,
    make_batch,
    make_pytorch,
    median,
    round_robin,
    train_flops,
)

FRAMEWORKS = ("torch", "jax")
BF16_FLAGS = ("avx512_bf16", "amx_bf16")


def cpu_flags():
    """The bf16 flags /proc/cpuinfo reports (empty where it reports none or cannot be read).

    `keras_transformer.training.precision.cpu_bf16_units` reads the same, but importing
    the package imports Keras, which fails without TensorFlow unless a backend
    is chosen; this parent process chooses none (its workers run JAX).
    """
    try:
        words = set(pathlib.Path("/proc/cpuinfo").read_text().split())
    except OSError:
        return []
    return [flag for flag in BF16_FLAGS if flag in words]


def best_rate(run, flops, rounds, repeats=5):
    """GFLOP/s of the fastest of `rounds` runs of `repeats` calls of `run()`."""
    run()
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(repeats):
            run()
        best = min(best, (time.perf_counter() - start) / repeats)
    return flops / best / 1e9


# --------------------------------------------------------------------------
# Worker side: one framework, both precisions
# --------------------------------------------------------------------------


def torch_work(size, rounds):
    """PyTorch's matmul rates and its two training steps, float32 and bf16 autocast."""
    sys.modules.setdefault("triton", None)  # as in train_throughput: no GPU kernels on the CPU
    import torch

    threads = len(os.sched_getaffinity(0))
    matmul = {}
    for dtype in ("float32", "bfloat16"):
        a, b = (torch.randn(size, size, dtype=getattr(torch, dtype)) for _ in range(2))
        matmul[dtype] = best_rate(lambda a=a, b=b: torch.mm(a, b), 2 * size**3, rounds)
    steps = {"float32": make_pytorch(CONFIG, 1, mode="eager"), "bfloat16": make_pytorch(CONFIG, 1, mode="bf16")}
    torch.set_num_threads(threads)  # make_pytorch takes every core the machine has, not the pinned ones
    return matmul, steps


def keras_jax_step(policy):
    """`step(n)`: n training steps of this package's model on Keras's JAX backend, in `policy`."""
    import keras

    from keras_transformer import MaskedSparseCategoricalCrossentropy

    keras.mixed_precision.set_global_policy(policy)
    keras.utils.set_random_seed(0)
    model = build_ours(CONFIG)
    keras.mixed_precision.set_global_policy("float32")
    model.compile(
        optimizer=keras.optimizers.Adam(1e-4),
        loss=MaskedSparseCategoricalCrossentropy(label_smoothing=0.1),
        jit_compile=True,
    )
    source, decoder_inputs, labels = make_batch(**CONFIG)
    inputs = {"encoder_inputs": source, "decoder_inputs": decoder_inputs}

    def step(n):
        for _ in range(n):
            logs = model.train_on_batch(inputs, labels, return_dict=True)
        float(logs["loss"])  # block until the last step is done
        return n

    return step


def jax_work(size, rounds):
    """JAX's matmul rates and this package's two training steps on Keras's JAX backend."""
    import jax
    import jax.numpy as jnp

    matmul = {}
    product = jax.jit(jnp.matmul)
    for dtype in ("float32", "bfloat16"):
        keys = jax.random.split(jax.random.PRNGKey(0))
        a, b = (jax.random.normal(key, (size, size), dtype=dtype) for key in keys)
        matmul[dtype] = best_rate(lambda a=a, b=b: product(a, b).block_until_ready(), 2 * size**3, rounds)
    return matmul, {"float32": keras_jax_step("float32"), "bfloat16": keras_jax_step("mixed_bfloat16")}


def worker(framework, size, rounds, steps):
    matmul, competitors = {"torch": torch_work, "jax": jax_work}[framework](size, rounds)
    for step in competitors.values():
        step(1)  # compile and warm up
        step(1)
    times, loads = round_robin(competitors, rounds, dict.fromkeys(competitors, steps))
    print(json.dumps({"matmul_gflops": matmul, "times": times, "loads": loads, "machine": describe_machine()}))


# --------------------------------------------------------------------------
# Parent side
# --------------------------------------------------------------------------


def run_worker(framework, args):
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", CUDA_VISIBLE_DEVICES="")
    command = [sys.executable, __file__, "--worker", framework]
    command += ["--size", str(args.size), "--rounds", str(args.rounds), "--steps", str(args.steps)]
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    if result.returncode or not lines:
        raise SystemExit(f"{framework} worker failed (exit {result.returncode}):\n{result.stderr[-3000:]}")
    return json.loads(lines[-1])


def summarize(report, flops):
    """One row per precision: step time, bf16's speed-up, model GFLOP/s and its share of the matmul rate."""
    times = report["times"]
    rows = {}
    for dtype, rounds in times.items():
        wall = median(w for w, _ in rounds)
        rows[dtype] = {
            "step_ms": wall * 1000,
            "cpu_ms_per_step": median(c for _, c in rounds) * 1000,
            "speedup_over_float32": median(f[0] / t[0] for f, t in zip(times["float32"], rounds)),
            "model_gflops_per_s": flops / wall / 1e9,
            "fraction_of_matmul_rate": flops / wall / 1e9 / report["matmul_gflops"][dtype],
            "step_ms_rounds": [w * 1000 for w, _ in rounds],
        }
    return rows


def print_table(results):
    print("| framework | precision | step ms | bf16 vs float32 | model GFLOP/s | of its matmul rate | matmul GFLOP/s |")
    print("|---|---|---|---|---|---|---|")
    for framework, result in results.items():
        for dtype, row in result["rows"].items():
            print(
                f"| {framework} | {dtype} | {row['step_ms']:.0f} | {row['speedup_over_float32']:.2f}x "
                f"| {row['model_gflops_per_s']:.0f} | {row['fraction_of_matmul_rate']:.0%} "
                f"| {result['matmul_gflops'][dtype]:.0f} |"
            )


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frameworks", default=",".join(FRAMEWORKS), help="comma-separated subset of torch,jax")
    parser.add_argument("--cores", help="comma-separated CPU numbers to pin to (default: the first two usable)")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds")
    parser.add_argument("--steps", type=int, default=2, help="training steps per precision per round")
    parser.add_argument("--size", type=int, default=2048, help="matmul size")
    parser.add_argument("--output", default=str(RESULTS / "bf16_without_tensorflow.json"))
    parser.add_argument("--worker", choices=FRAMEWORKS, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        return worker(args.worker, args.size, args.rounds, args.steps)
    cores = [int(c) for c in args.cores.split(",")] if args.cores else sorted(os.sched_getaffinity(0))[:2]
    os.sched_setaffinity(0, cores)  # the workers inherit it
    flags = cpu_flags()
    print(f"Pinned to cores {cores}; bf16 flags in /proc/cpuinfo: {', '.join(flags) or 'none'}", flush=True)
    flops = train_flops(**CONFIG)
    results = {}
    for framework in args.frameworks.split(","):
        report = run_worker(framework, args)
        results[framework] = {
            "matmul_gflops": report["matmul_gflops"],
            "rows": summarize(report, flops),
            "loadavg_per_round": report["loads"],
            "machine": report["machine"],
        }
        print(f"{framework}: done", flush=True)
    print_table(results)
    output = pathlib.Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "command": " ".join(["python"] + sys.argv),
        "time": time.strftime("%Y-%m-%d %H:%M:%S"),
        "cores": cores,
        "bf16_flags": flags,
        "config": CONFIG,
        "flops_per_step": flops,
        "timing": {"rounds": args.rounds, "steps_per_round": args.steps, "matmul_size": args.size},
        "results": results,
    }
    output.write_text(json.dumps(record, indent=2) + "\n")
    print(f"Wrote {output}")


if __name__ == "__main__":
    main()
