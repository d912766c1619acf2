"""The decoder outside XLA: oneDNN's kernels (TensorFlow graph mode) against today's XLA loop, on the same work.

TensorFlow runs a product without XLA in oneDNN (`TF_ENABLE_ONEDNN_OPTS=1`,
the default on x86 Linux). Issue 78 measured oneDNN's float32 faster than
XLA's on the tied output projection (132 against 113 GFLOP/s at 32 rows,
on an EPYC with AVX-512), its bf16 faster again (196), and a transposed
tied weight slow (53). This script asks whether that reaches the whole
decode, on this machine, in one process, the systems taking turns for
`--rounds` rounds:

- `xla`: `decoding.compile_search` (XLA), what `export.load(run)` decodes with;
- `xla, row-major copy`: the same with a row-major `(d_model, vocab)` copy
  of the tied output matrix (the layer computes `hidden @ embeddings.T`);
- `graph`: the same search with `jit_compile=False`: the whole loop a
  TensorFlow graph, its products oneDNN's;
- `graph, row-major copy`: with the copy;
- `graph, row-major copy, bf16 projection`: the output projection in bf16
  (the copy cast once), where oneDNN has bf16 kernels (AVX512_BF16 or AMX;
  without them it is emulated, and shown only for the record).

Before the decodes, the output projection alone (`--rows`, e.g. 32 and
128) in each route, in GFLOP/s. The work: the first `--sentences` English
sentences of multi30k's test_2016_flickr, sorted by length, batches of
`--batch-size` padded to the batch's source bucket, greedy (and beam
`--beam` unless `--no-beam`), at most `--max-length` tokens. Every system's
ids are compared with XLA's. Writes JSON with the command, the machine, its
CPU flags and the load average. Not run by CI.

Example:

    python benchmarks/onednn_decode.py --run benchmarks/.cache/real_size/run-b \\
        --output benchmarks/results/decoding/onednn_decode.json
"""

import argparse
import json
import os
import pathlib
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")

HERE = pathlib.Path(__file__).resolve().parent


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, help="a run directory (an OPUS-MT-base-shaped import)")
    parser.add_argument("--sentences", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--no-beam", action="store_true")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rows", default="32,128", help="the projection alone: rows of each product")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--data", default=None)
    parser.add_argument("--output", type=pathlib.Path, required=True)
    return parser.parse_args()


def row_major_logits(model, bf16=False):
    """`model.logits` with a row-major copy of its tied output matrix (and the projection in bf16 with `bf16`)."""
    import tensorflow as tf

    embedding = model.decoder_embedding
    copy = tf.Variable(tf.transpose(embedding.embeddings), trainable=False)
    if bf16:
        copy = tf.Variable(tf.cast(copy, tf.bfloat16), trainable=False)
    bias = embedding.logits_bias if embedding.output_bias else None

    def logits(hidden):
        if model.decoder_norm is not None:
            hidden = model.decoder_norm(hidden)
        shape = tf.shape(hidden)
        flat = tf.reshape(hidden, [-1, hidden.shape[-1]])
        out = tf.matmul(tf.cast(flat, copy.dtype), copy)
        out = tf.reshape(tf.cast(out, hidden.dtype), tf.concat([shape[:-1], [-1]], 0))
        return out if bias is None else out + tf.cast(bias, out.dtype)

    return logits


def projection_rates(model, rows, repeats):
    """GFLOP/s of the output projection alone, `rows` rows, in each route."""
    import numpy as np
    import tensorflow as tf

    weights = model.decoder_embedding.embeddings  # (vocab, d_model): the tied matrix as stored
    vocab, width = weights.shape
    row_major = tf.Variable(tf.transpose(weights))
    row_major_bf16 = tf.Variable(tf.cast(row_major, tf.bfloat16))
    x = tf.constant(np.random.default_rng(0).normal(size=(rows, width)).astype("float32"))
    routes = {
        "xla f32, transposed (as the layer)": (lambda a: tf.matmul(a, weights, transpose_b=True), True, x),
        "xla f32, row-major copy": (lambda a: tf.matmul(a, row_major), True, x),
        "onednn f32, transposed (as the layer)": (lambda a: tf.matmul(a, weights, transpose_b=True), False, x),
        "onednn f32, row-major copy": (lambda a: tf.matmul(a, row_major), False, x),
        "onednn bf16, row-major copy": (lambda a: tf.matmul(a, row_major_bf16), False, tf.cast(x, tf.bfloat16)),
    }
    rates = {}
    for name, (fn, jit, argument) in routes.items():
        compiled = tf.function(fn, jit_compile=jit)
        compiled(argument).numpy()
        compiled(argument).numpy()
        start = time.perf_counter()
        for _ in range(repeats):
            out = compiled(argument)
        out.numpy()
        seconds = (time.perf_counter() - start) / repeats
        rates[name] = {"ms": round(seconds * 1e3, 2), "gflops": round(2 * rows * width * vocab / seconds / 1e9, 1)}
    return rates


def batches(translator, sentences, batch_size):
    """The sentences sorted by length, as bucketed source ids, `batch_size` a batch."""
    import tensorflow as tf

    ordered = sorted(sentences, key=len)
    empty = tf.fill([batch_size], "")
    rows = [
        (ordered[s : s + batch_size], empty[: len(ordered[s : s + batch_size])])
        for s in range(0, len(ordered), batch_size)
    ]
    return [translator.search_inputs(tf.constant(batch), none, none, none)[0] for batch, none in rows]


def systems(args):
    """`{name: (model, jit_compile)}`: each route's model (a patched copy where its logits differ)."""
    import keras

    from keras_transformer import runs

    def fresh():
        return keras.saving.load_model(pathlib.Path(args.run) / runs.MODEL, compile=False)

    plain, copied, bf16 = fresh(), fresh(), fresh()
    object.__setattr__(copied, "logits", row_major_logits(copied))
    object.__setattr__(bf16, "logits", row_major_logits(bf16, bf16=True))
    return plain, {
        "xla": (plain, True),
        "xla, row-major copy": (copied, True),
        "graph": (plain, False),
        "graph, row-major copy": (copied, False),
        "graph, row-major copy, bf16 projection": (bf16, False),
    }


def main():
    args = parse_args()
    sys.path.insert(0, str(HERE))
    from corpus import multi30k_folder
    from machine import describe_machine, machine_line

    from keras_transformer import decoding, opener

    info = describe_machine()
    print(machine_line(info), flush=True)
    data = multi30k_folder(args.data)
    sentences = (data / "test_2016_flickr.en").read_text(encoding="utf-8").splitlines()[: args.sentences]
    translator = opener.open_translator(args.run)
    work = batches(translator, sentences, args.batch_size)
    plain, routes = systems(args)
    rates = {rows: projection_rates(plain, int(rows), args.repeats) for rows in args.rows.split(",")}
    print(json.dumps(rates, indent=1), flush=True)
    model_search = translator.search_settings.search
    options = translator.search_settings.options
    searches = {"greedy": decoding.search_for(1, model_search.alpha, **options)}
    if not args.no_beam:
        searches[f"beam {args.beam}"] = decoding.search_for(args.beam, model_search.alpha, **options)
    results = {}
    for search_name, search in searches.items():
        decoders = {
            name: decoding.compile_search(model, search, max_length=args.max_length, jit_compile=jit)
            for name, (model, jit) in routes.items()
        }
        ids, first, times = {}, {}, {name: [] for name in decoders}
        for name, decode in decoders.items():  # the first pass: traces and compiles every shape
            start = time.perf_counter()
            ids[name] = [decode(batch).ids.numpy() for batch in work]
            first[name] = round(time.perf_counter() - start, 2)
        for _ in range(args.rounds):
            for name, decode in decoders.items():
                start = time.perf_counter()
                for batch in work:
                    decode(batch).ids.numpy()
                times[name].append(round(time.perf_counter() - start, 3))
                print(search_name, name, times[name][-1], f"load {os.getloadavg()[0]:.1f}", flush=True)
        reference = ids["xla"]
        results[search_name] = {
            name: {
                "seconds": times[name],
                "median_s": statistics.median(times[name]),
                "against_xla": round(statistics.median(times["xla"]) / statistics.median(times[name]), 3),
                "first_pass_s": first[name],
                "sentences_with_xla_ids": int(
                    sum((a[:, 0] == b[:, 0]).all(axis=1).sum() for a, b in zip(ids[name], reference))
                ),
            }
            for name in decoders
        }
        print(json.dumps(results[search_name], indent=1), flush=True)
    report = {
        "command": " ".join(["python", *sys.argv]),
        "machine": info,
        "machine_line": machine_line(info),
        "settings": {k: str(v) for k, v in vars(args).items()},
        "projection_alone": rates,
        "decode": results,
        "load_average_1min_after": round(os.getloadavg()[0], 2),
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    raise SystemExit(main())
