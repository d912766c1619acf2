"""Serving load: requests/s of one loaded SavedModel `Translator` shared by N client threads.

Each client thread sends `--requests` requests of `--batch` sentences, one
after the other, to the same `tf.saved_model.load`ed module (as a server's
worker threads would), alternating beam search and greedy unless
`--method` picks one. The sentences are the Korean chatbot corpus's
validation questions mixed with empty, whitespace-only and over-long inputs
(beyond the model's source limit) and non-Korean text. Every output is
checked against the output of the same request sent alone, from one thread;
any difference or error is counted and makes the exit status 1.

Before timing, every request shape is sent once (XLA compiles one program
per batch bucket, source bucket and method), so the table shows the steady
rate; the first calls' time is printed apart. Prints the machine and the
configuration first. Not run by CI (`tests/test_load.py` is the test).

The model is `--model` (an exported SavedModel or a training run directory,
which is exported to a temporary folder first) or, by default, the tiny
preset trained for 1 epoch on 300 pairs and exported (about 1-2 minutes).

Example:

    python benchmarks/serve_load.py --threads 1,2,4,8 --requests 200
    python benchmarks/serve_load.py --model saved_models/chatbot-ko-export --batch 8
"""

import argparse
import os
import pathlib
import random
import shutil
import statistics
import tempfile
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
from machine import machine_line  # noqa: E402

from keras_transformer import runs  # noqa: E402
from keras_transformer.export import load  # noqa: E402


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a SavedModel or a run directory (default: train the tiny preset)")
    parser.add_argument("--threads", default="1,2,4,8", help="client thread counts, comma-separated")
    parser.add_argument("--requests", type=int, default=200, help="requests per thread")
    parser.add_argument("--batch", type=int, default=1, help="sentences per request")
    parser.add_argument("--method", default="both", choices=["both", "beam", "greedy"])
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def saved_model(args, workdir):
    """(path of a SavedModel, description)."""
    if args.model and runs.is_saved_model(args.model):
        return pathlib.Path(args.model), f"SavedModel {args.model}"
    if args.model:
        path = load(args.model).save(workdir / "export")
        return pathlib.Path(path), f"run {args.model}, exported to a temporary folder"
    from keras_transformer.training import train

    started = time.perf_counter()
    train("tiny", output=workdir / "run", epochs=1, max_examples=300, verbose=0)
    path = load(workdir / "run").save(workdir / "export")
    seconds = time.perf_counter() - started
    return pathlib.Path(path), f"tiny preset, 1 epoch on 300 pairs ({seconds:.0f} s to train and export)"


def sentences(seed):
    """Corpus questions of every length, blanks, over-long and non-Korean inputs."""
    from keras_transformer.datasets import load_split_pairs

    questions = [q for q, _ in load_split_pairs("chatbot-ko")["validation"]]
    rng = random.Random(seed)
    texts = rng.sample(questions, 100) + ["", " ", "  \t ", "\u3000", "A dog runs.", "😀 ?!", "x"]
    texts += [" ".join(rng.choice(questions) for _ in range(n)) for n in (4, 8, 12, 20, 40, 200)]
    return texts


def plan(args, texts, threads, seed):
    """Each thread's list of (method, tuple of sentences)."""
    rng = random.Random(seed)
    methods = ["beam", "greedy"] if args.method == "both" else [args.method]
    return [
        [
            (methods[(t + i) % len(methods)], tuple(rng.choice(texts) for _ in range(args.batch)))
            for i in range(args.requests)
        ]
        for t in range(threads)
    ]


def call(translator, method, batch):
    fn = translator if method == "beam" else translator.greedy
    return tuple(s.decode("utf-8") for s in fn(tf.constant(list(batch))).numpy())


def serve(translator, plans, reference):
    """(seconds, latencies, mismatches, errors) of the threads running `plans` at once."""
    latencies, mismatches, errors = [], [], []
    lock, barrier = threading.Lock(), threading.Barrier(len(plans))

    def client(requests):
        barrier.wait()
        for method, batch in requests:
            start = time.perf_counter()
            try:
                output = call(translator, method, batch)
            except Exception as error:  # noqa: BLE001  (counted and reported)
                with lock:
                    errors.append(f"{type(error).__name__}: {error}"[:200])
                continue
            elapsed = time.perf_counter() - start
            with lock:
                latencies.append(elapsed)
                if output != reference[method, batch]:
                    mismatches.append((method, batch))

    workers = [threading.Thread(target=client, args=(requests,)) for requests in plans]
    start = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return time.perf_counter() - start, latencies, mismatches, errors


def main():
    args = parse_args()
    thread_counts = [int(n) for n in args.threads.split(",")]
    threads = (
        tf.config.threading.get_intra_op_parallelism_threads(),
        tf.config.threading.get_inter_op_parallelism_threads(),
    )
    print(f"{machine_line()} | TF intra/inter-op threads {threads} (0 = automatic)")
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="serve-load-"))
    try:
        path, description = saved_model(args, workdir)
        translator = load(path)
        texts = sentences(args.seed)
        limit = int(translator.max_source_length.numpy())
        lengths = translator.source_lengths(tf.constant(texts)).numpy()
        print(f"model: {description} | beam {int(translator.beam_size.numpy())}, source limit {limit} tokens")
        print(
            f"requests: {args.requests} per thread x {args.batch} sentence(s), method {args.method}; "
            f"{len(texts)} distinct sentences, {sum(lengths == 0)} blank, "
            f"{sum(lengths > limit)} over the limit"
        )

        plans = {n: plan(args, texts, n, args.seed + n) for n in thread_counts}
        requests = {r for p in plans.values() for thread in p for r in thread}
        started = time.perf_counter()
        reference = {request: call(translator, *request) for request in requests}
        seconds = time.perf_counter() - started
        print(
            f"single-threaded reference of {len(requests)} distinct requests: {seconds:.1f} s "
            "(every shape's XLA compile included)\n"
        )

        print("| threads | requests | seconds | requests/s | sentences/s | p50 ms | p95 ms | mismatches | errors |")
        print("|---|---|---|---|---|---|---|---|---|")
        failures = 0
        for n in thread_counts:
            seconds, latencies, mismatches, errors = serve(translator, plans[n], reference)
            total = n * args.requests
            q = statistics.quantiles(latencies, n=20) if len(latencies) > 1 else [float("nan")] * 19
            print(
                f"| {n} | {total} | {seconds:.2f} | {total / seconds:.1f} "
                f"| {total * args.batch / seconds:.1f} "
                f"| {1000 * statistics.median(latencies):.1f} | {1000 * q[18]:.1f} | {len(mismatches)} "
                f"| {len(errors)} |"
            )
            for error in errors[:3]:
                print(f"  error: {error}")
            failures += len(mismatches) + len(errors)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
