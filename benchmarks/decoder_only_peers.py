"""Training step of the decoder-only model (GPT) against keras-hub's `GPT2Backbone` of the same shape.

Both are GPT-2's architecture at one size: vocabulary 8,000, 4 layers,
width 256, 4 heads, feed-forward 1,024, 128 positions (learned), pre-norm
with a final LayerNorm, the tanh GELU, dropout 0.1, the output tied to the
token embedding; batches of 32 sequences of 64 tokens, Adam (1e-4),
float32, `jit_compile=True`, this package's masked cross-entropy:

* **ours**: `build_decoder_only(...)` (the package's `DecoderLayer`s);
* **keras-hub**: `keras_hub.models.GPT2Backbone(...)` with its token
  embedding's `reverse=True` as the output, as `GPT2CausalLM` does.

Every step trains on the same fixed batch of random ids. The two take
turns (round robin, the order rotating each round), a few steps each, so
that a shared machine's load falls on both alike; the result is the median
step time of each and the median of the per-round ratios. Results go to
`benchmarks/results/training/decoder_only_peers.json`. Not run by CI.

Example:

    python benchmarks/decoder_only_peers.py --rounds 7 --steps 3
"""

import argparse
import json
import os
import pathlib
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")

REPO = pathlib.Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results" / "training"
for path in (str(REPO), str(REPO / "benchmarks")):
    if path not in sys.path:
        sys.path.insert(0, path)

from machine import describe_machine  # noqa: E402

CONFIG = dict(
    vocab_size=8000, num_layers=4, d_model=256, num_heads=4, d_ff=1024, max_length=128, dropout=0.1, batch=32, length=64
)


def build_ours(config):
    from keras_transformer import build_decoder_only

    return build_decoder_only(
        config["vocab_size"],
        num_layers=config["num_layers"],
        d_model=config["d_model"],
        num_heads=config["num_heads"],
        d_ff=config["d_ff"],
        dropout=config["dropout"],
        attention_dropout=config["dropout"],
        max_length=config["max_length"],
    )


def build_keras_hub(config):
    import keras
    import keras_hub

    backbone = keras_hub.models.GPT2Backbone(
        vocabulary_size=config["vocab_size"],
        num_layers=config["num_layers"],
        num_heads=config["num_heads"],
        hidden_dim=config["d_model"],
        intermediate_dim=config["d_ff"],
        dropout=config["dropout"],
        max_sequence_length=config["max_length"],
    )
    token_ids = keras.Input((None,), dtype="int32", name="token_ids")
    padding_mask = keras.ops.not_equal(token_ids, 0)
    hidden = backbone({"token_ids": token_ids, "padding_mask": padding_mask})
    logits = backbone.token_embedding(hidden, reverse=True)
    return keras.Model(token_ids, logits)


def step_function(model, config):
    """`step()`: one compiled training step on a fixed batch, blocking until it is done."""
    import keras
    import numpy as np
    import tensorflow as tf

    from keras_transformer import MaskedSparseCategoricalCrossentropy

    model.compile(optimizer=keras.optimizers.Adam(1e-4), loss=MaskedSparseCategoricalCrossentropy(), jit_compile=True)
    rng = np.random.default_rng(0)
    ids = rng.integers(1, config["vocab_size"], (config["batch"], config["length"] + 1)).astype("int32")
    iterator = iter(tf.data.Dataset.from_tensors((ids[:, :-1], ids[:, 1:])).repeat())
    model.optimizer.build(model.trainable_variables)
    model.make_train_function()
    train_function = model.train_function

    def step():
        float(train_function(iterator)["loss"])

    return step


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=3, help="steps per framework per round")
    parser.add_argument("--output", default=str(RESULTS / "decoder_only_peers.json"))
    args = parser.parse_args()
    import keras

    keras.utils.set_random_seed(0)
    models = {"ours": build_ours(CONFIG), "keras_hub": build_keras_hub(CONFIG)}
    parameters = {name: model.count_params() for name, model in models.items()}
    steps, first = {}, {}
    for name, model in models.items():
        start = time.perf_counter()
        steps[name] = step_function(model, CONFIG)
        steps[name]()  # trace and compile
        first[name] = time.perf_counter() - start
    times = {name: [] for name in models}
    ratios = []
    order = list(models)
    for round_index in range(args.rounds):
        this_round = {}
        for name in order[round_index % 2 :] + order[: round_index % 2]:
            start = time.perf_counter()
            for _ in range(args.steps):
                steps[name]()
            this_round[name] = (time.perf_counter() - start) / args.steps
            times[name].append(this_round[name])
        ratios.append(this_round["keras_hub"] / this_round["ours"])
        print(f"round {round_index}: " + ", ".join(f"{k} {v * 1000:.1f} ms" for k, v in this_round.items()), flush=True)
    tokens = CONFIG["batch"] * CONFIG["length"]
    result = {
        "config": CONFIG,
        "parameters": parameters,
        "first_step_s": {name: round(value, 2) for name, value in first.items()},
        "median_step_ms": {name: round(statistics.median(values) * 1000, 1) for name, values in times.items()},
        "tokens_per_s": {name: round(tokens / statistics.median(values)) for name, values in times.items()},
        "step_ms_per_round": {name: [round(v * 1000, 1) for v in values] for name, values in times.items()},
        "keras_hub_over_ours": round(statistics.median(ratios), 3),
        "ratios_per_round": [round(r, 3) for r in ratios],
        "machine": describe_machine(),
        "command": "python benchmarks/decoder_only_peers.py " + " ".join(sys.argv[1:]),
    }
    pathlib.Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(args.output).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({k: result[k] for k in ("parameters", "median_step_ms", "keras_hub_over_ours")}))


if __name__ == "__main__":
    main()
