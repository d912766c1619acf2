"""Peak memory of importing a T5-large-shaped checkpoint (770M parameters) stored in bfloat16 shards.

`build` (run with an interpreter that has torch and transformers) writes a
random `T5ForConditionalGeneration` of t5-large's configuration (24 + 24
layers, 1024 wide, 16 heads, 4096-wide ReLU feed-forward, 32128 embedding
rows) as transformers 5 saves it, in bfloat16, in shards of 500 MB with
`model.safetensors.index.json`, beside the tiny T5 fixture's tokenizer
(tests/data/t5_mbart/t5: its ids lie within the embedding's rows, which is
all an import asks of a tokenizer; the embedding rows past its 1,000 pieces
and `<pad>`'s are zero, so that the random model's outputs stay within them
and are never `<pad>` (which the random weights favour, and which this
package never generates), while the
output projection still multiplies all 32,128 rows). `measure` imports it with
`keras-transformer import` in a child process and reports the child's peak
RSS (as `/usr/bin/time -v` reports it: the child's `ru_maxrss`) against the
float32 weights the run holds, with the CPU and the load average.

    python-with-transformers benchmarks/t5_real_size.py build [--cache DIR]
    python benchmarks/t5_real_size.py measure [--cache DIR]

The checkpoint (1.5 GB) and the run (3.1 GB) go to `--cache`, by default
`benchmarks/.cache/t5_real_size/` (gitignored).
"""

import argparse
import json
import os
import pathlib
import platform
import resource
import shutil
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
CACHE = HERE / ".cache" / "t5_real_size"
FIXTURE = HERE.parent / "tests" / "data" / "t5_mbart" / "t5"
TOKENIZER_PIECES = 1000  # the fixture's spiece.model; the embedding keeps t5-large's 32,128 rows
T5_LARGE = dict(d_model=1024, d_kv=64, d_ff=4096, num_layers=24, num_heads=16, vocab_size=32128, n_positions=512)


def build(folder):
    import torch
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)  # built in bfloat16: 1.5 GB, not 3 GB and a copy
    config = T5Config(**T5_LARGE, feed_forward_proj="relu", decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    model = T5ForConditionalGeneration(config)
    with torch.no_grad():  # zero rows are never the best: outputs stay within what the tokenizer can write
        model.shared.weight[TOKENIZER_PIECES:] = 0
        model.shared.weight[config.pad_token_id] = 0  # and are never <pad>, which random weights favour
    if folder.exists():
        shutil.rmtree(folder)
    model.save_pretrained(folder, max_shard_size="500MB")
    for name in ("spiece.model", "tokenizer_config.json"):
        shutil.copyfile(FIXTURE / name, folder / name)
    parameters = sum(p.numel() for p in model.parameters())
    (folder / "parameters.json").write_text(json.dumps({"parameters": parameters}) + "\n")
    files = sorted(path.name for path in folder.iterdir())
    print(json.dumps({"folder": str(folder), "parameters": parameters, "files": files}))


def measure(folder, run):
    if run.exists():
        shutil.rmtree(run)
    parameters = json.loads((folder / "parameters.json").read_text())["parameters"]
    load_before = " ".join(f"{load:.2f}" for load in os.getloadavg())
    started = time.perf_counter()
    argv = [sys.executable, "-m", "keras_transformer_cli", "import", str(folder), "--output", str(run)]
    subprocess.run(argv, check=True)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # Linux: KiB
    weights = 4 * parameters  # float32, what the run's model holds
    stored = sum(p.stat().st_size for p in folder.glob("model-*.safetensors"))
    print(
        json.dumps(
            {
                "parameters": parameters,
                "float32_weights_gb": round(weights / 1e9, 3),
                "bf16_shards_gb": round(stored / 1e9, 3),
                "peak_rss_gb": round(peak / 1e9, 3),
                "peak_over_float32_weights": round(peak / weights, 3),
                "seconds": round(time.perf_counter() - started, 1),
                "cpu": cpu_model(),
                "loadavg_before": load_before,
                "loadavg_after": " ".join(f"{load:.2f}" for load in os.getloadavg()),
            },
            indent=1,
        )
    )


def cpu_model():
    for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=("build", "measure"))
    parser.add_argument("--cache", default=str(CACHE))
    args = parser.parse_args()
    cache = pathlib.Path(args.cache)
    if args.step == "build":
        build(cache / "checkpoint")
    else:
        measure(cache / "checkpoint", cache / "run")
