"""Where our decoder's time goes at OPUS-MT base's size: the encoder, one cached step, and its logits.

Loads a run (`real_size.py`'s import of the real-size Marian model), takes
the first `--batch-size` English sentences of multi30k's `test_2016_flickr`
as one batch (padded to the width the Translator's buckets give), and times,
each as its own XLA program, compiled first and then the median of
`--repeats` calls:

- `encode`: the encoder and the decoder layers' cross-attention keys/values
  (`decoding.cache.initial_state`);
- `step`: one cached decoder step (`cached_step`) at position `--position`,
  for `batch` rows (greedy) and `batch * beam` rows (beam search), logits
  over the whole vocabulary included; and the greedy step's decoder layers
  alone, without the output head;
- `logits`: only the output projection, `(rows, d_model) @ (d_model, vocab)`
  plus the bias, and the same with a log-softmax and top-k (what a beam
  step adds on top), the rest of the step being the difference.

Prints a table and writes JSON to `benchmarks/results/real_size/profile.json`.
Not run by CI.

Example:

    python benchmarks/real_size_profile.py --run /tmp/real_size/run
"""

import argparse
import json
import os
import pathlib
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from keras_transformer import runs  # noqa: E402
from keras_transformer.decoding import cache  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from corpus import multi30k_folder  # noqa: E402
from machine import describe_machine, machine_line  # noqa: E402


def timed(function, *inputs, repeats=10):
    """(first call seconds, median seconds of `repeats` calls) of `function(*inputs)`, synchronised by numpy."""

    def call():
        out = function(*inputs)
        tf.nest.map_structure(lambda t: t.numpy() if hasattr(t, "numpy") else t, out)

    start = time.perf_counter()
    call()
    first = time.perf_counter() - start
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        runs.append(time.perf_counter() - start)
    return first, statistics.median(runs)


def decoder_layers_only(model, tokens, index, state):
    """The cached greedy step's decoder layers, without the output head: what the step costs besides the logits."""
    caches, _, (cross_caches, source_mask) = state
    return model.decoder_states(tf.reshape(tokens, (-1, 1)), index, caches, cross_caches, source_mask)[0]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", default="/tmp/real_size/run")
    parser.add_argument("--data", help="multi30k task 1 (default: found as corpus.py says, else downloaded once)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--position", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--output", default=str(HERE / "results" / "real_size" / "profile.json"))
    args = parser.parse_args(argv)
    run = pathlib.Path(args.run)
    model = keras.saving.load_model(run / runs.MODEL, compile=False)
    tokenizers = runs.load_tokenizers(run)
    test_file = multi30k_folder(args.data) / "test_2016_flickr.en"
    sentences = test_file.read_text(encoding="utf-8").splitlines()
    rows = tokenizers.source.tokenize(tf.constant(sentences[: args.batch_size])).to_list()
    end, pad = int(tokenizers.source.end_id), int(tokenizers.source.pad_id)
    width = -(-max(len(r) + 1 for r in rows) // 16) * 16
    source = np.full((args.batch_size, width), pad, "int32")
    for i, r in enumerate(rows):
        source[i, : len(r) + 1] = r + [end]
    source = tf.constant(source)
    vocab = model.config.target_vocab_size
    d_model = model.config.d_model
    results = []

    def add(name, rows_count, first, seconds):
        results.append(dict(part=name, rows=rows_count, first_call_seconds=round(first, 2), ms=round(seconds * 1e3, 2)))
        print(f"{name:<55} rows {rows_count:>4}  {seconds * 1e3:8.2f} ms  (first call {first:.1f} s)", flush=True)

    for beams in (1, args.beam):
        encode = tf.function(lambda s, b=beams: cache.initial_state(model, s, args.max_length, b), jit_compile=True)
        state = encode(source)
        add(
            f"encode + cross-attention caches (beam {beams})",
            args.batch_size,
            *timed(encode, source, repeats=args.repeats),
        )
        step_fn = cache.cached_step(model, beams)
        step = tf.function(lambda t, i, s, f=step_fn: f(t, i, s)[0], jit_compile=True)
        tokens = tf.fill([args.batch_size * beams], 5)
        index = tf.constant(args.position)
        add(f"one cached step at position {args.position} (beam {beams})", args.batch_size * beams,
            *timed(step, tokens, index, state, repeats=args.repeats))  # fmt: skip
        if beams == 1:
            layers = tf.function(lambda t, i, s: decoder_layers_only(model, t, i, s), jit_compile=True)
            add(f"the same step without the output head (beam {beams})", args.batch_size,
                *timed(layers, tokens, index, state, repeats=args.repeats))  # fmt: skip
    embedding = model.config.tie_output_embedding
    weights = [w for w in model.weights if tuple(w.shape) in ((vocab, d_model), (d_model, vocab))][0]
    matrix = tf.constant(weights.numpy() if tuple(weights.shape) == (d_model, vocab) else weights.numpy().T)
    bias = tf.zeros([vocab])
    for rows_count in (args.batch_size, args.batch_size * args.beam):
        hidden = tf.random.normal([rows_count, d_model])
        project = tf.function(lambda h: tf.matmul(h, matrix) + bias, jit_compile=True)
        add(f"logits only: ({rows_count}, {d_model}) @ ({d_model}, {vocab})", rows_count,
            *timed(project, hidden, repeats=args.repeats))  # fmt: skip
        both = tf.function(lambda h: tf.math.top_k(tf.nn.log_softmax(tf.matmul(h, matrix) + bias), 8), jit_compile=True)
        add("logits + log_softmax + top_k(8)", rows_count, *timed(both, hidden, repeats=args.repeats))
    info = describe_machine()
    report = dict(
        benchmark="real_size_profile",
        command="python " + " ".join(sys.argv),
        machine=info,
        machine_line=machine_line(info),
        settings=dict(vars(args), source_width=width, vocab=vocab, d_model=d_model, tied=bool(embedding)),
        results=results,
    )
    output = pathlib.Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {output}")


if __name__ == "__main__":
    main()
