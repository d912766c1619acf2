"""Tracing: a translator's first call and its export, single model and ensemble.

Trains the `tiny` preset (300 pairs of the bundled chatbot corpus, one epoch)
as one model and as a 2-member ensemble, then times, each in a fresh process:
`export.load(run)` with its first beam-search call, and `Translator.save`.
Every process shares one TensorFlow persistent XLA cache
(`--tf_xla_persistent_cache_directory`) and a first, unreported process fills
it, so the figures are Python tracing and loading, not XLA compilation.
With `--after-training`, each measured process first trains its own run, as a
notebook does before it translates.

To compare two revisions of the package in one run, pass `--package-dir` with
a checkout of each (e.g. a `git worktree` of the older commit); the
benchmark's runs are trained once, by the first.

Example:

    python benchmarks/tracing.py --output benchmarks/results/tracing/tracing.json
    git worktree add /tmp/before 79df70b
    python benchmarks/tracing.py --package-dir /tmp/before --package-dir . \\
        --output benchmarks/results/tracing/tracing.json
    python benchmarks/tracing.py --package-dir /tmp/before --package-dir . --after-training \\
        --output benchmarks/results/tracing/tracing_after_training.json
"""

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

from machine import describe_machine, machine_line

REPO = pathlib.Path(__file__).resolve().parents[1]
SOURCES = ["오늘 너무 힘들었어", ""]
# How every run of the benchmark is trained: the `tiny` preset on 300 pairs, one epoch.
TRAINING = dict(epochs=1, verbose=0, max_minutes=30.0, max_examples=300)

MEASURE = """
import json, pathlib, sys, time, tempfile
import tensorflow as tf
from keras_transformer import export
run, beam_size, max_length, members = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[5])
if members:
    from keras_transformer.training import train
    run = pathlib.Path(tempfile.mkdtemp()) / "run"
    train("tiny", output=run, ensemble=members, **json.loads(sys.argv[6]))
start = time.perf_counter()
translator = export.load(run, beam_size=beam_size, max_length=max_length)
translator(tf.constant(json.loads(sys.argv[4]))).numpy()
first_call = time.perf_counter() - start
start = time.perf_counter()
translator.save(pathlib.Path(tempfile.mkdtemp()) / "export")
print(json.dumps({"first_call_s": first_call, "save_s": time.perf_counter() - start}))
"""


def package_commit(package_dir):
    """The git commit checked out in `package_dir`, or None outside a git checkout."""
    command = ["git", "-C", str(package_dir), "rev-parse", "--short", "HEAD"]
    result = subprocess.run(command, capture_output=True, text=True)
    return result.stdout.strip() or None


def environment(package_dir, cache_dir):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(package_dir), env.get("PYTHONPATH")]))
    env["TF_XLA_FLAGS"] = f"{env.get('TF_XLA_FLAGS', '')} --tf_xla_persistent_cache_directory={cache_dir}".strip()
    return env


def measure(run, package_dir, cache_dir, args):
    """One fresh process, which first trains a run like `run` with `--after-training`: `{"first_call_s", "save_s"}`."""
    train_members = (2 if "ensemble" in run.name else 1) if args.after_training else 0
    command = [sys.executable, "-c", MEASURE, str(run), str(args.beam_size), str(args.max_length), json.dumps(SOURCES)]
    command += [str(train_members), json.dumps(TRAINING)]
    result = subprocess.run(command, env=environment(package_dir, cache_dir), capture_output=True, text=True)
    if result.returncode:
        sys.exit(f"measuring {run} with {package_dir} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def train_runs(work, package_dir, cache_dir):
    """The `tiny` preset trained as one model and as a 2-member ensemble: `{"single": path, "ensemble-2": path}`."""
    runs = {"single": work / "single", "ensemble-2": work / "ensemble"}
    script = (
        "import json, sys\nfrom keras_transformer.training import train\n"
        "options = json.loads(sys.argv[3])\n"
        "train('tiny', output=sys.argv[1], **options)\n"
        "train('tiny', output=sys.argv[2], ensemble=2, **options)\n"
    )
    command = [sys.executable, "-c", script, str(runs["single"]), str(runs["ensemble-2"]), json.dumps(TRAINING)]
    subprocess.run(command, env=environment(package_dir, cache_dir), check=True)
    return runs


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package-dir", action="append", type=pathlib.Path, help="a package checkout (repeatable)")
    parser.add_argument("--repeats", type=int, default=3, help="measured processes per case, after a warm-up")
    parser.add_argument("--beam-size", type=int, default=2)
    parser.add_argument("--max-length", type=int, default=8)
    parser.add_argument("--after-training", action="store_true", help="measure in the process that trained the run")
    parser.add_argument("--output", type=pathlib.Path)
    args = parser.parse_args()
    package_dirs = [path.resolve() for path in args.package_dir or [REPO]]
    machine = describe_machine()
    print(machine_line(machine), flush=True)

    work = pathlib.Path(tempfile.mkdtemp(prefix="tracing-"))
    results = []
    runs = train_runs(work, package_dirs[0], work / "xla-cache-train")
    for index, package_dir in enumerate(package_dirs):
        cache_dir = work / f"xla-cache-{index}"
        for name, run in runs.items():
            measure(run, package_dir, cache_dir, args)  # fills the XLA cache
            times = [measure(run, package_dir, cache_dir, args) for _ in range(args.repeats)]
            row = {
                "package_dir": str(package_dir),
                "commit": package_commit(package_dir),
                "model": name,
                "first_call_s": [round(t["first_call_s"], 2) for t in times],
                "save_s": [round(t["save_s"], 2) for t in times],
            }
            results.append(row)
            print(
                f"{package_dir} {name}: first call median {statistics.median(row['first_call_s']):.1f} s "
                f"{row['first_call_s']}, save median {statistics.median(row['save_s']):.1f} s {row['save_s']}",
                flush=True,
            )
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        condition = "after training, in the same process" if args.after_training else "a fresh process"
        report = {"command": " ".join(sys.argv), "machine": machine, "condition": condition, "results": results}
        args.output.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
