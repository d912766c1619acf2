"""`precision=`: a trained run decoded in float32 and in int8, by the xla and ctranslate2 engines, with BLEU.

Each system opens the run as users do (`keras_transformer.export.load(run,
engine, precision=...)`), in a process of its own, and translates the first
`--sentences` sentences of multi30k's `test_2016_flickr` (English into German)
in batches of `--batch-size` sorted by length, greedy and with beam
`--beam`: the first pass (which compiles or converts) and the median of
`--warm-passes` warm passes are timed apart. Beside each: BLEU (sacrebleu) against the references, and how
many strings equal the same engine's float32 strings. Systems:

- `xla float32`: what `export.load` decodes with by default;
- `ctranslate2 float32` and `ctranslate2 int8` (`precision="int8"`: CTranslate2
  quantizes the cached float32 conversion to int8 as it loads, where the CPU
  has VNNI; on a CPU without, it warns and decodes in float32, and this script
  records the precision the translator reports).

Writes JSON with the command, the machine and its CPU flags. Not run by CI.

Example:

    python benchmarks/precision.py --run runs/multi30k-en-de --data-dir /path/to/multi30k_task1/raw
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
RESULTS = REPO / "benchmarks" / "results" / "decoding" / "precision.json"
SYSTEMS = (("xla", "float32"), ("ctranslate2", "float32"), ("ctranslate2", "int8"))


def read_gz(path, count):
    return gzip.open(path, "rt", encoding="utf-8").read().splitlines()[:count]


def run_system(args, engine, precision, search, outputs):
    """In this process: one system's two passes over the sentences, and its strings written to `outputs`."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    from keras_transformer import export

    sources = read_gz(pathlib.Path(args.data_dir) / "test_2016_flickr.en.gz", args.sentences)
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    beam = 1 if search == "greedy" else args.beam
    translator = export.load(args.run, engine, precision=precision, beam_size=beam)
    passes = []
    for _ in range(1 + args.warm_passes):
        start = time.perf_counter()
        strings = [None] * len(sources)
        for first in range(0, len(order), args.batch_size):
            chosen = order[first : first + args.batch_size]
            out = translator([sources[i] for i in chosen]).numpy()
            for i, text in zip(chosen, out):
                strings[i] = text.decode("utf-8")
        passes.append(round(time.perf_counter() - start, 2))
    pathlib.Path(outputs).write_text(json.dumps(strings), encoding="utf-8")
    return {
        "engine": engine,
        "asked": precision,
        "precision": translator.precision,
        "search": search,
        "first_pass_s": passes[0],
        "warm_s": statistics.median(passes[1:]),
        "warm_passes_s": passes[1:],
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "load_1min": round(os.getloadavg()[0], 2),
    }


def main(args):
    import sacrebleu

    sys.path.insert(0, str(HERE))
    from machine import describe_machine

    references = read_gz(pathlib.Path(args.data_dir) / "test_2016_flickr.de.gz", args.sentences)
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="precision-"))
    rows, strings = [], {}
    for search in ("greedy", "beam"):
        for engine, precision in SYSTEMS:
            outputs = scratch / f"{engine}-{precision}-{search}.json"
            command = [sys.executable, __file__, *sys.argv[1:], "--child", f"{engine},{precision},{search}"]
            command += ["--outputs", str(outputs)]
            done = subprocess.run(
                command, capture_output=True, text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
            )
            lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
            if done.returncode or not lines:
                raise SystemExit(f"{engine} {precision} {search} failed:\n{done.stderr[-3000:]}")
            row = json.loads(lines[-1])
            strings[(engine, precision, search)] = json.loads(outputs.read_text(encoding="utf-8"))
            row["bleu"] = round(sacrebleu.corpus_bleu(strings[(engine, precision, search)], [references]).score, 2)
            same = strings[(engine, "float32", search)]
            row["equal_to_float32"] = sum(a == b for a, b in zip(strings[(engine, precision, search)], same))
            row["sentences"] = len(references)
            print(json.dumps(row), flush=True)
            rows.append(row)
    report = {
        "benchmark": "precision",
        "command": " ".join(["python", *sys.argv]),
        "machine": describe_machine(),
        "settings": {key: value for key, value in vars(args).items() if key not in ("child", "outputs")},
        "results": rows,
    }
    pathlib.Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(args.output).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")


def parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", required=True, help="a trained run directory (English into German)")
    parser.add_argument("--data-dir", required=True, help="multi30k's raw folder: test_2016_flickr.{en,de}.gz")
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--warm-passes", type=int, default=3, help="warm passes after the first (median reported)")
    parser.add_argument("--output", default=str(RESULTS))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--outputs", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


if __name__ == "__main__":
    arguments = parse()
    if arguments.child:
        engine, precision, search = arguments.child.split(",")
        print(json.dumps(run_system(arguments, engine, precision, search, arguments.outputs)))
    else:
        main(arguments)
