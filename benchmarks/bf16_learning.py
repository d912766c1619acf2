"""Does `mixed_bfloat16` learn what float32 learns? Multi30k loss curves against float32's run-to-run noise.

Trains the `multi30k-en-de` preset for `--epochs` epochs in float32 once per
seed of `--seeds` and in `mixed_bfloat16` once per seed of `--bf16-seeds`,
each run in its own process, and compares the per-epoch training and
validation losses and accuracies:

* **float32's range**: at each epoch, the lowest and highest value of the
  float32 runs; its width is their run-to-run noise (each seed samples its
  own tokenizer, weights, shuffling and dropout, and SentencePiece's subword
  sampling is not seeded at all, so not even two runs of one seed are
  alike);
* **outside**: for each bf16 run, how far it falls outside that range at its
  worst epoch (0 where it stays inside; positive above, negative below).

bf16 learns the same where every bf16 run stays inside. The bf16 runs
take the hybrid route that `keras-transformer train --mixed-precision
mixed_bfloat16` takes on a CPU with bf16 units (`keras_transformer.training.precision`),
also on a CPU without them, where oneDNN emulates the bf16 matmuls (slowly,
with the same rounding): `--route xla` keeps what such a CPU would get.
Losses do not depend on the machine's load, so these runs may share it;
runs that finished in `--work-dir` (an earlier call's) are not trained again.
Results go to `benchmarks/results/training/bf16_learning.json`. Not run by CI.

Example:

    python benchmarks/bf16_learning.py --data-dir DIR --work-dir /tmp/bf16-learning   # 6 runs of 3 epochs
    python benchmarks/bf16_learning.py --data-dir DIR --work-dir /tmp/b --seeds 0,1 --bf16-seeds 0 --epochs 1
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

PRECISIONS = {"float32": None, "bfloat16": "mixed_bfloat16"}


def worker(args):
    """Trains one run in this process."""
    from keras_transformer.training import precision, train

    if args.precision == "bfloat16" and args.route == "hybrid" and not precision.cpu_bf16_units():
        precision.cpu_bf16_units = lambda *_: ("emulated",)  # take the hybrid route without bf16 units
    print(json.dumps({"route": precision.training_route(PRECISIONS[args.precision])}), flush=True)
    start = time.perf_counter()
    train(
        args.preset,
        output=args.run,
        data_dir=args.data_dir,
        epochs=args.epochs,
        seed=args.seed,
        mixed_precision=PRECISIONS[args.precision],
        verbose=2,
    )
    print(json.dumps({"minutes": (time.perf_counter() - start) / 60}), flush=True)


def run_path(args, precision, seed):
    return pathlib.Path(args.work_dir) / f"{precision}-seed{seed}"


def finished(run):
    """`{"route", "minutes"}` from the log of a run that finished, else None."""
    log = run.with_suffix(".log")
    records = [json.loads(line) for line in log.read_text().splitlines() if line[:1] == "{"] if log.exists() else []
    if len(records) < 2 or "minutes" not in records[-1]:
        return None
    return {"route": records[0]["route"], "minutes": records[-1]["minutes"]}


def start_run(args, precision, seed):
    run = run_path(args, precision, seed)
    command = [sys.executable, __file__, "--worker", "--run", str(run), "--precision", precision]
    command += ["--seed", str(seed), "--epochs", str(args.epochs), "--preset", args.preset]
    command += ["--route", args.route, "--work-dir", args.work_dir]
    command += ["--data-dir", args.data_dir] if args.data_dir else []
    with open(run.with_suffix(".log"), "w") as log:
        return run, subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)


def outside(value, low, high):
    """How far `value` lies outside [low, high]: 0 inside, positive above, negative below."""
    return value - high if value > high else value - low if value < low else 0.0


def compare(curves):
    """Per metric: float32's range at each epoch, its widest, and how far each bf16 run falls outside it."""
    float32 = [curve for name, curve in curves.items() if name.startswith("float32")]
    report = {}
    for key in ("loss", "val_loss", "accuracy", "val_accuracy"):
        ranges = [(min(values), max(values)) for values in zip(*(curve[key] for curve in float32))]
        report[key] = {"float32_range": ranges, "float32_noise": max(high - low for low, high in ranges)}
        for name, curve in curves.items():
            if name.startswith("bfloat16"):
                report[key][name] = max(
                    (outside(value, *bounds) for value, bounds in zip(curve[key], ranges)), key=abs, default=0.0
                )
    return report


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", help="the corpus files (or where to download them)")
    parser.add_argument("--work-dir", required=True, help="where the runs go; runs finished there are reused")
    parser.add_argument("--preset", default="multi30k-en-de")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds of the float32 runs")
    parser.add_argument("--bf16-seeds", help="comma-separated seeds of the bf16 runs (default: --seeds)")
    parser.add_argument("--parallel", type=int, default=2, help="runs at a time")
    parser.add_argument("--route", choices=("hybrid", "xla"), default="hybrid", help="the bf16 runs' route")
    parser.add_argument("--output", default=str(RESULTS / "bf16_learning.json"))
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--run", help=argparse.SUPPRESS)
    parser.add_argument("--precision", choices=PRECISIONS, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def run_all(args, pairs):
    """Trains every (precision, seed) not already finished, `--parallel` at a time; returns {name: finished(run)}."""
    pathlib.Path(args.work_dir).mkdir(parents=True, exist_ok=True)
    pending = [pair for pair in pairs if not finished(run_path(args, *pair))]
    running = []
    while pending or running:
        while pending and len(running) < args.parallel:
            running.append(start_run(args, *pending.pop(0)))
        time.sleep(5)
        for run, process in [entry for entry in running if entry[1].poll() is not None]:
            running.remove((run, process))
            if process.returncode:
                raise SystemExit(f"{run.name} failed: see {run.with_suffix('.log')}")
            print(f"{run.name}: {finished(run)}", flush=True)
    return {run.name: finished(run) for run in (run_path(args, *pair) for pair in pairs)}


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        return worker(args)
    from keras_transformer.plotting import read_history
    from keras_transformer.runs import HISTORY
    from keras_transformer.training.precision import cpu_bf16_units

    seeds = {"float32": args.seeds, "bfloat16": args.bf16_seeds or args.seeds}
    runs = run_all(args, [(precision, int(seed)) for precision in PRECISIONS for seed in seeds[precision].split(",")])
    curves = {name: read_history(pathlib.Path(args.work_dir) / name / HISTORY) for name in runs}
    report = compare(curves)
    for name, curve in curves.items():
        losses = ", ".join(f"{loss:.3f}/{val:.3f}" for loss, val in zip(curve["loss"], curve["val_loss"]))
        print(f"{name:16s} train/val loss per epoch: {losses}")
    for key, entry in report.items():
        bf16 = ", ".join(f"{name} {value:+.4f}" for name, value in entry.items() if name.startswith("bfloat16"))
        print(f"{key:12s} float32's noise {entry['float32_noise']:.4f}; outside float32's range: {bf16}")
    output = pathlib.Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "command": " ".join(["python"] + sys.argv),
        "time": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": describe_machine(),
        "cpu_bf16_units": cpu_bf16_units(),
        "runs": runs,
        "curves": curves,
        "comparison": report,
    }
    output.write_text(json.dumps(record, indent=2) + "\n")
    print(f"Wrote {output}")


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    main()
