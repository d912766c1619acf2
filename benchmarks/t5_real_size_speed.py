"""Greedy speed of a T5-large-shaped model: ours against transformers and CTranslate2, on the same work.

The checkpoint is `t5_real_size.py build`'s (737.7M parameters, random
weights; the embedding rows past the tokenizer's 1,000 pieces are zero, so
outputs stay within them). Each system is a worker process that loads its
model once, run one at a time (three 3 GB models at once would crowd a
24 GB machine): a warm-up pass (ours compiles in it), then `--repeats`
rounds of the same work, whose median is reported:

- ours: `keras_transformer.export.load(RUN, beam_size=1, max_length=N)`,
  `greedy_with_status` on strings, the run imported by `t5_real_size.py
  measure` (or `keras-transformer import`);
- transformers: `generate(num_beams=1, do_sample=False, max_new_tokens=N)`;
- CTranslate2 float32: `translate_batch(beam_size=1, max_decoding_length=N)`
  on the run's `keras-transformer export --format ctranslate2`.

The first `--sentences` English sentences of multi30k's `test_2016_flickr`,
sorted by length, in batches of `--batch-size`, 2 threads everywhere. The
report says how many outputs are equal to transformers' (strings for ours,
ids for CTranslate2), so that the work is seen to be the same.

    python benchmarks/t5_real_size.py build        # with torch and transformers
    python benchmarks/t5_real_size.py measure      # the import
    python benchmarks/t5_real_size_speed.py --torch-python /path/to/torch-venv/bin/python
"""

import argparse
import datetime
import json
import os
import pathlib
import shlex
import statistics
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from nllb_real_size import Worker, emit, machine  # noqa: E402  (benchmarks/ is not a package)

CACHE = HERE / ".cache" / "t5_real_size"
RESULTS = HERE / "results" / "t5_real_size"
SYSTEMS = ("ours", "transformers", "ctranslate2")
NAMES = {
    "ours": "ours (export.load, XLA)",
    "transformers": "transformers generate (PyTorch)",
    "ctranslate2": "CTranslate2 float32 (export --format ctranslate2)",
}


def batches_of(sentences, size):
    """`(order, batches)`: the sentences sorted by length, cut into batches of `size`."""
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
    return order, [[sentences[i] for i in order[s : s + size]] for s in range(0, len(order), size)]


def unsorted(order, values):
    result = [None] * len(order)
    for position, index in enumerate(order):
        result[index] = values[position]
    return result


def serve(decode, ready):
    """Answers one JSON request a line on stdin with `decode(batches)`'s `(strings, extra)` and the seconds."""
    emit(dict(ready, ready=True))
    for line in sys.stdin:
        request = json.loads(line)
        order, batches = batches_of(request["sentences"], request["batch_size"])
        start = time.perf_counter()
        strings, extra = decode(batches)
        seconds = time.perf_counter() - start
        answer = dict(seconds=seconds, strings=unsorted(order, strings))
        answer.update({name: unsorted(order, values) for name, values in extra.items()})
        emit(answer)


def worker_ours(args):
    import warnings

    warnings.simplefilter("ignore")
    start = time.perf_counter()
    from keras_transformer import export

    translator = export.load(args.run, beam_size=1, max_length=args.max_new_tokens)
    load_seconds = round(time.perf_counter() - start, 1)

    def decode(batches):
        strings, finished = [], []
        for batch in batches:
            result = translator.greedy_with_status(batch)
            strings += [s.decode("utf-8") for s in result["translations"].numpy()]
            finished += [bool(f) for f in result["finished"].numpy()]
        return strings, {"finished": finished}

    serve(decode, dict(load_seconds=load_seconds))


def worker_transformers(args):
    import torch
    from transformers import AutoTokenizer, T5ForConditionalGeneration

    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(args.checkpoint)
    model = T5ForConditionalGeneration.from_pretrained(args.checkpoint, dtype=torch.float32).eval()
    load_seconds = round(time.perf_counter() - start, 1)

    def decode(batches):
        strings, ids = [], []
        for batch in batches:
            inputs = tokenizer(batch, return_tensors="pt", padding=True)
            with torch.inference_mode():
                output = model.generate(**inputs, num_beams=1, do_sample=False, max_new_tokens=args.max_new_tokens)
            for row in output[:, 1:].tolist():  # past the decoder's start token
                row = row[: row.index(model.config.eos_token_id) + 1] if model.config.eos_token_id in row else row
                row = [i for i in row if i != model.config.pad_token_id]
                ids.append(row)
                strings.append(tokenizer.decode(row, skip_special_tokens=True))
        return strings, {"ids": ids}

    serve(decode, dict(load_seconds=load_seconds))


def worker_ctranslate2(args):
    import ctranslate2
    import sentencepiece

    start = time.perf_counter()
    pieces = sentencepiece.SentencePieceProcessor(model_file=str(pathlib.Path(args.checkpoint) / "spiece.model"))
    translator = ctranslate2.Translator(args.ct2, device="cpu", compute_type="float32", intra_threads=args.threads)
    load_seconds = round(time.perf_counter() - start, 1)

    def decode(batches):
        strings, ids = [], []
        for batch in batches:
            tokens = [pieces.encode(sentence, out_type=str) + ["</s>"] for sentence in batch]
            results = translator.translate_batch(
                tokens, beam_size=1, max_decoding_length=args.max_new_tokens, return_end_token=True
            )
            for result in results:
                output = result.hypotheses[0]
                ids.append([pieces.piece_to_id(token) for token in output])
                strings.append(pieces.decode([token for token in output if token != "</s>"]))
        return strings, {"ids": ids}

    serve(decode, dict(load_seconds=load_seconds))


def decode_rounds(args, worker, sentences):
    request = dict(sentences=sentences, batch_size=args.batch_size)
    first = worker.ask(request)
    print(f"warm-up {worker.name:12s} {first['seconds']:.1f} s", flush=True)
    runs, loads = [], []
    for index in range(args.repeats):
        answer = worker.ask(request)
        runs.append(round(answer["seconds"], 2))
        loads.append(round(os.getloadavg()[0], 2))
        print(f"round {index + 1} {worker.name:12s} {answer['seconds']:.1f} s", flush=True)
    return dict(first_pass_seconds=round(first["seconds"], 2), runs=runs, loads=loads, answer=answer)


def summarize(args, results, sentences):
    reference = results["transformers"]["answer"]
    tokens = sum(len(ids) for ids in reference["ids"])
    base = statistics.median(results["transformers"]["runs"])
    rows = []
    for name, one in results.items():
        seconds = statistics.median(one["runs"])
        answer = one["answer"]
        row = dict(system=NAMES[name], median_seconds=seconds, runs=one["runs"], load_1min=one["loads"],
                   first_pass_seconds=one["first_pass_seconds"], ready=one["ready"],
                   sentences_per_second=round(len(sentences) / seconds, 2),
                   speed_vs_transformers=round(base / seconds, 2))  # fmt: skip
        row["same_strings_as_transformers"] = sum(a == b for a, b in zip(answer["strings"], reference["strings"]))
        if "ids" in answer:
            row["same_ids_as_transformers"] = sum(a == b for a, b in zip(answer["ids"], reference["ids"]))
            row["generated_tokens"] = sum(len(ids) for ids in answer["ids"])
        rows.append(row)
    ours = next((row for row in rows if row["system"] == NAMES["ours"]), None)
    for row in rows:
        if ours:
            row["ours_speed_vs_this"] = round(row["median_seconds"] / ours["median_seconds"], 2)
    at_limit = sum(len(ids) >= args.max_new_tokens for ids in reference["ids"])
    return dict(rows=rows, transformers_generated_tokens=tokens, transformers_outputs_at_limit=at_limit)


def ensure_ct2(run, folder, log):
    if (folder / "model.bin").is_file():
        return
    command = [sys.executable, "-m", "keras_transformer_cli", "export", "--model", str(run), "--format", "ctranslate2",
               "--output", str(folder)]  # fmt: skip
    with open(log, "a", encoding="utf-8") as handle:
        subprocess.run(command, check=True, stdout=handle, stderr=subprocess.STDOUT)


def main_benchmark(args):
    from corpus import multi30k_folder

    cache = pathlib.Path(args.cache)
    checkpoint, run, ct2, log = cache / "checkpoint", cache / "run", cache / "ct2", cache / "speed-log.txt"
    if not (run / "config.json").is_file():
        raise SystemExit(f"{run} is missing: run `t5_real_size.py build` then `t5_real_size.py measure` first")
    if "ctranslate2" in args.systems:
        ensure_ct2(run, ct2, log)
    sentences = (multi30k_folder(args.data) / "test_2016_flickr.en").read_text().splitlines()[: args.sentences]
    threads = str(args.threads)
    env = dict(os.environ, OMP_NUM_THREADS=threads, TF_NUM_INTRAOP_THREADS=threads, TF_NUM_INTEROP_THREADS="1",
               TOKENIZERS_PARALLELISM="false", TF_CPP_MIN_LOG_LEVEL="2")  # fmt: skip
    common = ["--max-new-tokens", str(args.max_new_tokens), "--threads", threads]
    commands = {
        "ours": [sys.executable, __file__, "worker-ours", "--run", run, *common],
        "transformers": [args.torch_python, __file__, "worker-transformers", "--checkpoint", checkpoint, *common],
        "ctranslate2": [sys.executable, __file__, "worker-ctranslate2", "--checkpoint", checkpoint, "--ct2", ct2,
                        *common],
    }  # fmt: skip
    results = {}
    for name in args.systems.split(","):
        print(f"starting {name} ...", flush=True)
        worker = Worker(name, commands[name], log, env=env)
        try:
            results[name] = dict(decode_rounds(args, worker, sentences), ready=worker.ready)
        finally:
            worker.close()
    summary = summarize(args, results, sentences)
    for row in summary["rows"]:
        print({k: v for k, v in row.items() if k not in ("runs", "ready")}, flush=True)
    args.torch_python = args.torch_python or sys.executable
    info, line = machine(args)
    report = dict(benchmark="t5_real_size_speed", date=datetime.date.today().isoformat(),
                  command="python " + " ".join(shlex.quote(a) for a in sys.argv), machine=info, machine_line=line,
                  settings={k: v for k, v in vars(args).items() if k != "command"}, **summary,
                  outputs={name: results[name]["answer"]["strings"][:4] for name in results})  # fmt: skip
    output = pathlib.Path(args.output or RESULTS / f"t5_real_size_speed-{report['date']}.json")
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {output}")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", nargs="?", choices=("worker-ours", "worker-transformers", "worker-ctranslate2"))
    parser.add_argument("--run")
    parser.add_argument("--checkpoint")
    parser.add_argument("--ct2")
    parser.add_argument("--torch-python", help="an interpreter with torch and transformers")
    parser.add_argument("--cache", default=str(CACHE))
    parser.add_argument("--data", help="multi30k task 1 (default: found as corpus.py says)")
    parser.add_argument("--sentences", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=2, help="rounds after the warm-up pass")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--output")
    args = parser.parse_args(argv)
    if args.command is None and not args.torch_python:
        parser.error("--torch-python is required")
    return args


if __name__ == "__main__":
    arguments = parse_args()
    workers = {"worker-ours": worker_ours, "worker-transformers": worker_transformers,
               "worker-ctranslate2": worker_ctranslate2}  # fmt: skip
    workers[arguments.command](arguments) if arguments.command else main_benchmark(arguments)
