"""Decoding throughput: sentences/s of greedy and beam search, cached vs uncached.

Translates Multi30k test (or val) sentences in batches of 100, up to 64
generated tokens, with each decoder compiled by XLA (`compile_decoder`):
the cached decoders (one decoder step per token over the key/value cache)
and the uncached baselines (the whole model re-run on the whole target
buffer at every step). Sources are sorted by length and all padded to
the longest one, rounded up to a multiple of 16 (one shape, one XLA
program per decoder). One run: the first batch of each decoder (XLA compile
included) is reported apart, the rest give the steady rate. Prints the
machine and the configuration first. Not run by CI.

The model is a run directory's (`--model`) or, by default, an *untrained*
11.7M-parameter model shaped like the multi30k-en-de preset with separate
source/target embeddings and output layer (3+3 layers, d_model 256, 4
heads, d_ff 1024, vocab 8000): it never predicts END, so every sentence
runs all `--max-length` steps, the worst case.

Example:

    python benchmarks/decode_throughput.py --sentences 1000 --uncached-sentences 200
"""

import argparse
import os
import pathlib
import platform
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from keras_transformer import build_transformer, decoding, run_dir  # noqa: E402
from keras_transformer.tokenizers import SubwordTokenizer  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "multi30k_task1"
SPLITS = {"test": "test_2016_flickr.en", "val": "val.en"}


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=str(DATA))
    parser.add_argument("--split", default="test", choices=sorted(SPLITS))
    parser.add_argument("--model", help="a training run directory (default: an untrained 11.7M model)")
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--uncached-sentences", type=int, default=1000,
                        help="sentences for the (slow) uncached baselines; 0 skips them")
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--max-length", type=int, default=64, help="tokens generated at most")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--alpha", type=float, default=0.6)
    return parser.parse_args()


def describe_machine():
    gpus = [d.name for d in tf.config.list_physical_devices("GPU")]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"{platform.node()} | {platform.processor() or platform.machine()} | {os.cpu_count()} CPUs "
        f"(load {load:.1f}) | GPUs: {gpus or 'none'} | TF {tf.__version__}, Keras {keras.__version__}"
    )


def model_and_tokenizer(args, sentences):
    if args.model:
        model = keras.saving.load_model(pathlib.Path(args.model) / run_dir.MODEL, compile=False)
        tokenizer = SubwordTokenizer.load(pathlib.Path(args.model) / run_dir.SOURCE_TOKENIZER)
        return model, tokenizer, f"trained run {args.model}"
    keras.utils.set_random_seed(0)  # before any tokenizer exists (tensorflow/text#570)
    train = (pathlib.Path(args.data_dir) / "train.en").read_text(encoding="utf-8").splitlines()
    tokenizer = SubwordTokenizer.train(train, vocab_size=8000)
    model = build_transformer(8000, 8000, num_layers=3, d_model=256, num_heads=4, d_ff=1024,
                              max_length=max(64, args.max_length))
    return model, tokenizer, "untrained, separate embeddings and output layer"


def batches(tokenizer, sentences, batch_size, max_source_length=64):
    """Length-sorted batches of ids, all of one shape (one XLA program per decoder).

    Every batch is padded to the longest source (rounded up to 16, at most
    `max_source_length`) and to `batch_size` rows (extra rows are empty and
    decode to nothing).
    """
    ids = tokenizer.tokenize(tf.constant(sentences))[:, :max_source_length]
    width = min(-(-int(tf.reduce_max(ids.row_lengths())) // 16) * 16, max_source_length)
    order = np.argsort(ids.row_lengths().numpy(), kind="stable")
    for start in range(0, len(order), batch_size):
        batch = tf.gather(ids, order[start:start + batch_size]).to_tensor(0, shape=[None, width])
        yield batch, tf.pad(batch, [[0, batch_size - batch.shape[0]], [0, 0]])


def measure(decode, source_batches):
    """(first batch seconds, steady sentences/s over the other batches, generated tokens)."""
    first, steady_time, steady_sentences, tokens = None, 0.0, 0, 0
    for real, source in source_batches:
        start = time.perf_counter()
        output = decode(source).numpy()[: real.shape[0]]
        elapsed = time.perf_counter() - start
        tokens += int(np.count_nonzero(output))
        if first is None:
            first = elapsed
        else:
            steady_time += elapsed
            steady_sentences += output.shape[0]
    rate = steady_sentences / steady_time if steady_time else float("nan")
    return first, rate, tokens


def main():
    args = parse_args()
    path = pathlib.Path(args.data_dir) / SPLITS[args.split]
    sentences = path.read_text(encoding="utf-8").splitlines()[: args.sentences]
    model, tokenizer, kind = model_and_tokenizer(args, sentences)
    print(f"machine: {describe_machine()}")
    print(f"model: {model.count_params() / 1e6:.1f}M parameters, {kind}")
    print(f"data: {len(sentences)} sentences of {path.name}, batches of {args.batch_size}, "
          f"max {args.max_length} generated tokens, beam {args.beam} alpha {args.alpha}, XLA")
    configs = [
        ("greedy", "cached", "greedy", {}),
        (f"beam-{args.beam}", "cached", "beam", dict(beam_size=args.beam, alpha=args.alpha)),
        ("greedy", "uncached", "greedy_uncached", {}),
        (f"beam-{args.beam}", "uncached", "beam_uncached", dict(beam_size=args.beam, alpha=args.alpha)),
    ]
    print(f"{'decoder':<8} {'cache':<9} {'sentences':>9} {'first batch s':>14} {'steady sent/s':>14} "
          f"{'tokens/s':>9}")
    for name, cache, method, options in configs:
        count = len(sentences) if cache == "cached" else min(args.uncached_sentences, len(sentences))
        if count == 0:
            continue
        decode = decoding.compile_decoder(model, method, max_length=args.max_length, **options)
        first, rate, tokens = measure(decode, batches(tokenizer, sentences[:count], args.batch_size))
        print(f"{name:<8} {cache:<9} {count:>9} {first:>14.1f} {rate:>14.2f} "
              f"{rate * tokens / count:>9.0f}", flush=True)


if __name__ == "__main__":
    main()
