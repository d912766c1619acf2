"""In-flight batching against dynamic batching and CTranslate2: requests/s and latency at 1, 4, 16 and 64 clients.

The three ways `keras-transformer serve` could decode concurrent
single-sentence requests, on the same model and the same sentences, in one
process (no HTTP: the decoders alone), alternating system by system in
`--rounds` rounds so that a busy machine slows each alike:

- `in-flight`: `serving.inflight.InflightBatcher` over the run's
  `Translator` (`serve --batching in-flight`): sentences join the running
  decode between segments of `--segment-steps` steps and leave it when done.
- `dynamic`: `serving.batching.DynamicBatcher` over the run's SavedModel
  export (`serve --batching dynamic`, today's): requests that arrive while
  the workers are busy are decoded together, up to 32, on 2 threads, waiting
  at most 5 ms.
- `ctranslate2`: CTranslate2's `translate_batch(..., asynchronous=True)` of
  each request, on the run's `export --format ctranslate2` conversion
  (`--ct2-threads` inter and intra threads): CTranslate2 queues concurrent
  calls on its workers; it has no in-flight batching of encoder-decoder
  models (OpenNMT/CTranslate2#1333).

Each client sends one sentence at a time (the next once answered), drawn at
random from the first `--sentences` English sentences of multi30k's
`test_2016_flickr` (5 to 40 words). The requests that start in a window of
`--seconds` after `--warm-seconds` are counted (`drive`): requests/s, p50
and p95 latency. Every answer of our two systems is compared with the
translator's own (the same sentence alone); CTranslate2's with it too (it
decodes with its own kernels, so a few may differ). Before timing, every
system decodes every shape it will see (XLA compiles). Writes JSON with the
command, the machine and the load average to `--output`. Not run by CI.

Example:

    python benchmarks/serve_inflight.py --run benchmarks/.cache/real_size/run3 --search greedy --rounds 2
"""

import argparse
import json
import os
import pathlib
import random
import statistics
import subprocess
import sys
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from machine import describe_machine, machine_line  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
SIGNATURES = {"greedy": "greedy", "beam": "serving_default"}


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, help="a run directory (an imported OPUS-MT-shaped model)")
    parser.add_argument("--search", default="greedy", choices=sorted(SIGNATURES))
    parser.add_argument("--clients", default="1,4,16,64")
    parser.add_argument("--systems", default="in-flight,dynamic,ctranslate2")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=60.0, help="the measured window of each (system, clients)")
    parser.add_argument("--warm-seconds", type=float, default=15.0, help="before the window: clients run, uncounted")
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--max-rows", type=int, default=32, help="in-flight rows; dynamic batches (max batch size)")
    parser.add_argument("--segment-steps", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2, help="dynamic batching's worker threads (serve --threads)")
    parser.add_argument("--ct2-threads", default="1,2", help="CTranslate2's inter_threads,intra_threads")
    parser.add_argument("--cache", default=str(HERE / ".cache" / "serve_inflight"), help="exports of the run")
    parser.add_argument("--data", default=None, help="multi30k task 1 folder")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=pathlib.Path, required=True)
    return parser.parse_args()


def exported(run, folder, format_name):
    """`keras-transformer export --format FORMAT` of the run, made once into `folder`."""
    if not folder.is_dir():
        command = [
            sys.executable,
            "-m",
            "keras_transformer_cli",
            "export",
            "--model",
            str(run),
            "--format",
            format_name,
        ]
        subprocess.run([*command, "--output", str(folder)], check=True)
    return folder


class OurSystem:
    """A batcher of the server (`submit(key, inputs)`), asked for one sentence at a time."""

    def __init__(self, batcher, signature):
        self.batcher, self.key = batcher, (signature, ())

    def __call__(self, sentence):
        outputs = self.batcher.submit(self.key, {"sentences": [sentence.encode("utf-8")]}).result(600)
        return outputs["translations"][0].decode("utf-8")

    def close(self):
        self.batcher.close()


class CTranslate2System:
    """`translate_batch([pieces], asynchronous=True)` per request, pieces and text through the run's SentencePiece."""

    def __init__(self, folder, run, search, max_length, threads):
        import ctranslate2
        import sentencepiece as spm

        inter, intra = threads
        self.translator = ctranslate2.Translator(str(folder), inter_threads=inter, intra_threads=intra)
        tokenizers = pathlib.Path(run) / "tokenizers"
        self.source = spm.SentencePieceProcessor(model_file=str(next((tokenizers / "source").glob("*.spm"))))
        self.target = spm.SentencePieceProcessor(model_file=str(next((tokenizers / "target").glob("*.spm"))))
        config = json.loads((pathlib.Path(folder) / "config.json").read_text(encoding="utf-8"))
        self.end = [] if config.get("add_source_eos") else ["</s>"]
        self.options = dict(beam_size=1 if search == "greedy" else 4, max_decoding_length=max_length)

    def __call__(self, sentence):
        pieces = self.source.encode(sentence, out_type=str) + self.end
        result = self.translator.translate_batch([pieces], asynchronous=True, **self.options)[0].result()
        return self.target.decode_pieces([p for p in result.hypotheses[0] if p != "<unk>"])

    def close(self):
        pass


def load(args, sentences):
    """`{name: system}` and the translator's own answers (`reference`) for `sentences`."""
    from keras_transformer import opener
    from keras_transformer.serving import rest
    from keras_transformer.serving.inflight import InflightBatcher
    from keras_transformer.serving.signatures import ServedModel

    wanted = args.systems.split(",")
    cache = pathlib.Path(args.cache)
    signature = SIGNATURES[args.search]
    translator = opener.open_translator(args.run)
    call = translator.greedy_with_status if args.search == "greedy" else translator.call_with_status
    reference = []
    for start in range(0, len(sentences), 16):
        reference += [t.decode("utf-8") for t in call(sentences[start : start + 16])["translations"].numpy()]
    systems, warm = {}, {}
    widths = sorted({16 * -(-int(n) // 16) for n in translator.source_lengths(sentences).numpy()})
    if "in-flight" in wanted:
        batcher = InflightBatcher(translator, max_rows=args.max_rows, segment_steps=args.segment_steps)
        started = time.perf_counter()
        searches = ("greedy",) if args.search == "greedy" else ("best",)
        print(f"in-flight warm-up: {batcher.warm_up(widths, searches)} programs", end="", flush=True)
        warm["in-flight"] = time.perf_counter() - started
        print(f" in {warm['in-flight']:.0f} s", flush=True)
        systems["in-flight"] = OurSystem(batcher, signature)
    if "dynamic" in wanted:
        model = ServedModel(exported(args.run, cache / "savedmodel", "savedmodel"))
        batcher = rest.build_batcher(model, max_batch_size=args.max_rows, timeout_ms=5.0, num_threads=args.threads)
        started = time.perf_counter()
        warm_dynamic(model, signature, sentences, widths, args.max_rows)
        warm["dynamic"] = time.perf_counter() - started
        print(f"dynamic warm-up in {warm['dynamic']:.0f} s", flush=True)
        systems["dynamic"] = OurSystem(batcher, signature)
    if "ctranslate2" in wanted:
        threads = [int(n) for n in args.ct2_threads.split(",")]
        folder = exported(args.run, cache / "ctranslate2", "ctranslate2")
        systems["ctranslate2"] = CTranslate2System(
            folder, args.run, args.search, translator.search_settings.max_length, threads
        )
    return systems, reference, warm


def warm_dynamic(model, signature, sentences, widths, max_rows):
    """The SavedModel's program of each power-of-two batch at each source width the sentences have."""
    from concurrent.futures import ThreadPoolExecutor

    import tensorflow as tf

    lengths = model.module.source_lengths(tf.constant(sentences)).numpy()
    by_width = {16 * -(-int(n) // 16): s for s, n in zip(sentences, lengths)}
    sizes = [1 << n for n in range(max_rows.bit_length()) if 1 << n <= max_rows]
    calls = [(signature, {"sentences": [by_width[w].encode()] * size}) for w in widths for size in sizes]
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda call: model.run(*call), calls))


def count_tokens(text):
    """Output tokens of a translation, END counted: its target pieces (the run's SentencePiece), one measure for all."""
    return len(TARGET_PIECES[0].encode(text)) + 1


TARGET_PIECES = []  # the run's target SentencePiece model, loaded in `main`


def drive(system, sentences, reference, clients, seconds, warm_seconds, seed):
    """Closed-loop clients: the requests that start in the window (`warm_seconds` on, `seconds` long), each timed whole.

    Clients stop starting requests when the window ends and finish the one
    they are in. In a steady state requests start as fast as they end, so
    the starts in the window over its length is the rate, however long each
    request takes.
    """
    start = time.perf_counter()
    window = (start + warm_seconds, start + warm_seconds + seconds)
    records, lock = [], threading.Lock()

    def client(number):
        rng = random.Random(seed * 1000 + number)
        while time.perf_counter() < window[1]:
            index = rng.randrange(len(sentences))
            began = time.perf_counter()
            text = system(sentences[index])
            with lock:
                records.append((began, time.perf_counter() - began, text == reference[index], text))

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    counted = [record for record in records if window[0] <= record[0] < window[1]]
    latencies = [record[1] for record in counted]
    tokens = [count_tokens(record[3]) for record in counted]
    q = statistics.quantiles(latencies, n=20) if len(latencies) > 1 else [float("nan")] * 19
    return {
        "requests": len(latencies),
        "requests_per_s": round(len(latencies) / seconds, 3),
        "p50_ms": round(1000 * statistics.median(latencies), 1) if latencies else None,
        "p95_ms": round(1000 * q[18], 1),
        "output_tokens_per_s": round(sum(tokens) / seconds, 1),
        "mean_output_tokens": round(statistics.mean(tokens), 1) if tokens else None,
        "mismatches": sum(not record[2] for record in records),
        "answers_checked": len(records),
        "load_average_1min": round(os.getloadavg()[0], 2),
    }


def summarize(rows):
    """`{"system@clients": medians over the rounds}` of the rows."""
    summary = {}
    for key in dict.fromkeys((r["system"], r["clients"]) for r in rows):
        mine = [r for r in rows if (r["system"], r["clients"]) == key]
        summary["{}@{}".format(*key)] = {
            "requests_per_s": round(statistics.median(r["requests_per_s"] for r in mine), 2),
            "p50_ms": statistics.median([r["p50_ms"] for r in mine if r["p50_ms"] is not None] or [float("nan")]),
            "p95_ms": statistics.median(r["p95_ms"] for r in mine),
            "output_tokens_per_s": round(statistics.median(r["output_tokens_per_s"] for r in mine), 1),
            "rounds": len(mine),
        }
    return summary


def write_report(args, head, rows, extra=None):
    """Writes the JSON report (the head, the rows, their summary and `extra`) to `--output`; returns the summary."""
    summary = summarize(rows)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    report = {**head, "rows": rows, "summary": summary, **(extra or {})}
    args.output.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return summary


def main():
    args = parse_args()
    sys.path.insert(0, str(HERE))
    from corpus import multi30k_folder

    from keras_transformer import compile_cache

    compile_cache.enable(HERE / ".cache" / "xla")  # a rerun loads what this one compiles

    info = describe_machine()
    print(machine_line(info), flush=True)
    data = multi30k_folder(args.data)
    sentences = (data / "test_2016_flickr.en").read_text(encoding="utf-8").splitlines()[: args.sentences]
    systems, reference, warm = load(args, sentences)
    import sentencepiece as spm

    target = next((pathlib.Path(args.run) / "tokenizers" / "target").glob("*.spm"))
    TARGET_PIECES.append(spm.SentencePieceProcessor(model_file=str(target)))
    reference_tokens = [count_tokens(text) for text in reference]
    counts = [int(n) for n in args.clients.split(",")]
    for system in systems.values():  # every shape the load will bring, before any timing
        drive(system, sentences, reference, max(counts), 20.0, 0.0, args.seed)
    head = {
        "command": " ".join(["python", *sys.argv]),
        "machine": info,
        "machine_line": machine_line(info),
        "load_average_at_start": os.getloadavg(),
        "settings": {k: str(v) for k, v in vars(args).items()},
        "warm_up_seconds": warm,
        "reference_output_tokens": {"mean": statistics.mean(reference_tokens), "max": max(reference_tokens)},
    }
    rows = []
    print(f"reference output tokens: mean {statistics.mean(reference_tokens):.1f}, max {max(reference_tokens)}")
    print("| round | clients | system | requests | requests/s | tokens/s | p50 ms | p95 ms | mismatches | load |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for round_number in range(args.rounds):
        for clients in counts:
            for name, system in systems.items():
                row = dict(round=round_number, clients=clients, system=name)
                row.update(drive(system, sentences, reference, clients, args.seconds, args.warm_seconds, args.seed))
                rows.append(row)
                print(
                    f"| {round_number} | {clients} | {name} | {row['requests']} | {row['requests_per_s']} "
                    f"| {row['output_tokens_per_s']} "
                    f"| {row['p50_ms']} | {row['p95_ms']} | {row['mismatches']} | {row['load_average_1min']} |",
                    flush=True,
                )
                write_report(args, head, rows)  # what a run cut short has measured
    extra = {}
    if "in-flight" in systems:
        batcher = systems["in-flight"].batcher
        pools = {str(key): [pool.rows, pool.width] for key, pool in batcher.pools.items()}
        extra["in_flight"] = {"summary": batcher.summary(), "pools_rows_width_at_end": pools}
    for system in systems.values():
        system.close()
    summary = write_report(args, head, rows, extra)
    print(json.dumps(summary, indent=1))
    print(f"wrote {args.output}")


if __name__ == "__main__":
    raise SystemExit(main())
