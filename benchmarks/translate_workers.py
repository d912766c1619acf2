"""`translate`'s batches one after another against two side by side (`--workers`), in one process.

Opens a run once per search (greedy, beam 4) and translates the same
sentences as `keras-transformer translate` does (`translate_lines_with_status`:
sorted by length, `--batch-size` a batch) with 1 and with 2 workers, in
turn for `--rounds` rounds after a first pass that compiles every shape. It
reports each pass's seconds, the medians and their ratio, whether both give
the same strings, and the machine. Not run by CI.

Example:

    python benchmarks/translate_workers.py RUN --source test_2016_flickr.en --sentences 192 \\
        --output benchmarks/results/decoding/translate_workers.json
"""

import argparse
import json
import os
import pathlib
import statistics
import time

from corpus import read_lines
from machine import describe_machine, machine_line


def passes(translator, sentences, batch_size, rounds):
    """`({workers: [seconds]}, {workers: translations})`: 1 and 2 workers in turn."""
    from keras_transformer.translators.translation import translate_lines_with_status

    translate_lines_with_status(translator, sentences, batch_size, workers=2)  # compiles every shape
    seconds, outputs = {1: [], 2: []}, {}
    for _ in range(rounds):
        for workers in (1, 2):
            start = time.perf_counter()
            outputs[workers] = translate_lines_with_status(translator, sentences, batch_size, workers=workers)[0]
            seconds[workers].append(time.perf_counter() - start)
    return seconds, outputs


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run", help="a run directory (`keras-transformer train` or `import`)")
    parser.add_argument("--source", required=True, help="a text file, one sentence a line")
    parser.add_argument("--sentences", type=int, default=192)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--output", type=pathlib.Path)
    args = parser.parse_args()
    from keras_transformer.opener import open_translator

    sentences = read_lines(args.source, args.sentences)
    report = dict(machine=describe_machine(), run=str(args.run), sentences=len(sentences), searches={})
    report.update(batch_size=args.batch_size, max_length=args.max_length, load_average_1min=[os.getloadavg()[0]])
    for search, beam in (("greedy", 1), ("beam 4", 4)):
        translator = open_translator(args.run, "xla", beam_size=beam, max_length=args.max_length)
        seconds, outputs = passes(translator, sentences, args.batch_size, args.rounds)
        medians = {workers: statistics.median(times) for workers, times in seconds.items()}
        report["searches"][search] = dict(
            seconds=seconds,
            median_seconds=medians,
            one_over_two_workers=medians[1] / medians[2],
            same_strings=sum(a == b for a, b in zip(outputs[1], outputs[2])),
        )
    report["load_average_1min"].append(os.getloadavg()[0])
    print(machine_line(report["machine"]))
    print(json.dumps({k: {n: v[n] for n in ("median_seconds", "one_over_two_workers", "same_strings")}
                      for k, v in report["searches"].items()}, indent=1))  # fmt: skip
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
