"""A short decode as one loop against cache phases: warm and first-pass speed of a run, in one process.

`decoding.model_search.ONE_LOOP_UP_TO` (64) makes a decode of at most 64
tokens one loop over the whole cache instead of three cache phases, which
compile as three copies of the step. This script opens `--run` with
`export.load` for each setting in turn (`64`: one loop; `0`: the phases),
greedy and beam `--beam`, and decodes the first `--sentences` English
sentences of multi30k's test_2016_flickr (sorted by length, batches of 32,
at most `--max-length` tokens) twice: the first pass (tracing, compiling)
and a warm one. `--rounds` rounds, the settings taking turns. It reports
every time, the load, and whether the strings equal the one loop's.

    python benchmarks/one_loop.py --run RUN --output benchmarks/results/tracing/one_loop_real_size.json
"""

import argparse
import json
import os
import pathlib
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True)
    parser.add_argument("--data", help="multi30k task 1 (default: found as corpus.py says)")
    parser.add_argument("--sentences", type=int, default=128)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--output", type=pathlib.Path, required=True)
    return parser.parse_args()


def timed_passes(translator, beam, batches):
    """`(first_pass_s, warm_s, strings)` of two passes over `batches`."""
    call = translator.greedy if beam == 1 else translator
    seconds = []
    for _ in range(2):
        start = time.perf_counter()
        strings = [s for batch in batches for s in call(batch).numpy().tolist()]
        seconds.append(round(time.perf_counter() - start, 2))
    return seconds[0], seconds[1], strings


def main():
    args = parse_args()
    sys.path.insert(0, str(HERE))
    from corpus import multi30k_folder
    from machine import describe_machine, machine_line

    from keras_transformer import export
    from keras_transformer.decoding import model_search

    lines = (multi30k_folder(args.data) / "test_2016_flickr.en").read_text(encoding="utf-8").splitlines()
    ordered = sorted(lines[: args.sentences], key=len)
    batches = [ordered[i : i + 32] for i in range(0, len(ordered), 32)]
    results, reference = {}, {}
    for _ in range(args.rounds):
        for label, limit in (("one loop", 64), ("phases", 0)):
            model_search.ONE_LOOP_UP_TO = limit
            for beam in (1, args.beam):
                translator = export.load(args.run, beam_size=beam, max_length=args.max_length)
                first, warm, strings = timed_passes(translator, beam, batches)
                reference.setdefault(beam, strings)
                row = results.setdefault(f"{label}, beam {beam}", dict(first_pass_s=[], warm_s=[], loads=[]))
                row["first_pass_s"].append(first)
                row["warm_s"].append(warm)
                row["loads"].append(round(os.getloadavg()[0], 2))
                row["same_strings_as_one_loop"] = sum(a == b for a, b in zip(strings, reference[beam]))
                print(label, beam, first, warm, row["same_strings_as_one_loop"], flush=True)
    info = describe_machine()
    report = dict(command="python " + " ".join(sys.argv), machine=info, machine_line=machine_line(info),
                  settings={k: str(v) for k, v in vars(args).items()}, results=results)  # fmt: skip
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
