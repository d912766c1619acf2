"""Input-pipeline throughput: Multi30k en-de strings -> bucketed, token-budgeted id batches.

Trains (or loads) a shared SentencePiece vocabulary, builds `make_batches`, runs
one warm-up epoch (which fills the in-memory cache: of the token ids, or of the
strings with `--subword-sampling`, which tokenizes every epoch) and then times
further epochs, printing sentences/s and target tokens/s (non-padding labels,
END included) with the machine and the configuration.

Example:

    python benchmarks/input_pipeline.py --data-dir DATA --epochs 3
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
from machine import machine_line  # noqa: E402

from keras_transformer.datasets import corpora, pipeline  # noqa: E402
from keras_transformer.tokenizers import SubwordTokenizer  # noqa: E402


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default="multi30k-en-de", choices=sorted(corpora.CORPORA))
    parser.add_argument("--data-dir", help="the corpora's folder (default: $KERAS_TRANSFORMER_DATA_DIR, else download)")
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--tokenizer-dir", default=None, help="load a saved tokenizer instead of training one")
    parser.add_argument("--token-budget", type=int, default=4096)
    parser.add_argument("--buckets", default="16,32,48,64,96,128")
    parser.add_argument("--epochs", type=int, default=3, help="timed epochs after the warm-up epoch")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--subword-sampling",
        type=float,
        default=0.0,
        help="tokenize with `tokenizer.sampler(ALPHA)`, again every epoch (0: off)",
    )
    return parser.parse_args()


def run_epoch(batches):
    start, sentences, tokens, steps = time.perf_counter(), 0, 0, 0
    for _, labels in batches:
        labels = labels.numpy()
        sentences += labels.shape[0]
        tokens += int(np.count_nonzero(labels))
        steps += 1
    return time.perf_counter() - start, sentences, tokens, steps


def main():
    args = parse_args()
    buckets = tuple(int(b) for b in args.buckets.split(","))
    print("machine:", machine_line())
    train = corpora.load_pairs(args.corpus, args.data_dir, split="train")
    if args.tokenizer_dir:
        tokenizer = SubwordTokenizer.load(args.tokenizer_dir)
        print(f"tokenizer: loaded from {args.tokenizer_dir}, vocab {tokenizer.vocab_size}")
    else:
        start = time.perf_counter()
        tokenizer = SubwordTokenizer.train([s for s, _ in train] + [t for _, t in train], args.vocab_size)
        print(
            f"tokenizer: shared SentencePiece unigram, vocab {tokenizer.vocab_size}, "
            f"trained on {2 * len(train)} lines in {time.perf_counter() - start:.1f} s"
        )
    print(
        f"config: corpus {args.corpus} train ({len(train)} pairs), token_budget {args.token_budget}, "
        f"buckets {buckets}, shapes {pipeline.bucket_shapes(args.token_budget, buckets)}, seed {args.seed}, "
        f"subword sampling {args.subword_sampling or 'off'}"
    )
    if args.subword_sampling:
        tokenizer = tokenizer.sampler(args.subword_sampling)
    batches = pipeline.make_batches(
        corpora.load_corpus(args.corpus, args.data_dir, split="train"),
        tokenizer,
        token_budget=args.token_budget,
        bucket_boundaries=buckets,
        seed=args.seed,
    )
    seconds, sentences, tokens, steps = run_epoch(batches)
    print(f"warm-up epoch (fills the cache): {seconds:.2f} s, {sentences / seconds:,.0f} sentences/s")
    timed = [run_epoch(batches) for _ in range(args.epochs)]
    seconds = sum(t[0] for t in timed)
    sentences, tokens, steps = (sum(t[i] for t in timed) for i in (1, 2, 3))
    print(
        f"timed {args.epochs} epochs: {seconds:.2f} s, {steps} batches, "
        f"{sentences / seconds:,.0f} sentences/s, {tokens / seconds:,.0f} target tokens/s, "
        f"{1e3 * seconds / steps:.2f} ms/batch"
    )


if __name__ == "__main__":
    main()
