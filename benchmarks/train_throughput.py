"""Training throughput: this package vs keras-hub vs PyTorch on the same work.

The configuration of issue 8: an encoder-decoder Transformer with vocabulary
8000 (source and target), d_model 256, 4 heads, d_ff 1024, 3 encoder and 3
decoder layers, dropout 0.1, batches of 64 sequences of 32 source and 32
target tokens, Adam, float32. Built three times:

* **ours**: `build_transformer(...)` with keras-hub's dropout sites
  (`dropout=0.1, attention_dropout=0.1, activation_dropout=0`), trained by
  Keras with `jit_compile=True` (XLA).
* **keras-hub**: `TokenAndPositionEmbedding` + 3 `TransformerEncoder` +
  3 `TransformerDecoder` + `Dense` head, the same `jit_compile=True` training.
  Both Keras models use this package's label-smoothed loss (epsilon 0.1) and
  `layer_norm_epsilon=1e-6`, so the only difference is the model code.
* **PyTorch**: `nn.Transformer` (batch first, post-norm, same widths and
  dropout, which PyTorch also applies inside the FFN) between `nn.Embedding`s
  with the sinusoidal signal and an `nn.Linear` head,
  `CrossEntropyLoss(label_smoothing=0.1, ignore_index=0)`, eager on CPU with
  all cores (`torch.set_num_threads(os.cpu_count())`). On request also
  `pytorch_compile` (the model and loss under `torch.compile`, Inductor's C++
  kernels) and `pytorch_bf16` (eager under `torch.autocast("cpu",
  dtype=torch.bfloat16)`).

Every step trains on the same fixed batch of random ids (no padding, so every
position is a real token); a Keras step is one call of the compiled train
function (`steps_per_execution` steps per call, no Python between them).

Model arithmetic (FLOPs), counted the same way for every framework: matmul
multiply-adds only, 2 FLOPs each, a training step = 3 x the forward pass
(forward + two matmuls per matmul in the backward pass). Per step, with batch
B, source/target lengths S/T, width d, FFN width f, N layers, vocabulary V:

    encoder  = N * B*S * (4*d*d + 2*S*d + 2*d*f)          Q,K,V,O; QK^T, AV; FFN
    decoder  = N * B*T * (4*d*d + 2*T*d                    self-attention
                          + 2*d*d + 2*S*d                  cross Q,O; QK^T, AV
                          + 2*d*f)                         FFN
             + N * B*S * 2*d*d                             cross K,V (per source token)
    head     = B*T * d*V
    FLOP/step = 3 * 2 * (encoder + decoder + head)         = 94.6 GFLOP here

The machine's ceiling is an XLA-compiled 4096 x 4096 float32 matmul
(2 * 4096^3 FLOP), timed in the same rounds as the models.

Timing: the competitors take turns (round robin, the order rotating each
round), a few steps each, so that the load of a shared machine falls on all
of them alike; the table reports the median step time over rounds and each
ratio as the median of the per-round ratios. Peak memory: each framework
runs alone in a fresh subprocess (`--worker`) and reports its peak RSS.
Results go to `benchmarks/results/training/train_throughput.json`. Not run by CI.

Example:

    python benchmarks/train_throughput.py                  # the first three, ~15 minutes
    python benchmarks/train_throughput.py --frameworks ours,keras_hub,pytorch,pytorch_compile,pytorch_bf16 \
        --rounds 5 --steps 2 --memory-steps 0 --output benchmarks/results/training/train_peers.json
    python benchmarks/train_throughput.py --frameworks ours,keras_hub --rounds 5
    python benchmarks/train_throughput.py --scaling     # step time vs length and d_model

`--scaling` times the same step (batch 64) at source/target lengths 32,
64, 128, 256 (d_model 256) and at d_model 128, 256, 512 (length 32, 4 heads,
d_ff = 4 x d_model), the frameworks of `--frameworks` alternating as above,
and writes `benchmarks/results/training/train_scaling.json`.
"""

import argparse
import functools
import json
import math
import os
import pathlib
import resource
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Importing keras_transformer turns on TensorFlow's BFC CPU allocator; it is set
# here too, before any framework allocates, so that keras-hub trains on the same
# allocator whichever model is built first. Run with TF_CPU_ALLOCATOR_USE_BFC=false
# to time both on TensorFlow's default allocator instead.
os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")

REPO = pathlib.Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results" / "training"
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from machine import describe_machine  # noqa: E402

FRAMEWORKS = ("ours", "keras_hub", "pytorch", "pytorch_compile", "pytorch_bf16")
DEFAULT_FRAMEWORKS = FRAMEWORKS[:3]  # the other two on request: torch.compile's first step alone takes minutes
LABELS = {
    "ours": "keras-transformer",
    "keras_hub": "keras-hub",
    "pytorch": "PyTorch (eager)",
    "pytorch_compile": "PyTorch (torch.compile)",
    "pytorch_bf16": "PyTorch (eager, bf16 autocast)",
}
CONFIG = dict(
    vocab_size=8000,
    d_model=256,
    num_heads=4,
    d_ff=1024,
    num_layers=3,
    dropout=0.1,
    batch_size=64,
    source_length=32,
    target_length=32,
)


# --------------------------------------------------------------------------
# Arithmetic
# --------------------------------------------------------------------------


def train_flops(vocab_size, d_model, d_ff, num_layers, batch_size, source_length, target_length, **_):
    """Matmul FLOPs of one training step (see the module docstring)."""
    d, f, n, v = d_model, d_ff, num_layers, vocab_size
    src, tgt = batch_size * source_length, batch_size * target_length
    encoder = n * src * (4 * d * d + 2 * source_length * d + 2 * d * f)
    decoder = n * tgt * (4 * d * d + 2 * target_length * d + 2 * d * d + 2 * source_length * d + 2 * d * f)
    decoder += n * src * 2 * d * d
    head = tgt * d * v
    return 3 * 2 * (encoder + decoder + head)


def make_batch(vocab_size, batch_size, source_length, target_length, seed=0, **_):
    import numpy as np

    rng = np.random.default_rng(seed)
    source = rng.integers(1, vocab_size, (batch_size, source_length)).astype("int32")
    target = rng.integers(1, vocab_size, (batch_size, target_length + 1)).astype("int32")
    return source, target[:, :-1], target[:, 1:]


# --------------------------------------------------------------------------
# The competitors: each a `step(n)` that trains n steps and blocks until done
# --------------------------------------------------------------------------


def _keras_step_fn(model, config, steps_per_execution):
    import keras
    import tensorflow as tf

    from keras_transformer import MaskedSparseCategoricalCrossentropy

    model.compile(
        optimizer=keras.optimizers.Adam(1e-4),
        loss=MaskedSparseCategoricalCrossentropy(label_smoothing=0.1),
        jit_compile=True,
        steps_per_execution=steps_per_execution,
    )
    source, decoder_inputs, labels = make_batch(**config)
    inputs = {"encoder_inputs": source, "decoder_inputs": decoder_inputs}
    iterator = iter(tf.data.Dataset.from_tensors((inputs, labels)).repeat())
    model.make_train_function()
    train_function = model.train_function

    def step(n):
        calls = max(1, n // steps_per_execution)
        for _ in range(calls):
            logs = train_function(iterator)
        float(logs["loss"])  # block until the last step is done
        return calls * steps_per_execution

    return step


def build_ours(config):
    from keras_transformer import build_transformer

    return build_transformer(
        config["vocab_size"],
        config["vocab_size"],
        num_layers=config["num_layers"],
        d_model=config["d_model"],
        num_heads=config["num_heads"],
        d_ff=config["d_ff"],
        dropout=config["dropout"],
        attention_dropout=config["dropout"],
        activation_dropout=0.0,
        max_length=max(config["source_length"], config["target_length"]),
    )


def build_keras_hub(config):
    import keras
    import keras_hub

    length = max(config["source_length"], config["target_length"])
    rate, eps = config["dropout"], 1e-6
    common = dict(intermediate_dim=config["d_ff"], num_heads=config["num_heads"], dropout=rate, layer_norm_epsilon=eps)
    encoder_inputs = keras.Input((None,), dtype="int32", name="encoder_inputs")
    decoder_inputs = keras.Input((None,), dtype="int32", name="decoder_inputs")
    x = keras_hub.layers.TokenAndPositionEmbedding(config["vocab_size"], length, config["d_model"], mask_zero=True)(
        encoder_inputs
    )
    x = keras.layers.Dropout(rate)(x)
    for _ in range(config["num_layers"]):
        x = keras_hub.layers.TransformerEncoder(**common)(x)
    y = keras_hub.layers.TokenAndPositionEmbedding(config["vocab_size"], length, config["d_model"], mask_zero=True)(
        decoder_inputs
    )
    y = keras.layers.Dropout(rate)(y)
    for _ in range(config["num_layers"]):
        y = keras_hub.layers.TransformerDecoder(**common)(y, x)
    logits = keras.layers.Dense(config["vocab_size"])(y)
    return keras.Model({"encoder_inputs": encoder_inputs, "decoder_inputs": decoder_inputs}, logits)


def make_ours(config, steps_per_execution):
    import keras

    keras.utils.set_random_seed(0)
    return _keras_step_fn(build_ours(config), config, steps_per_execution)


def make_keras_hub(config, steps_per_execution):
    import keras

    keras.utils.set_random_seed(0)
    return _keras_step_fn(build_keras_hub(config), config, steps_per_execution)


def make_pytorch(config, steps_per_execution, mode="eager"):
    """`mode`: "eager" float32, "compile" (`torch.compile`, float32), "bf16" (eager, CPU autocast to bfloat16)."""
    import numpy as np

    # PyTorch's first backward pass imports triton (for GPU kernels, unused on
    # CPU), whose LLVM aborts the process when XLA's LLVM is already loaded
    # ("Option ... registered more than once"). Eager CPU training needs no
    # triton, and PyTorch runs without it when it is not importable.
    sys.modules.setdefault("triton", None)
    import torch
    from torch import nn

    torch.manual_seed(0)
    torch.set_num_threads(os.cpu_count())
    d, vocab = config["d_model"], config["vocab_size"]
    length = max(config["source_length"], config["target_length"])

    class Seq2Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.source_embedding = nn.Embedding(vocab, d)
            self.target_embedding = nn.Embedding(vocab, d)
            position = np.arange(length)[:, None] / np.power(10000, (2 * (np.arange(d) // 2)) / d)
            table = np.where(np.arange(d) % 2 == 0, np.sin(position), np.cos(position))
            self.register_buffer("positions", torch.tensor(table, dtype=torch.float32))
            self.dropout = nn.Dropout(config["dropout"])
            self.transformer = nn.Transformer(
                d_model=d,
                nhead=config["num_heads"],
                num_encoder_layers=config["num_layers"],
                num_decoder_layers=config["num_layers"],
                dim_feedforward=config["d_ff"],
                dropout=config["dropout"],
                layer_norm_eps=1e-6,
                batch_first=True,
            )
            self.head = nn.Linear(d, vocab)

        def embed(self, embedding, ids):
            return self.dropout(embedding(ids) * math.sqrt(d) + self.positions[: ids.shape[1]])

        def forward(self, source, target):
            length = target.shape[1]
            causal = torch.ones(length, length, dtype=torch.bool).triu(1)  # True = blocked
            hidden = self.transformer(
                self.embed(self.source_embedding, source),
                self.embed(self.target_embedding, target),
                tgt_mask=causal,
                tgt_is_causal=True,
                src_key_padding_mask=source == 0,
                tgt_key_padding_mask=target == 0,
                memory_key_padding_mask=source == 0,
            )
            return self.head(hidden)

    model = Seq2Seq().train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    loss_fn = nn.CrossEntropyLoss(ignore_index=0, label_smoothing=0.1)
    source, decoder_inputs, labels = (torch.from_numpy(a).long() for a in make_batch(**config))

    def loss_of(source, decoder_inputs, labels):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=mode == "bf16"):
            logits = model(source, decoder_inputs)
        return loss_fn(logits.float().reshape(-1, vocab), labels.reshape(-1))

    if mode == "compile":
        loss_of = torch.compile(loss_of)  # forward and backward, Inductor's C++ kernels on the CPU

    def step(n):
        for _ in range(n):
            optimizer.zero_grad(set_to_none=True)
            loss = loss_of(source, decoder_inputs, labels)
            loss.backward()
            optimizer.step()
        float(loss)
        return n

    return step


def make_ceiling(size=4096):
    """An XLA-compiled `size x size` float32 matmul: `step(n)` runs it n times."""
    import tensorflow as tf

    a = tf.random.stateless_normal((size, size), seed=(1, 2))
    b = tf.random.stateless_normal((size, size), seed=(3, 4))
    matmul = tf.function(lambda a, b: tf.matmul(a, b), jit_compile=True)
    matmul(a, b).numpy()

    def step(n):
        for _ in range(n):
            out = matmul(a, b)
        out.numpy()
        return n

    return step, 2 * size**3


MAKERS = {
    "ours": make_ours,
    "keras_hub": make_keras_hub,
    "pytorch": make_pytorch,
    "pytorch_compile": functools.partial(make_pytorch, mode="compile"),
    "pytorch_bf16": functools.partial(make_pytorch, mode="bf16"),
}


def available(framework):
    """`None` if the framework can run here, else why not."""
    import importlib.util

    needs = {"ours": "tensorflow", "keras_hub": "keras_hub"}.get(framework, "torch")
    if importlib.util.find_spec(needs) is None:
        return f"`{needs}` is not installed"
    return None


# --------------------------------------------------------------------------
# Measurement
# --------------------------------------------------------------------------


def peak_rss_mb():
    # ru_maxrss is in KiB on Linux, bytes on macOS.
    scale = 1 / 1024 if sys.platform != "darwin" else 1 / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def worker(framework, config, steps, steps_per_execution):
    """Runs one framework alone (for its peak RSS); prints one JSON line."""
    start = time.perf_counter()
    step = MAKERS[framework](config, steps_per_execution)
    step(steps_per_execution)  # compile and warm up
    setup = time.perf_counter() - start
    start = time.perf_counter()
    done = step(steps)
    elapsed = time.perf_counter() - start
    print(
        json.dumps({"framework": framework, "setup_s": setup, "step_s": elapsed / done, "peak_rss_mb": peak_rss_mb()})
    )


def measure_memory(frameworks, config, steps, steps_per_execution):
    memory = {}
    for framework in frameworks:
        command = [
            sys.executable,
            __file__,
            "--worker",
            framework,
            "--steps",
            str(steps),
            "--steps-per-execution",
            str(steps_per_execution),
            "--config",
            json.dumps(config),
        ]
        result = subprocess.run(command, capture_output=True, text=True)
        lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
        if result.returncode or not lines:
            print(f"  {framework}: memory run failed:\n{result.stderr[-2000:]}", file=sys.stderr)
            continue
        memory[framework] = json.loads(lines[-1])
        print(
            f"  {LABELS[framework]:30s} peak RSS {memory[framework]['peak_rss_mb']:7.0f} MB "
            f"(alone: {memory[framework]['step_s'] * 1000:.0f} ms/step)",
            flush=True,
        )
    return memory


def round_robin(competitors, rounds, steps):
    """`competitors`: name -> step(n). Returns name -> list of (wall, cpu) per step, per round."""
    times = {name: [] for name in competitors}
    loads = []
    names = list(competitors)
    for index in range(rounds):
        order = names[index % len(names) :] + names[: index % len(names)]
        for name in order:
            wall, cpu = time.perf_counter(), time.process_time()
            done = competitors[name](steps[name])
            times[name].append(((time.perf_counter() - wall) / done, (time.process_time() - cpu) / done))
        loads.append(os.getloadavg())
        summary = "  ".join(f"{n} {times[n][-1][0] * 1000:.0f}ms" for n in names)
        print(f"  round {index + 1}/{rounds}: {summary}  load {loads[-1][0]:.2f}", flush=True)
    return times, loads


def median(values):
    values = sorted(values)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--frameworks",
        default=",".join(DEFAULT_FRAMEWORKS),
        help=f"comma-separated subset of {','.join(FRAMEWORKS)} (default: {','.join(DEFAULT_FRAMEWORKS)})",
    )
    parser.add_argument("--rounds", type=int, default=8, help="timed rounds (each runs every competitor)")
    parser.add_argument("--steps", type=int, default=4, help="training steps per competitor per round")
    parser.add_argument("--steps-per-execution", type=int, default=2)
    parser.add_argument("--memory-steps", type=int, default=4, help="steps of each memory subprocess; 0 skips")
    parser.add_argument(
        "--output",
        help="JSON path (default: benchmarks/results/training/train_throughput.json, "
        "or train_scaling.json with --scaling)",
    )
    parser.add_argument(
        "--scaling", action="store_true", help="step time vs sequence length and d_model instead of the main table"
    )
    parser.add_argument("--worker", choices=FRAMEWORKS, help=argparse.SUPPRESS)
    parser.add_argument("--config", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    config = dict(CONFIG, **json.loads(args.config)) if args.config else dict(CONFIG)
    if args.worker:
        return worker(args.worker, config, args.steps, args.steps_per_execution)

    frameworks = [name.strip() for name in args.frameworks.split(",") if name.strip()]
    if "ours" not in frameworks:
        frameworks.insert(0, "ours")
    for name in list(frameworks):
        reason = available(name) if name in MAKERS else f"unknown framework (one of {FRAMEWORKS})"
        if reason:
            print(f"Skipping {name}: {reason}.")
            frameworks.remove(name)

    import tensorflow  # noqa: F401  (the ceiling needs it; loaded here, the description names its CPU allocator)

    machine = describe_machine()
    if args.scaling:
        return scaling(args, frameworks, config, machine)
    flops = train_flops(**config)
    print(f"Machine: {machine['cpu']}, {machine['cpus']} CPUs; {machine['versions']}")
    print(f"Config: {config}; {flops / 1e9:.1f} GFLOP of model arithmetic per training step")

    memory = {}
    if args.memory_steps:
        print("Peak memory, each framework alone in a subprocess:")
        memory = measure_memory(frameworks, config, args.memory_steps, args.steps_per_execution)

    print("Building and compiling...", flush=True)
    competitors, steps = {}, {}
    for name in frameworks:
        competitors[name] = MAKERS[name](config, args.steps_per_execution)
        competitors[name](args.steps_per_execution)  # compile and warm up
        steps[name] = args.steps
    ceiling_step, ceiling_flops = make_ceiling()
    competitors["matmul_ceiling"], steps["matmul_ceiling"] = ceiling_step, 3
    ceiling_step(1)

    print(f"Timing {args.rounds} rounds (load before: {os.getloadavg()}):", flush=True)
    times, loads = round_robin(competitors, args.rounds, steps)

    ceiling_gflops = ceiling_flops / median(w for w, _ in times["matmul_ceiling"]) / 1e9
    rows = {}
    for name in frameworks:
        wall = median(w for w, _ in times[name])
        cpu = median(c for _, c in times[name])
        # ours's throughput / this one's, per round (the rounds pair them in time)
        speedup = median(t[0] / o[0] for o, t in zip(times["ours"], times[name]))
        rows[name] = {
            "label": LABELS[name],
            "step_ms": wall * 1000,
            "cpu_ms_per_step": cpu * 1000,
            "steps_per_s": 1 / wall,
            "target_tokens_per_s": config["batch_size"] * config["target_length"] / wall,
            "model_gflops_per_s": flops / wall / 1e9,
            "fraction_of_ceiling": flops / wall / 1e9 / ceiling_gflops,
            "ours_speedup_over_this": speedup,
            "peak_rss_mb": memory.get(name, {}).get("peak_rss_mb"),
            "step_ms_rounds": [w * 1000 for w, _ in times[name]],
        }

    print()
    print(
        f"Training throughput, float32, batch {config['batch_size']} x {config['source_length']} "
        f"source / {config['target_length']} target tokens ({flops / 1e9:.1f} GFLOP/step); "
        f"median of {args.rounds} rounds"
    )
    header = (
        f"| {'framework':30s} | steps/s | target tok/s | model GFLOP/s | of ceiling | peak RSS MB | ours is x faster |"
    )
    print(header)
    print("|" + "|".join("-" * (len(cell)) for cell in header.split("|")[1:-1]) + "|")
    for row in rows.values():
        rss = f"{row['peak_rss_mb']:.0f}" if row["peak_rss_mb"] else "-"
        print(
            f"| {row['label']:30s} | {row['steps_per_s']:7.3f} | {row['target_tokens_per_s']:12.0f} "
            f"| {row['model_gflops_per_s']:13.1f} | {row['fraction_of_ceiling']:10.0%} "
            f"| {rss:>11s} | {row['ours_speedup_over_this']:16.2f} |"
        )
    print(f"Matmul ceiling (XLA 4096x4096 float32 matmul, same rounds): {ceiling_gflops:.1f} GFLOP/s")
    print(f"Load average during the rounds: first {loads[0]}, last {loads[-1]}")

    output = pathlib.Path(args.output or RESULTS / "train_throughput.json")
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(
        json.dumps(
            {
                "command": " ".join(["python"] + sys.argv),
                "time": time.strftime("%Y-%m-%d %H:%M:%S"),
                "machine": machine,
                "config": config,
                "flops_per_step": flops,
                "flops_formula": "3 * 2 * (encoder + decoder + head) matmul multiply-adds; see the docstring",
                "timing": {
                    "rounds": args.rounds,
                    "steps_per_round": args.steps,
                    "steps_per_execution": args.steps_per_execution,
                },
                "matmul_ceiling_gflops_per_s": ceiling_gflops,
                "matmul_ceiling_ms_rounds": [w * 1000 for w, _ in times["matmul_ceiling"]],
                "loadavg_per_round": loads,
                "results": rows,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"Wrote {output}")


SCALING = [("length", n, dict(source_length=n, target_length=n)) for n in (32, 64, 128, 256)] + [
    ("d_model", d, dict(d_model=d, d_ff=4 * d)) for d in (128, 256, 512)
]


def scaling(args, frameworks, base, machine):
    """Step time of each framework over `SCALING`'s shapes; one table, one JSON."""
    import keras

    rows = []
    print(f"Scaling, batch {base['batch_size']}, {args.rounds} rounds of {args.steps} steps per shape:")
    print("| sweep   | value | framework          | step ms | target tok/s | model GFLOP/s | ours is x faster |")
    print("|---------|-------|--------------------|---------|--------------|---------------|------------------|")
    for sweep, value, overrides in SCALING:
        config = dict(base, **overrides)
        flops = train_flops(**config)
        competitors = {}
        for name in frameworks:
            keras.backend.clear_session()
            competitors[name] = MAKERS[name](config, args.steps_per_execution)
            competitors[name](args.steps_per_execution)  # compile and warm up
        steps = {name: args.steps for name in frameworks}
        round_robin(competitors, 1, steps)  # untimed: the first calls after compiling run slow
        times, _ = round_robin(competitors, args.rounds, steps)
        for name in frameworks:
            wall = median(w for w, _ in times[name])
            speedup = median(t[0] / o[0] for o, t in zip(times["ours"], times[name]))
            row = {
                "sweep": sweep,
                "value": value,
                "framework": name,
                "config": config,
                "step_ms": wall * 1000,
                "target_tokens_per_s": config["batch_size"] * config["target_length"] / wall,
                "model_gflops_per_s": flops / wall / 1e9,
                "ours_speedup_over_this": speedup,
            }
            rows.append(row)
            print(
                f"| {sweep:7s} | {value:5d} | {LABELS[name]:30s} | {row['step_ms']:7.0f} "
                f"| {row['target_tokens_per_s']:12.0f} | {row['model_gflops_per_s']:13.1f} "
                f"| {speedup:16.2f} |",
                flush=True,
            )
    output = pathlib.Path(args.output or RESULTS / "train_scaling.json")
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(
        json.dumps(
            {
                "command": " ".join(["python"] + sys.argv),
                "time": time.strftime("%Y-%m-%d %H:%M:%S"),
                "machine": machine,
                "timing": {"rounds": args.rounds, "steps_per_round": args.steps},
                "rows": rows,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"Wrote {output}")


if __name__ == "__main__":
    main()
