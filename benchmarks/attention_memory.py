"""Peak training memory against sequence length: ours, keras-hub and PyTorch's `scaled_dot_product_attention`.

The same small encoder stack in every system: vocabulary 1000, d_model 256,
4 heads, d_ff 1024, 2 layers, no dropout, batches of 4 sequences of
`length` real tokens (no padding), a token-level softmax head, Adam,
float32. One training step is forward + backward + update; each
(system, length) runs alone in a fresh process (`--worker`), builds the
model, trains 2 steps (the first compiles) and reports its peak RSS.

* **ours**: `keras_transformer.layers.Encoder` + `Dense`, trained by Keras
  with `jit_compile=True` (XLA), as the package trains.
* **ours_blocks**: the same, with `key_block_size` (`--key-block-size`,
  default 256) in every attention layer (the online-softmax form, `keras_transformer.layers.blockwise_attention`).
* **keras_hub**: keras-hub's `TokenAndPositionEmbedding` + 2
  `TransformerEncoder` + `Dense`, the same `jit_compile=True` training.
* **pytorch**: the same encoder in PyTorch, its attention
  `torch.nn.functional.scaled_dot_product_attention` (eager, CPU), run with
  `--torch-python` (a Python with torch; `sys.executable` by default).

Besides the process's peak RSS, a Keras worker reports TensorFlow's CPU
allocator peak (`tf.config.experimental.get_memory_info`, BFC allocator:
the tensors and XLA buffers, without the runtime and the compiled code),
and every worker the RSS peak before its first step (the runtime, the
weights). One head's attention weights of one layer take
`batch * heads * length**2 * 4` bytes: 268 MB at 2,048 tokens.

Results go to `benchmarks/results/attention_memory/attention_memory.json`.
Not run by CI.

Example:

    python benchmarks/attention_memory.py --torch-python /path/to/torch-venv/bin/python
    python benchmarks/attention_memory.py --systems ours,ours_blocks --lengths 128,2048
"""

import argparse
import json
import os
import pathlib
import resource
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")  # as keras_transformer sets it: allocator statistics

REPO = pathlib.Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results" / "attention_memory"
for path in (str(REPO), str(REPO / "benchmarks")):
    if path not in sys.path:
        sys.path.insert(0, path)

SYSTEMS = ("ours", "ours_blocks", "keras_hub", "pytorch")
LENGTHS = (128, 256, 512, 1024, 2048)
BLOCK = 256
CONFIG = dict(vocab_size=1000, d_model=256, num_heads=4, d_ff=1024, num_layers=2, batch_size=4)


def peak_rss_mb():
    """The process's peak resident set size so far, in MB (ru_maxrss is KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def make_batch(length, vocab_size, batch_size, **_):
    import numpy as np

    rng = np.random.default_rng(0)
    ids = rng.integers(1, vocab_size, (batch_size, length + 1)).astype("int32")
    return ids[:, :-1], ids[:, 1:]


def build_ours(length, key_block_size=None):
    import keras

    from keras_transformer.layers import Encoder

    c = CONFIG
    ids = keras.Input((None,), dtype="int32", name="token_ids")
    sizes = (
        [c[name] for name in ("num_layers", "vocab_size")] + [length] + [c[n] for n in ("d_model", "num_heads", "d_ff")]
    )
    encoder = Encoder(*sizes, dropout=0.0, key_block_size=key_block_size)
    return keras.Model(ids, keras.layers.Dense(c["vocab_size"])(encoder(ids)))


def build_keras_hub(length):
    import keras
    import keras_hub

    c = CONFIG
    ids = keras.Input((None,), dtype="int32", name="token_ids")
    x = keras_hub.layers.TokenAndPositionEmbedding(c["vocab_size"], length, c["d_model"], mask_zero=True)(ids)
    for _ in range(c["num_layers"]):
        x = keras_hub.layers.TransformerEncoder(c["d_ff"], c["num_heads"], dropout=0.0, layer_norm_epsilon=1e-6)(x)
    return keras.Model(ids, keras.layers.Dense(c["vocab_size"])(x))


def run_keras(system, length, block):
    """Builds and trains 2 steps; returns the worker's report."""
    import keras
    import tensorflow as tf

    from keras_transformer import MaskedSparseCategoricalCrossentropy

    keras.utils.set_random_seed(0)
    if system == "keras_hub":
        model = build_keras_hub(length)
    else:
        model = build_ours(length, block if system == "ours_blocks" else None)
    model.compile(optimizer=keras.optimizers.Adam(1e-4), loss=MaskedSparseCategoricalCrossentropy(), jit_compile=True)
    inputs, labels = make_batch(length, **CONFIG)
    iterator = iter(tf.data.Dataset.from_tensors((inputs, labels)).repeat())
    before = peak_rss_mb()
    model.make_train_function()
    train = model.train_function
    start = time.perf_counter()
    for _ in range(2):
        loss = float(train(iterator)["loss"])
    report = {"rss_before_step_mb": before, "loss": loss, "seconds": time.perf_counter() - start}
    try:
        report["tf_allocator_peak_mb"] = tf.config.experimental.get_memory_info("CPU:0")["peak"] / 2**20
    except ValueError:  # not the BFC allocator: no statistics
        pass
    return report


def run_pytorch(length):
    sys.modules.setdefault("triton", None)  # eager CPU training needs no triton
    import numpy as np
    import torch
    from torch import nn
    from torch.nn import functional as F

    torch.manual_seed(0)
    torch.set_num_threads(os.cpu_count())
    c = CONFIG
    d, heads = c["d_model"], c["num_heads"]

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.ffn = nn.Sequential(nn.Linear(d, c["d_ff"]), nn.ReLU(), nn.Linear(c["d_ff"], d))
            self.norm1, self.norm2 = nn.LayerNorm(d, eps=1e-6), nn.LayerNorm(d, eps=1e-6)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(x).view(b, t, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
            context = F.scaled_dot_product_attention(q, k, v)  # (b, heads, t, key_dim)
            x = self.norm1(x + self.out(context.transpose(1, 2).reshape(b, t, d)))
            return self.norm2(x + self.ffn(x))

    model = nn.Sequential(
        nn.Embedding(c["vocab_size"], d), *[Layer() for _ in range(c["num_layers"])], nn.Linear(d, c["vocab_size"])
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    inputs, labels = (torch.from_numpy(np.asarray(a)).long() for a in make_batch(length, **c))
    before = peak_rss_mb()
    start = time.perf_counter()
    for _ in range(2):
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(inputs).reshape(-1, c["vocab_size"]), labels.reshape(-1))
        loss.backward()
        optimizer.step()
    return {"rss_before_step_mb": before, "loss": float(loss), "seconds": time.perf_counter() - start}


def worker(system, length, block):
    """One (system, length) alone in this process: prints one JSON line."""
    report = run_pytorch(length) if system == "pytorch" else run_keras(system, length, block)
    print(json.dumps({"system": system, "length": length, "peak_rss_mb": peak_rss_mb(), **report}))


def measure(system, length, torch_python, block):
    python = torch_python if system == "pytorch" else sys.executable
    command = [python, __file__, "--worker", system, "--length", str(length), "--key-block-size", str(block)]
    result = subprocess.run(command, capture_output=True, text=True)
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    if result.returncode or not lines:
        return {"system": system, "length": length, "error": result.stderr[-1500:]}
    return json.loads(lines[-1])


def cpu_flags():
    """The CPU's AVX-512, bf16 and AMX flags, from /proc/cpuinfo."""
    with open("/proc/cpuinfo") as cpuinfo:
        flags = next((line.split(":", 1)[1].split() for line in cpuinfo if line.startswith("flags")), [])
    return sorted(f for f in flags if f.startswith(("avx512", "amx")) or "bf16" in f)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--lengths", default=",".join(map(str, LENGTHS)))
    parser.add_argument("--torch-python", default=sys.executable)
    parser.add_argument("--key-block-size", type=int, default=BLOCK, help=f"ours_blocks' block (default {BLOCK})")
    parser.add_argument("--output", default=str(RESULTS / "attention_memory.json"))
    parser.add_argument("--worker")
    parser.add_argument("--length", type=int)
    args = parser.parse_args()
    if args.worker:
        return worker(args.worker, args.length, args.key_block_size)

    from machine import describe_machine

    rows = []
    for system in args.systems.split(","):
        for length in map(int, args.lengths.split(",")):
            row = measure(system, length, args.torch_python, args.key_block_size)
            rows.append(row)
            print(json.dumps(row)[:300], flush=True)
    report = {
        "command": " ".join([pathlib.Path(sys.executable).name, *sys.argv]),
        "machine": describe_machine(),
        "cpu_flags": cpu_flags(),
        "config": {**CONFIG, "dropout": 0.0, "dtype": "float32", "steps": 2, "key_block_size": args.key_block_size},
        "rows": rows,
    }
    output = pathlib.Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {output}")


if __name__ == "__main__":
    main()
