"""The `Translator` with and without compaction: what `keras-transformer translate` on a file costs.

Translates the first `--sentences` lines of a source file through
`translation.translate_lines` (length-sorted batches, as the `translate` and
`evaluate` commands do), with a `Translator` that decodes each batch as one
XLA program and with one that drops finished sentences between segments of
steps (`Translator(..., compact=True)`), greedy and beam search. For each it
reports the first pass (which compiles every shape), the median of the
timed passes after it, and how many translations equal the one-program
ones. The two translators take turns in each round.

Example (a run directory from `keras-transformer train`):

    python benchmarks/translator_compaction.py --model runs/m30k-4 \\
        --source DATA/multi30k_task1/test_2016_flickr.en \\
        --output benchmarks/results/decoding/translator_compaction.json
"""

import argparse
import json
import statistics
import time

from machine import describe_machine, machine_line

from keras_transformer import export
from keras_transformer.translators import translation


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a training run directory")
    parser.add_argument("--source", required=True, help="a text file, one source sentence a line")
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--batch-sizes", default="32,100", help="comma-separated sentences per batch")
    parser.add_argument("--beams", default="1,4", help="comma-separated beam sizes (1 = greedy)")
    parser.add_argument("--rounds", type=int, default=3, help="timed passes after the first")
    parser.add_argument("--output", help="write the results as JSON here")
    return parser.parse_args()


def timed(translator, sentences, batch_size, beam):
    start = time.perf_counter()
    outputs = translation.translate_lines(translator, sentences, batch_size)  # a beam of 1 is greedy
    return time.perf_counter() - start, outputs


def compare(args, sentences, batch_size, beam):
    translators = {compact: export.load(args.model, beam_size=beam, compact=compact) for compact in (False, True)}
    first, outputs, times = {}, {}, {False: [], True: []}
    for compact, translator in translators.items():
        first[compact], outputs[compact] = timed(translator, sentences, batch_size, beam)
    for _ in range(args.rounds):
        for compact, translator in translators.items():
            seconds, again = timed(translator, sentences, batch_size, beam)
            assert again == outputs[compact], "a translator changed its output between passes"
            times[compact].append(seconds)
    equal = sum(a == b for a, b in zip(outputs[False], outputs[True]))
    result = {"batch_size": batch_size, "beam": beam, "equal_translations": equal}
    for compact, name in ((False, "one_program"), (True, "compacting")):
        median = statistics.median(times[compact])
        result[name] = {"first_pass_s": first[compact], "median_s": median, "runs_s": times[compact]}
    result["speedup"] = result["one_program"]["median_s"] / result["compacting"]["median_s"]
    return result


def main():
    args = parse_args()
    with open(args.source, encoding="utf-8") as source:
        sentences = source.read().splitlines()[: args.sentences]
    machine = describe_machine()
    print(machine_line(machine), flush=True)
    results = []
    for batch_size in (int(size) for size in args.batch_sizes.split(",")):
        for beam in (int(size) for size in args.beams.split(",")):
            result = compare(args, sentences, batch_size, beam)
            results.append(result)
            one, compacting = result["one_program"], result["compacting"]
            print(
                f"batch {batch_size}, beam {beam}: "
                f"one program {one['median_s']:.2f} s (first {one['first_pass_s']:.1f}), "
                f"compacting {compacting['median_s']:.2f} s (first {compacting['first_pass_s']:.1f}): "
                f"{result['speedup']:.2f}x, {result['equal_translations']} of {len(sentences)} equal",
                flush=True,
            )
    if args.output:
        report = {"command": vars(args), "time": time.strftime("%Y-%m-%d %H:%M:%S"), "machine": machine}
        with open(args.output, "w", encoding="utf-8") as file:
            json.dump({**report, "sentences": len(sentences), "results": results}, file, indent=1)


if __name__ == "__main__":
    main()
