"""Start-up with XLA's persistent compilation cache: a first `translate` against a second one.

Runs `keras-transformer translate --model RUN` on the first `--sentences`
sentences of a file, each time in a new process: once with the cache off,
once with an empty cache folder (it compiles and keeps the programs), and
once more on that folder (it loads them). Reports each process's wall
time, the programs the cache holds after each, and the CPU. The outputs
of the three must be equal. Not run by CI.

Example:

    python benchmarks/compile_cache.py RUN --input test_2016_flickr.en --sentences 32
"""

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

from machine import describe_machine

CLI = pathlib.Path(sys.executable).parent / "keras-transformer"


def cpu_flags():
    """The CPU's vector and matrix instruction sets (avx*, amx*), from /proc/cpuinfo."""
    try:
        text = pathlib.Path("/proc/cpuinfo").read_text()
    except OSError:
        return []
    words = {word for line in text.splitlines() if line.startswith("flags") for word in line.split()}
    return sorted(word for word in words if word.startswith(("avx", "amx")))


def translate(run, sentences, cache, beam):
    environ = dict(os.environ, KERAS_TRANSFORMER_XLA_CACHE=str(cache))
    command = [CLI, "translate", "--model", run, "--beam", str(beam), "--quiet"]
    start = time.perf_counter()
    done = subprocess.run(command, input="\n".join(sentences) + "\n", env=environ, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode:
        sys.exit(done.stderr)
    return seconds, done.stdout


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run")
    parser.add_argument("--input", required=True, help="a UTF-8 file, one sentence a line")
    parser.add_argument("--sentences", type=int, default=1)
    parser.add_argument("--beam", type=int, default=1)
    args = parser.parse_args(argv)
    sentences = pathlib.Path(args.input).read_text(encoding="utf-8").splitlines()[: args.sentences]
    folder = pathlib.Path(tempfile.mkdtemp(prefix="xla-cache-"))
    try:
        rows = {}
        for name, cache in (("off", "off"), ("first", folder), ("second", folder)):
            seconds, output = translate(args.run, sentences, cache, args.beam)
            programs = len(list((folder / "programs").glob("*.pb")))  # `compile_cache.Store`'s checked programs
            rows[name] = dict(seconds=round(seconds, 2), programs_in_cache=programs, output=output)
        outputs_equal = len({row.pop("output") for row in rows.values()}) == 1
    finally:
        shutil.rmtree(folder)
    result = dict(
        command=" ".join(sys.argv),
        machine=describe_machine(),
        cpu_flags=cpu_flags(),
        sentences=len(sentences),
        beam=args.beam,
        processes=rows,
        outputs_equal=outputs_equal,
        second_over_off=round(rows["second"]["seconds"] / rows["off"]["seconds"], 3),
    )
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
