"""`--engine ctranslate2` against CTranslate2 called directly: what the engine adds around `translate_batch`.

Both decode the same sentences greedily with the same converted model (the
engine's cache, `ctranslate2_cache.cached_model`), in the same batches of
`--batch-size`, with one `ctranslate2.Translator` of `inter_threads=1,
intra_threads=--threads`:

- engine: `CTranslate2Translator.greedy_with_status(strings)`: strings in,
  strings out (the run's TensorFlow tokenizers, the pieces, the scores
  normalised, the finished flags);
- direct: `translate_batch` on the pieces, tokenized beforehand and not timed,
  with the options the engine passes.

Each time is the median of `--repeats` passes over all sentences (the two
interleaved), after one pass to warm up; the ratio is engine / direct. Writes JSON (with the command
and the machine) to `--output`. Not run by CI.

Example:

    python benchmarks/engine_overhead.py --model saved_models/multi30k-en-de --sentences 500
"""

import argparse
import json
import pathlib
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from corpus import multi30k_folder  # noqa: E402
from machine import describe_machine, machine_line  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a run directory")
    parser.add_argument("--source", help="one sentence a line (default: Multi30k's train.en, local or downloaded)")
    parser.add_argument("--sentences", type=int, default=500)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2, help="CTranslate2's intra_threads (both sides)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--output", default="benchmarks/results/decoding/engine_overhead.json")
    args = parser.parse_args(argv)

    from keras_transformer.engines.ctranslate2.translator import CTranslate2Translator

    source = pathlib.Path(args.source) if args.source else multi30k_folder() / "train.en"
    lines = source.read_text(encoding="utf-8").splitlines()[-args.sentences :]
    batches = [lines[i : i + args.batch_size] for i in range(0, len(lines), args.batch_size)]
    engine = CTranslate2Translator(args.model, beam_size=1, inter_threads=1, intra_threads=args.threads)
    pieces = [engine.source_pieces(batch) for batch in batches]  # what the engine hands CTranslate2
    options = engine.translate_options(beam_size=1)

    def through_engine():
        return [engine.greedy_with_status(batch)["translations"] for batch in batches]

    def direct():
        return [engine.translator.translate_batch(batch, **options) for batch in pieces]

    times = _median_times({"engine": through_engine, "direct": direct}, args.repeats)
    result = {
        "benchmark": "engine_overhead",
        "command": "python " + " ".join(sys.argv),
        "machine": describe_machine(),
        "model": args.model,
        "sentences": len(lines),
        "batch_size": args.batch_size,
        "intra_threads": args.threads,
        "seconds": times,
        "sentences_per_second": {name: round(len(lines) / t, 1) for name, t in times.items()},
        "ratio_engine_over_direct": round(times["engine"] / times["direct"], 3),
    }
    print(machine_line(result["machine"]))
    print(json.dumps({k: result[k] for k in ("seconds", "sentences_per_second", "ratio_engine_over_direct")}))
    pathlib.Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(args.output).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


def _median_times(functions, repeats):
    """The median seconds of each function, the repeats interleaved (a busy machine slows both alike)."""
    runs = {name: [] for name in functions}
    for function in functions.values():
        function()  # warm-up: the tokenizers' graphs, CTranslate2's allocations
    for _ in range(repeats):
        for name, function in functions.items():
            start = time.perf_counter()
            function()
            runs[name].append(time.perf_counter() - start)
    return {name: round(statistics.median(seconds), 4) for name, seconds in runs.items()}


if __name__ == "__main__":
    main()
