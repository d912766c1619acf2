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

With `--breakdown`, a translator's start-up is timed part by part instead, in
fresh processes that take turns between the checkouts: each opens the run
(`--run`, or the trained single model) with an empty XLA cache folder, then
calls greedy search and then beam search as a first `translate` of each would,
twice, and reports for each search the Python tracing (TensorFlow functions
traced, graphs built, AutoGraph conversions and their seconds), the first and
the second call, the programs compiled, and, measured apart afterwards, the
conversion of the search to HLO (tf2xla) and XLA's HLO passes; a second
process on the cache the first filled shows what the persistent cache saves.

Example:

    python benchmarks/tracing.py --output benchmarks/results/tracing/tracing.json
    git worktree add /tmp/before 79df70b
    python benchmarks/tracing.py --package-dir /tmp/before --package-dir . \\
        --output benchmarks/results/tracing/tracing.json
    python benchmarks/tracing.py --package-dir /tmp/before --package-dir . --after-training \\
        --output benchmarks/results/tracing/tracing_after_training.json
    python benchmarks/tracing.py --breakdown --run RUN --package-dir /tmp/before --package-dir . \\
        --output benchmarks/results/tracing/breakdown.json
"""

import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from machine import describe_machine, machine_line

REPO = pathlib.Path(__file__).resolve().parents[1]
SOURCES = ["오늘 너무 힘들었어", ""]
BREAKDOWN_SOURCES = ["오늘 너무 힘들었어", "밥 먹었어?", "안녕", ""]
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


class TraceProbe:
    """Counts what TensorFlow traces in this process: functions (by name), graphs, AutoGraph conversions."""

    def __init__(self):
        from tensorflow.python.autograph.impl import api
        from tensorflow.python.autograph.pyct import loader
        from tensorflow.python.eager.polymorphic_function import tracing_compilation
        from tensorflow.python.framework import func_graph

        self.functions, self.graphs, self.autograph_files, self.autograph_s = [], 0, 0, 0.0
        create, build = tracing_compilation._create_concrete_function, func_graph.func_graph_from_py_func
        convert, load_source = api._convert_actual, loader.load_source

        def traced(function_type, type_context, graph, options):
            self.functions.append(options.name)
            return create(function_type, type_context, graph, options)

        def built(*args, **kwargs):
            self.graphs += 1
            return build(*args, **kwargs)

        def converted(entity, program_ctx):
            start = time.perf_counter()
            try:
                return convert(entity, program_ctx)
            finally:
                self.autograph_s += time.perf_counter() - start

        def loaded(source, delete_on_exit):
            self.autograph_files += 1
            return load_source(source, delete_on_exit)

        tracing_compilation._create_concrete_function, func_graph.func_graph_from_py_func = traced, built
        api._convert_actual, loader.load_source = converted, loaded

    def take(self):
        """What was traced since the last `take`."""
        counts = dict(
            functions_traced=len(self.functions),
            function_names=sorted(set(self.functions)),
            graphs_built=self.graphs,
            autograph_conversions=self.autograph_files,
            autograph_s=round(self.autograph_s, 3),
        )
        self.functions, self.graphs, self.autograph_files, self.autograph_s = [], 0, 0, 0.0
        return counts


def breakdown_one(args):
    """One fresh process: a translator's start-up part by part, greedy then beam search; a JSON line."""
    begin = time.perf_counter()
    from keras_transformer import compile_cache

    compile_cache.enable(args.xla_cache)  # before TensorFlow's first compile: it reads the flags then
    session = compile_cache.session_folder()
    import tensorflow as tf

    from keras_transformer import export

    import_s = time.perf_counter() - begin
    probe = TraceProbe()

    def programs():
        return len(list(session.glob("*.pb")))

    def timed(function, *call_args, **kwargs):
        start = time.perf_counter()
        value = function(*call_args, **kwargs)
        return value, round(time.perf_counter() - start, 3)

    translator, load_s = timed(export.load, args.run, beam_size=args.beam_size, max_length=args.max_length)
    result = dict(import_s=round(import_s, 3), load_s=load_s, load_traces=probe.take(), searches={})
    sentences = tf.constant(json.loads(args.sentences))
    searches = translator._searches
    for name, method, graph_function, search in (
        ("greedy", translator.greedy, translator._tf_greedy_with_controls, searches._greedy),
        ("beam", translator.__call__, translator._tf_call_with_controls, searches._nbest),
    ):
        _, trace_s = timed(graph_function.get_concrete_function)
        traces = probe.take()
        before = programs()
        outputs, first_s = timed(method, sentences)
        compiled = programs() - before
        first_traces = probe.take()
        again, second_s = timed(method, sentences)
        # Apart, afterwards: the search converted to HLO (tf2xla), then with XLA's HLO passes.
        source_lang, target_lang, target_prefix, banned = translator._defaults(sentences)
        source_ids, prefix = translator.search_inputs(sentences, source_lang, target_lang, target_prefix)
        ir = search.experimental_get_compiler_ir(source_ids, prefix=prefix, ban_mask=translator.ban_mask(banned))
        ir(stage="hlo")  # traces the search alone, if it must
        _, tf2xla_s = timed(ir, stage="hlo")
        _, optimized_s = timed(ir, stage="optimized_hlo")
        result["searches"][name] = dict(
            trace_s=trace_s,
            **traces,
            first_call_s=first_s,
            retraced_in_first_call=first_traces["functions_traced"],
            programs_compiled=compiled,
            second_call_s=second_s,
            tf2xla_s=tf2xla_s,
            hlo_passes_s=round(optimized_s - tf2xla_s, 3),
            outputs_equal=bool(tf.reduce_all(tf.equal(outputs, again))),
            outputs=[text.decode("utf-8") for text in outputs.numpy().tolist()],
        )
    result["load_average_1min"] = round(os.getloadavg()[0], 2)
    print(json.dumps(result, ensure_ascii=False))


def breakdown_process(args, package_dir, run, cache):
    """One `breakdown_one` process of `package_dir` on the XLA cache folder `cache`: its JSON line as a dict."""
    command = [sys.executable, __file__, "--breakdown-one", "--run", str(run), "--xla-cache", str(cache)]
    command += ["--beam-size", str(args.beam_size), "--max-length", str(args.max_length)]
    command += ["--sentences", json.dumps(BREAKDOWN_SOURCES, ensure_ascii=False)]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(package_dir), env.get("PYTHONPATH")]))
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"breakdown with {package_dir} failed:\n{done.stderr[-3000:]}")
    row = json.loads(done.stdout.strip().splitlines()[-1])
    row.update(package_dir=str(package_dir), commit=package_commit(package_dir))
    return row


def breakdown(args, package_dirs, run):
    """`--breakdown`: fresh processes taking turns between the checkouts, cold then on the filled cache."""
    rows = []
    for repeat in range(args.repeats):
        for package_dir in package_dirs:
            cache = pathlib.Path(tempfile.mkdtemp(prefix="xla-breakdown-"))
            try:
                for cache_state in ("empty", "filled by the previous process"):
                    row = dict(breakdown_process(args, package_dir, run, cache), repeat=repeat, xla_cache=cache_state)
                    rows.append(row)
                    parts = ", ".join(
                        f"{name} trace {s['trace_s']} s ({s['functions_traced']} functions), first call "
                        f"{s['first_call_s']} s ({s['programs_compiled']} programs), second {s['second_call_s']} s"
                        for name, s in row["searches"].items()
                    )
                    print(f"{row['commit']} cache {cache_state}: load {row['load_s']} s; {parts}", flush=True)
            finally:
                shutil.rmtree(cache, ignore_errors=True)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package-dir", action="append", type=pathlib.Path, help="a package checkout (repeatable)")
    parser.add_argument("--repeats", type=int, default=3, help="measured processes per case, after a warm-up")
    parser.add_argument("--beam-size", type=int, default=2)
    parser.add_argument("--max-length", type=int, default=8)
    parser.add_argument("--after-training", action="store_true", help="measure in the process that trained the run")
    parser.add_argument("--output", type=pathlib.Path)
    parser.add_argument("--breakdown", action="store_true", help="time a translator's start-up part by part")
    parser.add_argument("--run", type=pathlib.Path, help="--breakdown: a run to open (default: train the tiny one)")
    parser.add_argument("--breakdown-one", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--xla-cache", help=argparse.SUPPRESS)
    parser.add_argument("--sentences", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.breakdown_one:
        return breakdown_one(args)
    package_dirs = [path.resolve() for path in args.package_dir or [REPO]]
    machine = describe_machine()
    print(machine_line(machine), flush=True)

    work = pathlib.Path(tempfile.mkdtemp(prefix="tracing-"))
    if args.breakdown:
        run = args.run or train_runs(work, package_dirs[0], work / "xla-cache-train")["single"]
        rows = breakdown(args, package_dirs, run)
        if args.output:
            args.output.parent.mkdir(parents=True, exist_ok=True)
            report = {"command": " ".join(["python", *sys.argv]), "machine": machine, "run": str(run), "results": rows}
            report["machine_after"] = describe_machine()
            args.output.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
        return
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
