"""NLLB-200 at its real size: a random nllb-200-distilled-600M-shaped checkpoint imported, then translated by three.

What it measures, in one run (nothing here runs in CI: several GB, minutes):

1. **The import.** `keras-transformer import CHECKPOINT --output RUN` in a
   subprocess, `--import-repeats` times into a fresh folder: its peak
   resident memory (the kernel's high-water mark, `ru_maxrss` from
   `wait4`, and a 5 ms poll of the process and its children, which also
   gives the time it was reached), its wall time, against the size of
   `model.safetensors`. The issue's target: a peak under twice the weights.
2. **Translation speed on the same weights.** The first `--sentences`
   English sentences of multi30k's `test_2016_flickr` into `--target-lang`,
   in batches of `--batch-size` (sorted by length, the same batches for
   all), greedy and beam `--beam`, at most `--max-new-tokens` generated
   tokens (the forced language token included, as transformers'
   `max_new_tokens` counts it), 2 threads everywhere, by:
   - ours: `keras_transformer.export.load(RUN, source_lang=..., target_lang=...)`,
     the XLA translator (strings in, strings out); its first pass compiles
     and is reported apart;
   - transformers' `generate` (PyTorch, CPU), `forced_bos_token_id` the
     target language;
   - CTranslate2 float32, converted by its own `TransformersConverter`,
     `translate_batch` with `target_prefix=[[lang]]`.
   Each system is a worker process that loads its model once; one worker
   runs at a time (the machine is shared: three 600M models at once would
   take about 10 GB), a warm-up pass (greedy then beam), then `--repeats`
   rounds; the report gives the median of those rounds, the ratios, the peak RSS of each
   worker, and whether the outputs agree (the generated ids of transformers
   and CTranslate2 compared id for id, ours by string against
   transformers', since the translator returns strings), so that the
   systems are seen to generate the same tokens.

The checkpoint (`nllb_real_size_torch.py build`, run by `--torch-python`:
torch, transformers, sentencepiece, ctranslate2) is built once into
`--cache` (gitignored): 615,073,792 parameters, 2.46 GB of float32, and a
256,204-id NLLB tokenizer with the 202 language codes. Its weights are
random, so the translations are garbage; `--end-scale` (default 1: none)
scales `</s>`'s embedding row so that outputs end at different lengths.

Writes `benchmarks/results/nllb_real_size/nllb_real_size-DATE.json` and
`.md` (the machine, versions, settings, every figure and the command).

Example:

    python benchmarks/nllb_real_size.py --torch-python /path/to/torch-venv/bin/python
"""

import argparse
import datetime
import json
import math
import os
import pathlib
import shlex
import shutil
import statistics
import subprocess
import sys
import threading
import time

from corpus import read_lines

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent
TORCH_SIDE = HERE / "nllb_real_size_torch.py"
RESULTS = REPO / "benchmarks" / "results" / "nllb_real_size"
CACHE = HERE / ".cache" / "nllb_real_size"
GiB = 2**30
SYSTEMS = ("ours", "transformers", "ctranslate2")
NAMES = {
    "ours": "ours (export.load, XLA)",
    "transformers": "transformers generate (PyTorch)",
    "ctranslate2": "CTranslate2 float32 (TransformersConverter)",
}


def emit(result):
    print("@@ " + json.dumps(result), flush=True)


# ---------------------------------------------------------------- measuring a process's memory


def run_measured(command, log, env=None):
    """Runs `command`; `{"seconds", "returncode", "max_rss_bytes", "polled_peak_bytes", "peak_at_seconds"}`.

    `max_rss_bytes` is the kernel's high-water mark of the process
    (`wait4`'s `ru_maxrss`); `polled_peak_bytes` the largest sum of the RSS
    of the process and its children seen by a 5 ms poll.
    """
    import psutil

    start = time.perf_counter()
    with open(log, "a", encoding="utf-8") as handle:
        handle.write("$ " + " ".join(shlex.quote(str(c)) for c in command) + "\n")
        handle.flush()
        process = subprocess.Popen([str(c) for c in command], stdout=handle, stderr=subprocess.STDOUT, env=env)
    peak = {"bytes": 0, "at": 0.0}
    done = threading.Event()

    def poll():
        try:
            watched = psutil.Process(process.pid)
        except psutil.Error:
            return
        while not done.is_set():
            try:
                rss = watched.memory_info().rss + sum(c.memory_info().rss for c in watched.children(recursive=True))
            except psutil.Error:
                rss = 0
            if rss > peak["bytes"]:
                peak.update(bytes=rss, at=time.perf_counter() - start)
            time.sleep(0.005)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    done.set()
    poller.join()
    process.returncode = os.waitstatus_to_exitcode(status)
    return dict(
        seconds=round(seconds, 2),
        returncode=process.returncode,
        max_rss_bytes=usage.ru_maxrss * 1024,
        polled_peak_bytes=peak["bytes"],
        peak_at_seconds=round(peak["at"], 2),
    )


def measure_import(args, checkpoint, log):
    """Imports `checkpoint` `--import-repeats` times into a fresh folder; the last import is the run kept.

    With `--import-repeats 0`, the run of the last import and its figures (`import.json`) are reused.
    """
    cli = pathlib.Path(sys.executable).parent / "keras-transformer"
    run = pathlib.Path(args.cache) / "run"
    recorded = pathlib.Path(args.cache) / "import.json"
    if args.import_repeats == 0:
        return run, json.loads(recorded.read_text(encoding="utf-8"))
    weights = (checkpoint / "model.safetensors").stat().st_size
    imports = []
    for repeat in range(args.import_repeats):
        if run.exists():
            shutil.rmtree(run)
        print(f"import {repeat + 1}/{args.import_repeats} ...", flush=True)
        result = run_measured([cli, "import", checkpoint, "--output", run], log)
        if result["returncode"]:
            raise RuntimeError(f"keras-transformer import failed ({result['returncode']}); see {log}")
        result["ratio_to_weights"] = round(result["max_rss_bytes"] / weights, 3)
        print(
            f"  {result['seconds']} s, peak RSS {result['max_rss_bytes'] / GiB:.2f} GiB "
            f"({result['ratio_to_weights']}x the weights)",
            flush=True,
        )
        imports.append(result)
    figures = dict(
        weights_bytes=weights,
        model_keras_bytes=(run / "model.keras").stat().st_size,
        runs=imports,
        median_seconds=statistics.median(r["seconds"] for r in imports),
        max_rss_bytes=max(r["max_rss_bytes"] for r in imports),
        ratio_to_weights=max(r["ratio_to_weights"] for r in imports),
    )
    recorded.write_text(json.dumps(figures), encoding="utf-8")
    return run, figures


def described(checkpoint):
    """`{"parameters", "tokenizer_ids"}` of a checkpoint folder, from its safetensors header and tokenizer.json."""
    from keras_transformer.pretrained.checkpoints import Checkpoint

    shapes = [info.shape for info in Checkpoint(checkpoint).tensors().values()]
    parameters = sum(math.prod(shape) for shape in shapes)
    tokenizer = json.loads((checkpoint / "tokenizer.json").read_text(encoding="utf-8"))
    ids = set(tokenizer["model"]["vocab"].values()) | {token["id"] for token in tokenizer["added_tokens"]}
    return dict(parameters=parameters, tokenizer_ids=len(ids))


# ---------------------------------------------------------------- our worker (this venv)


def worker_ours(args):
    """Loads the run's XLA translator once, then answers requests on stdin (as `nllb_real_size_torch.serve`)."""
    import resource
    import warnings

    warnings.simplefilter("ignore")
    start = time.perf_counter()
    from keras_transformer import export

    translator = export.load(
        args.run,
        beam_size=args.beam,
        max_length=args.max_new_tokens,
        source_lang=args.source_lang,
        target_lang=args.target_lang,
    )
    load_seconds = time.perf_counter() - start

    def peak():
        return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)

    emit(dict(ready=True, load_seconds=load_seconds, peak_rss_mb=peak()))
    for line in sys.stdin:
        request = json.loads(line)
        sentences = request["sentences"]
        order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
        size = request["batch_size"]
        batches = [[sentences[i] for i in order[s : s + size]] for s in range(0, len(order), size)]
        call = translator.greedy_with_status if request["beam"] == 1 else translator.call_with_status
        start = time.perf_counter()
        strings, finished = [], []
        for batch in batches:
            result = call(batch)
            strings += [s.decode("utf-8") for s in result["translations"].numpy()]
            finished += [bool(f) for f in result["finished"].numpy()]
        seconds = time.perf_counter() - start
        unsorted_strings, unsorted_finished = [None] * len(order), [None] * len(order)
        for position, index in enumerate(order):
            unsorted_strings[index], unsorted_finished[index] = strings[position], finished[position]
        emit(dict(seconds=seconds, strings=unsorted_strings, finished=unsorted_finished, peak_rss_mb=peak()))


# ---------------------------------------------------------------- the workers, one at a time


class Worker:
    """A worker process: one JSON request a line on its stdin, one `@@ `-prefixed JSON answer on its stdout."""

    def __init__(self, name, command, log, env=None):
        self.name = name
        self._log = open(log, "a", encoding="utf-8")  # noqa: SIM115  (open for the worker's life)
        self._log.write(f"$ {' '.join(shlex.quote(str(c)) for c in command)}\n")
        self._log.flush()
        start = time.perf_counter()
        self.process = subprocess.Popen(
            [str(c) for c in command],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            env=env,
        )
        self.ready = self._answer()
        self.ready["wall_seconds_to_ready"] = round(time.perf_counter() - start, 1)

    def ask(self, request):
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        return self._answer()

    def _answer(self):
        for line in self.process.stdout:
            if line.startswith("@@ "):
                return json.loads(line[3:])
            self._log.write(line)
        raise RuntimeError(f"worker {self.name} ended (exit {self.process.wait()}); see {self._log.name}")

    def close(self):
        self.process.stdin.close()
        self.process.wait(timeout=120)
        self._log.close()


def worker_commands(args, checkpoint, run, ct2_folder):
    """`(environment, {system: command})` of the workers, each started with `Worker`."""
    threads = str(args.threads)
    env = dict(os.environ, OMP_NUM_THREADS=threads, TF_NUM_INTRAOP_THREADS=threads, TOKENIZERS_PARALLELISM="false")
    languages = ["--source-lang", args.source_lang, "--target-lang", args.target_lang, "--threads", threads]
    commands = {
        "ours": [sys.executable, __file__, "worker-ours", run, "--beam", args.beam,
                 "--max-new-tokens", args.max_new_tokens, *languages[:4]],
        "transformers": [args.torch_python, TORCH_SIDE, "serve-transformers", checkpoint, *languages],
        "ctranslate2": [args.torch_python, TORCH_SIDE, "serve-ct2", checkpoint, ct2_folder, *languages],
    }  # fmt: skip
    return env, {name: commands[name] for name in args.systems.split(",")}


def decode_rounds(args, worker, sentences):
    """One system: the warm-up pass, then `--repeats` rounds: `{search: {"first_pass_seconds", "runs", "answer"}}`."""
    results = {}
    searches = [(search, 1 if search == "greedy" else args.beam) for search in args.searches.split(",")]
    request = dict(sentences=sentences, batch_size=args.batch_size, max_new_tokens=args.max_new_tokens)
    for search, beam in searches:
        answer = worker.ask(dict(request, beam=beam))
        results[search] = dict(first_pass_seconds=round(answer["seconds"], 2), runs=[], loads=[], answer=answer)
        print(f"warm-up {search:6s} {worker.name:12s} {answer['seconds']:.1f} s", flush=True)
    for round_index in range(args.repeats):
        for search, beam in searches:
            answer = worker.ask(dict(request, beam=beam))
            results[search]["runs"].append(round(answer["seconds"], 3))
            results[search]["loads"].append(round(os.getloadavg()[0], 1))  # the machine is shared
            results[search]["answer"] = answer
            print(f"round {round_index + 1} {search:6s} {worker.name:12s} {answer['seconds']:.1f} s", flush=True)
    return results


def summarize(args, results, sentences):
    """Rows of the report: sentences/s, tokens/s, ratios, agreement."""
    rows = []
    reference = results.get("transformers")
    for search in args.searches.split(","):
        base = statistics.median(reference[search]["runs"]) if reference else None
        for name, by_search in results.items():
            one = by_search[search]
            answer = one["answer"]
            seconds = statistics.median(one["runs"])
            row = dict(
                system=NAMES[name],
                search=search if search == "greedy" else f"beam {args.beam}",
                median_seconds=round(seconds, 2),
                runs=one["runs"],
                load_average_1min=one["loads"],
                first_pass_seconds=one["first_pass_seconds"],
                sentences_per_second=round(len(sentences) / seconds, 2),
                peak_rss_mb=answer.get("peak_rss_mb"),
            )
            if "ids" in answer:
                tokens = sum(len(ids) for ids in answer["ids"])
                row.update(generated_tokens=tokens, tokens_per_second=round(tokens / seconds, 1))
                row["at_max_new_tokens"] = sum(len(ids) >= args.max_new_tokens for ids in answer["ids"])
            if "finished" in answer:
                row["cut_off_at_max_new_tokens"] = sum(not f for f in answer["finished"])
            if reference and name != "transformers":
                theirs = reference[search]["answer"]
                row["same_strings_as_transformers"] = sum(a == b for a, b in zip(answer["strings"], theirs["strings"]))
                if "ids" in answer:
                    row["same_ids_as_transformers"] = sum(a == b for a, b in zip(answer["ids"], theirs["ids"]))
                else:  # the same string: the same ids, so transformers' token count is ours too
                    same = [a == b for a, b in zip(answer["strings"], theirs["strings"])]
                    if all(same):
                        tokens = sum(len(ids) for ids in theirs["ids"])
                        row.update(generated_tokens=tokens, tokens_per_second=round(tokens / seconds, 1))
                row["speed_vs_transformers"] = round(base / seconds, 2)
            rows.append(row)
    for search in ("greedy", f"beam {args.beam}"):
        ours = next((r for r in rows if r["search"] == search and r["system"] == NAMES["ours"]), None)
        for row in rows:
            if ours and row["search"] == search:
                row["ours_speed_vs_this"] = round(row["median_seconds"] / ours["median_seconds"], 2)
    return rows


# ---------------------------------------------------------------- the report


def machine(args):
    sys.path.insert(0, str(HERE))
    from machine import describe_machine, machine_line

    info = describe_machine()
    text = pathlib.Path("/proc/cpuinfo").read_text() if pathlib.Path("/proc/cpuinfo").exists() else ""
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    info["cpu_flags"] = sorted(f for f in flags if f.startswith(("avx", "amx", "fma", "vnni", "f16c")))
    info["memory_total_gb"] = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9, 1)
    try:
        info["lscpu_model_name"] = next(
            line.split(":", 1)[1].strip()
            for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
            if line.startswith("Model name")
        )
    except (OSError, StopIteration):
        pass
    try:
        versions = subprocess.run(
            [args.torch_python, "-c", "import torch, transformers, ctranslate2; "
             "print(torch.__version__, transformers.__version__, ctranslate2.__version__)"],
            capture_output=True, text=True, check=True,
        ).stdout.split()  # fmt: skip
        info["versions"].update(zip(("torch (reference venv)", "transformers", "ctranslate2"), versions))
    except (OSError, subprocess.CalledProcessError):
        pass
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    info["commit"] = commit.stdout.strip()
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "keras_transformer"], capture_output=True)
    info["package_changes_uncommitted"] = bool(dirty.stdout.strip())
    return info, machine_line(info)


def write_report(args, report):
    date = datetime.date.today().isoformat()
    output = pathlib.Path(args.output or RESULTS / f"nllb_real_size-{date}.json")
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    output.with_suffix(".md").write_text(markdown(report), encoding="utf-8")
    print(f"wrote {output} and {output.with_suffix('.md')}")


def markdown(report):
    info, imported, settings = report["machine"], report["import"], report["settings"]
    lines = [
        f"# NLLB-200 at its real size: import and translation ({report['date']})",
        "",
        f"CPU: **{info.get('lscpu_model_name', info['cpu'])}**, {info['cpus']} cores, "
        f"{info['memory_total_gb']} GB; flags: {' '.join(info['cpu_flags'])}.",
        "",
        f"Versions: {', '.join(f'{k} {v}' for k, v in info['versions'].items())}; commit {info['commit']}"
        + (" (with uncommitted package changes)" if info["package_changes_uncommitted"] else "")
        + ".",
        "",
        f"Machine line: `{report['machine_line']}`",
        "",
        "Command:",
        "",
        f"    {report['command']}",
        "",
        "## The checkpoint",
        "",
        f"A random `M2M100ForConditionalGeneration` of nllb-200-distilled-600M's shape (d_model 1024, 12+12 layers, "
        f"16 heads, ffn 4096, 256,206 embedding rows, 1024 positions), {report['checkpoint']['parameters']:,} "
        f"parameters, written by transformers' `save_pretrained`: model.safetensors "
        f"{imported['weights_bytes'] / 1e9:.2f} GB; an NLLB tokenizer of {report['checkpoint']['tokenizer_ids']:,} "
        "ids (a SentencePiece BPE model grown to 256,000 pieces, the 202 language codes). "
        "Random weights: the translations are garbage, the same garbage in every system.",
        "",
        "## The import: `keras-transformer import`",
        "",
        "| import | wall time | peak RSS (high-water mark) | × the weights | peak RSS (5 ms poll) | reached at |",
        "|---|---|---|---|---|---|",
    ]
    for index, one in enumerate(imported["runs"], 1):
        lines.append(
            f"| {index} | {one['seconds']:.1f} s | {one['max_rss_bytes'] / GiB:.2f} GiB "
            f"({one['max_rss_bytes'] / 1e9:.2f} GB) | **{one['ratio_to_weights']:.2f}×** | "
            f"{one['polled_peak_bytes'] / GiB:.2f} GiB | {one['peak_at_seconds']:.1f} s |"
        )
    lines += [
        "",
        f"The weights: {imported['weights_bytes']:,} bytes ({imported['weights_bytes'] / GiB:.2f} GiB); the target "
        f"is a peak under twice that ({2 * imported['weights_bytes'] / GiB:.2f} GiB). The run's model.keras: "
        f"{imported['model_keras_bytes']:,} bytes.",
    ]
    lines += [
        "",
        "## Translation: the same weights, the same sentences",
        "",
        f"{settings['sentences']} sentences of multi30k `test_2016_flickr.en` into `{settings['target_lang']}` "
        f"(source `{settings['source_lang']}`), batches of {settings['batch_size']} sorted by length, at most "
        f"{settings['max_new_tokens']} new tokens (the language token included), {settings['threads']} threads "
        f"each; the median of {settings['repeats']} rounds after a warm-up pass (ours' warm-up compiles).",
        "",
        "| system | search | median s | sentences/s | tokens/s | ours is | same outputs as transformers | "
        "first pass s | peak RSS | 1-min load |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in report["decode"]:
        same = row.get("same_ids_as_transformers", row.get("same_strings_as_transformers"))
        kind = "ids" if "same_ids_as_transformers" in row else "strings"
        ratio = row.get("ours_speed_vs_this")
        lines.append(
            f"| {row['system']} | {row['search']} | {row['median_seconds']:.2f} | {row['sentences_per_second']:.2f} "
            f"| {row.get('tokens_per_second', '–')} | "
            + ("–" if row["system"] == NAMES["ours"] or ratio is None else f"{ratio:.2f}× as fast")
            + " | "
            + ("–" if same is None else f"{same} of {settings['sentences']} ({kind})")
            + " | "
            f"{row['first_pass_seconds']:.1f} | {(row['peak_rss_mb'] or 0) / 1024:.2f} GiB | "
            f"{', '.join(map(str, row['load_average_1min']))} |"
        )
    lines += ["", *report.get("notes", [])]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- main


def main_benchmark(args):
    from corpus import multi30k_folder

    cache = pathlib.Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    log = cache / "log.txt"
    checkpoint = cache / "checkpoint"
    data = multi30k_folder(args.data)
    build_file = cache / "build.json"
    if not (checkpoint / "model.safetensors").is_file():
        texts = [data / f"train.{lang}" for lang in ("en", "de", "fr")]
        texts.append(REPO / "keras_transformer" / "data" / "korean_chatbot" / "ChatbotData.csv")
        command = [args.torch_python, TORCH_SIDE, "build", checkpoint, "--text", *texts,
                   "--probe", data / "test_2016_flickr.en", "--end-scale", args.end_scale]  # fmt: skip
        print("building the checkpoint (minutes) ...", flush=True)
        done = subprocess.run([str(c) for c in command], stdout=subprocess.PIPE, text=True, check=True)
        build_file.write_text(done.stdout.strip().splitlines()[-1], encoding="utf-8")
    build = json.loads(build_file.read_text(encoding="utf-8")) if build_file.is_file() else {}
    run, imported = measure_import(args, checkpoint, log)
    ct2_folder = cache / "ct2"
    ct2_conversion = None
    if "ctranslate2" in args.systems and not (ct2_folder / "model.bin").is_file():
        print("converting with CTranslate2's TransformersConverter ...", flush=True)
        done = subprocess.run(
            [str(c) for c in (args.torch_python, TORCH_SIDE, "ct2", checkpoint, ct2_folder)],
            stdout=subprocess.PIPE, text=True, check=True,
        )  # fmt: skip
        ct2_conversion = json.loads(done.stdout.strip().splitlines()[-1])
    sentences = read_lines(data / "test_2016_flickr.en", args.sentences)
    env, commands = worker_commands(args, checkpoint, run, ct2_folder)
    results, ready = {}, {}
    for name, command in commands.items():  # one at a time: one 600M model in memory
        print(f"starting {name} ...", flush=True)
        worker = Worker(name, command, log, env=env)
        print(f"  ready: {worker.ready}", flush=True)
        try:
            results[name], ready[name] = decode_rounds(args, worker, sentences), worker.ready
        finally:
            worker.close()
    rows = summarize(args, results, sentences)
    for row in rows:
        print({k: v for k, v in row.items() if k != "runs"}, flush=True)
    info, line = machine(args)
    report = dict(
        benchmark="nllb_real_size",
        date=datetime.date.today().isoformat(),
        command="python " + " ".join(shlex.quote(a) for a in sys.argv),
        machine=info,
        machine_line=line,
        settings={k: v for k, v in vars(args).items() if k not in ("func",)},
        checkpoint=dict(build, **described(checkpoint), folder=str(checkpoint)),
        ct2_conversion=ct2_conversion,
        workers=ready,
        decode=rows,
        outputs={
            f"{name} | {search}": results[name][search]["answer"]["strings"][: args.keep_outputs]
            for name in results
            for search in args.searches.split(",")
        },
        notes=args.note or [],
    )
    report["import"] = imported
    write_report(args, report)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command")
    w = commands.add_parser("worker-ours")
    w.add_argument("run")
    w.add_argument("--beam", type=int, default=4)
    w.add_argument("--max-new-tokens", type=int, default=64)
    w.add_argument("--source-lang", default="eng_Latn")
    w.add_argument("--target-lang", default="fra_Latn")
    parser.add_argument("--torch-python", help="an interpreter with torch, transformers, sentencepiece, ctranslate2")
    parser.add_argument("--cache", default=str(CACHE), help="the checkpoint, its import and conversion (gitignored)")
    parser.add_argument("--data", help="multi30k task 1 (default: found as corpus.py says)")
    parser.add_argument("--sentences", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--searches", default="greedy,beam", help="greedy, beam (with --beam) or both")
    parser.add_argument("--repeats", type=int, default=3, help="rounds after the warm-up pass")
    parser.add_argument("--import-repeats", type=int, default=2, help="0: reuse the last import (its import.json)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--source-lang", default="eng_Latn")
    parser.add_argument("--target-lang", default="fra_Latn")
    parser.add_argument("--end-scale", type=float, default=1.0, help="scale of </s>'s embedding row at build")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--keep-outputs", type=int, default=8, help="outputs of each system kept in the JSON")
    parser.add_argument("--note", action="append", help="a line for the report's notes (repeatable)")
    parser.add_argument("--output", help="the JSON report (default: benchmarks/results/nllb_real_size/...)")
    args = parser.parse_args(argv)
    if args.command is None and not args.torch_python:
        parser.error("--torch-python is required")
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.command == "worker-ours":
        return worker_ours(args)
    sys.path.insert(0, str(HERE))
    return main_benchmark(args)


if __name__ == "__main__":
    main()
