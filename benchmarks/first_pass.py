"""Start-up of `translate`: a cold first pass over a file against a warm second one, and the programs compiled.

Each configuration (search, `--compact`) runs in its own process with an
empty XLA compile cache folder (`KERAS_TRANSFORMER_XLA_CACHE`), so that its
first pass compiles every program: nothing comes from an earlier process.
The process opens the run (`keras_transformer.export.load`) and translates
the sentences as `keras-transformer translate` does
(`translate_lines_with_status`: sorted by length, `--batch-size` a batch),
twice. It reports both passes' seconds and their ratio, the XLA programs
compiled in each (the files the cache folder gained: one per program), the
distinct source shapes `(rows, width)` the batches were padded to, each
batch's seconds in both passes, and a digest of the translations (equal
between the passes, and between versions of the code). Not run by CI.

Example:

    python benchmarks/first_pass.py RUN --input test_2016_flickr.en.gz --sentences 200 \\
        --output benchmarks/results/real_size/first_pass.json
"""

import argparse
import gzip
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

from machine import describe_machine


def read_sentences(path, count):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as lines:
        return [line.rstrip("\n") for line in lines][:count]


class Clock:
    """A `Progress` stand-in for `translate_lines_with_status`: the time each batch ended."""

    def __init__(self):
        self.start, self.ends = time.perf_counter(), []

    def update(self, count):
        self.ends.append(time.perf_counter())

    def close(self):
        pass

    def batches(self):
        times = [self.start, *self.ends]
        return [round(b - a, 2) for a, b in zip(times, times[1:])]


def one(args):
    """One configuration in this process: two passes, as a JSON line on stdout."""
    from keras_transformer import compile_cache

    folder = compile_cache.enable()  # before TensorFlow's first compile: it reads the flags then
    session = compile_cache.session_folder()  # where TensorFlow loads and writes this process's programs
    import tensorflow as tf

    from keras_transformer.export import load
    from keras_transformer.translators.token_ids import pad_to_buckets
    from keras_transformer.translators.translation import translate_lines_with_status

    def programs():
        return len(list(session.glob("*.pb"))) if folder else None

    sentences = read_sentences(args.input, args.sentences)
    start = time.perf_counter()
    translator = load(args.run, beam_size=args.beam, compact=args.compact)
    load_seconds = time.perf_counter() - start
    start = time.perf_counter()
    lengths = translator.source_lengths(tf.constant(sentences)).numpy().tolist()  # as `translate` warns
    lengths_seconds = time.perf_counter() - start
    passes, outputs = [], []
    for _ in range(2):
        before, clock = programs(), Clock()
        translations, _ = translate_lines_with_status(translator, sentences, args.batch_size, progress=clock)
        seconds = time.perf_counter() - clock.start
        compiled = None if before is None else programs() - before
        passes.append(dict(seconds=round(seconds, 2), programs_compiled=compiled, batch_seconds=clock.batches()))
        outputs.append(translations)
    limit = int(translator.max_source_length.numpy())
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))  # `translation._in_length_batches`
    shapes = []
    for begin in range(0, len(order), args.batch_size):
        rows = [[0] * min(lengths[i], limit) for i in order[begin : begin + args.batch_size]]
        ids = tf.ragged.constant(rows, tf.int32)
        shapes.append(tuple(pad_to_buckets(ids, limit, 0).shape.as_list()))
    if args.outputs:
        name = f"{'greedy' if args.beam == 1 else f'beam{args.beam}'}{'-compact' if args.compact else ''}.txt"
        pathlib.Path(args.outputs).mkdir(parents=True, exist_ok=True)
        (pathlib.Path(args.outputs) / name).write_text("".join(t + "\n" for t in outputs[0]), encoding="utf-8")
    first, warm = passes
    result = dict(
        search="greedy" if args.beam == 1 else f"beam {args.beam}",
        compact=args.compact,
        cache_folder="empty at start" if folder else "off",
        load_seconds=round(load_seconds, 2),
        source_lengths_seconds=round(lengths_seconds, 2),
        first_pass_seconds=first["seconds"],
        warm_pass_seconds=warm["seconds"],
        first_over_warm=round(first["seconds"] / warm["seconds"], 3),
        programs_compiled_first_pass=first["programs_compiled"],
        programs_compiled_warm_pass=warm["programs_compiled"],
        source_shapes=sorted({f"{rows}x{width}" for rows, width in shapes}),
        batch_shapes=[f"{rows}x{width}" for rows, width in shapes],
        first_batch_seconds=first["batch_seconds"],
        warm_batch_seconds=warm["batch_seconds"],
        passes_equal=outputs[0] == outputs[1],
        translations_sha256=hashlib.sha256("\n".join(outputs[0]).encode()).hexdigest(),
        load_average_1min=round(os.getloadavg()[0], 2),
    )
    print(json.dumps(result))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run")
    parser.add_argument("--input", required=True, help="a UTF-8 file (or .gz), one sentence a line")
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--beams", default="1,4", help="the searches, comma-separated beam sizes (1: greedy)")
    parser.add_argument("--compact", action="store_true", help="the compacting decoder (`translate --compact`)")
    parser.add_argument("--outputs", help="a folder for each configuration's translations")
    parser.add_argument("--output", help="the JSON report (default: stdout only)")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--beam", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        return one(args)
    results = []
    for beam in [int(b) for b in args.beams.split(",")]:
        folder = tempfile.mkdtemp(prefix="xla-first-pass-")
        environ = dict(os.environ, KERAS_TRANSFORMER_XLA_CACHE=folder)
        command = [sys.executable, __file__, args.run, "--input", args.input, "--one", "--beam", str(beam)]
        command += ["--sentences", str(args.sentences), "--batch-size", str(args.batch_size)]
        command += ["--compact"] * args.compact + (["--outputs", args.outputs] if args.outputs else [])
        try:
            done = subprocess.run(command, env=environ, capture_output=True, text=True)
        finally:
            shutil.rmtree(folder)
        if done.returncode:
            sys.exit(done.stderr)
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(json.dumps({k: v for k, v in results[-1].items() if "batch" not in k}), file=sys.stderr)
    report = dict(
        benchmark="first pass against warm pass (translate)",
        command=" ".join(["python", *sys.argv]),
        machine=describe_machine(),
        sentences=args.sentences,
        batch_size=args.batch_size,
        results=results,
    )
    text = json.dumps(report, indent=1)
    if args.output:
        pathlib.Path(args.output).write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
