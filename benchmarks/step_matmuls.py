"""Where the training step's time goes: each matmul of the compiled step, timed alone.

Compiles the issue-8 training step of `train_throughput.py` (this package's
model, XLA), reads the program XLA actually runs (the optimized HLO, which XLA
dumps as text), and times every float32 `dot` in it alone: compiled by itself
on random operands of the same shapes, with the same contracting and batch
dimensions (so the same transposed or untransposed operand layouts). Prints
the dots grouped by shape and layout, with their rate and their total per
step, next to the step's own time measured in the same process. When the sum
of the dots comes close to the step time, the step is bound by its matmuls,
and how near it can come to the machine's ceiling is how fast XLA:CPU runs
those shapes. Results go to `benchmarks/results/training/step_matmuls.json`. Not run
by CI.

Example:

    python benchmarks/step_matmuls.py          # about a minute on 2 cores
"""

import argparse
import collections
import json
import os
import pathlib
import re
import shutil
import sys
import tempfile
import time

DUMP = tempfile.mkdtemp(prefix="step_matmuls_")
# XLA reads its flags when TensorFlow first compiles, so they are set before any import.
os.environ["XLA_FLAGS"] = " ".join(
    [
        os.environ.get("XLA_FLAGS", ""),
        f"--xla_dump_to={DUMP}",
        "--xla_dump_hlo_as_text",
        "--xla_dump_hlo_module_re=one_step_on_data",
    ]
).strip()

import train_throughput  # noqa: E402  (sets TensorFlow's environment and sys.path)
from machine import describe_machine  # noqa: E402

NAMED_SHAPE = re.compile(r"%([\w.\-]+) = f32\[([0-9,]*)\]")
DOT = re.compile(
    r"= f32\[[0-9,]*\]\{[0-9,]*\} dot\(%([\w.\-]+), %([\w.\-]+)\), "
    r"(?:lhs_batch_dims=\{([0-9,]*)\}, )?lhs_contracting_dims=\{([0-9,]*)\}, "
    r"(?:rhs_batch_dims=\{([0-9,]*)\}, )?rhs_contracting_dims=\{([0-9,]*)\}"
)


def _ints(text):
    return tuple(int(x) for x in (text or "").split(",") if x)


def step_dots(hlo_text):
    """Counter of `(lhs_shape, rhs_shape, lhs_batch, lhs_contracting, rhs_batch, rhs_contracting)`."""
    shapes = {name: _ints(dims) for name, dims in NAMED_SHAPE.findall(hlo_text)}
    dots = collections.Counter()
    for lhs, rhs, lhs_batch, lhs_contract, rhs_batch, rhs_contract in DOT.findall(hlo_text):
        dots[
            (shapes[lhs], shapes[rhs], _ints(lhs_batch), _ints(lhs_contract), _ints(rhs_batch), _ints(rhs_contract))
        ] += 1
    return dots


def time_dot(lhs_shape, rhs_shape, lhs_batch, lhs_contract, rhs_batch, rhs_contract, reps):
    """Best-of-5 seconds of one such dot, XLA-compiled alone, and its FLOPs."""
    import tensorflow as tf
    from tensorflow.compiler.tf2xla.python import xla
    from tensorflow.compiler.xla import xla_data_pb2

    numbers = xla_data_pb2.DotDimensionNumbers(
        lhs_batch_dimensions=lhs_batch,
        rhs_batch_dimensions=rhs_batch,
        lhs_contracting_dimensions=lhs_contract,
        rhs_contracting_dimensions=rhs_contract,
    )
    dot = tf.function(lambda a, b: xla.dot_general(a, b, numbers, None), jit_compile=True)
    a, b = tf.random.normal(lhs_shape), tf.random.normal(rhs_shape)
    out = dot(a, b)
    out.numpy()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(reps):
            out = dot(a, b)
        out.numpy()
        best = min(best, (time.perf_counter() - start) / reps)
    contracted = 1
    for axis in lhs_contract:
        contracted *= lhs_shape[axis]
    return best, 2 * out.shape.num_elements() * contracted


def describe(lhs_shape, rhs_shape, lhs_batch, lhs_contract, rhs_batch, rhs_contract):
    """`(2048, 256) x (256, 768) over 1/0`: the operands and the axes each is summed over."""
    text = f"{tuple(lhs_shape)} x {tuple(rhs_shape)} over {_axes(lhs_contract)}/{_axes(rhs_contract)}"
    return text + (f", batch {_axes(lhs_batch)}/{_axes(rhs_batch)}" if lhs_batch else "")


def _axes(axes):
    return ",".join(str(axis) for axis in axes)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds of the step")
    parser.add_argument("--steps", type=int, default=4, help="steps per round")
    parser.add_argument("--output", default=str(train_throughput.RESULTS / "step_matmuls.json"))
    args = parser.parse_args(argv)

    config = train_throughput.CONFIG
    try:
        step = train_throughput.make_ours(config, 2)
        step(2)  # compile: XLA writes the program to DUMP
        programs = sorted(pathlib.Path(DUMP).glob("*one_step_on_data*after_optimizations.txt"))
        if not programs:
            sys.exit(f"XLA wrote no optimized training step to {DUMP}")
        program = programs[-1].name
        dots = step_dots(programs[-1].read_text())
    finally:
        shutil.rmtree(DUMP, ignore_errors=True)
    times, _ = train_throughput.round_robin({"ours": step}, args.rounds, {"ours": args.steps})
    step_ms = [wall * 1000 for wall, _ in times["ours"]]
    step_median = train_throughput.median(step_ms)

    rows = []
    for key, count in dots.items():
        seconds, flops = time_dot(*key, reps=10)
        rows.append(
            {
                "dot": describe(*key),
                "count": count,
                "ms_each": seconds * 1000,
                "ms_per_step": seconds * 1000 * count,
                "gflops_per_s": flops / seconds / 1e9,
            }
        )
    rows.sort(key=lambda row: -row["ms_per_step"])
    total = sum(row["ms_per_step"] for row in rows)

    print(f"The compiled training step ({program}): {sum(dots.values())} dots of {len(dots)} kinds")
    print(f"| {'dot: operands over their summed axes':58s} | count | ms each | ms/step | GFLOP/s |")
    print(f"|{'-' * 60}|-------|---------|---------|---------|")
    for row in rows:
        print(
            f"| {row['dot']:58s} | {row['count']:5d} | {row['ms_each']:7.3f} | "
            f"{row['ms_per_step']:7.1f} | {row['gflops_per_s']:7.0f} |"
        )
    print(
        f"Sum of the dots, each alone: {total:.0f} ms per step. The step itself: "
        f"{step_median:.0f} ms (median of {args.rounds} rounds of {args.steps}); "
        f"the dots are {total / step_median:.0%} of it."
    )

    output = pathlib.Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(
        json.dumps(
            {
                "command": " ".join(["python"] + sys.argv),
                "time": time.strftime("%Y-%m-%d %H:%M:%S"),
                "machine": describe_machine(),
                "config": config,
                "program": program,
                "step_ms_rounds": step_ms,
                "step_ms": step_median,
                "dots_ms_per_step": total,
                "dots": rows,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"Wrote {output}")


if __name__ == "__main__":
    main()
