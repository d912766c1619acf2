"""Serving over HTTP: requests/s and latency of `keras-transformer serve`, dynamic batching on and off.

Starts `keras-transformer serve` (a subprocess on 127.0.0.1, a free port) once
with dynamic batching and once without (batch-of-one), and drives each with
1, 4 and 16 concurrent HTTP clients (`--clients`). Each client sends
`--requests` single-sentence predict requests (`--signature`, default
`serving_default`, the beam search), one after the other, in TF Serving's row
format. Every answer is compared with the answer to the same request sent
alone to the batch-of-one server: a translation that differs is a mismatch;
a score that differs by more than `--score-tolerance` is a score mismatch
(the batch shape changes float summation order, so scores may differ by
float noise). Mismatches and errors make the exit status 1.

Before timing, each server answers every distinct request once and one
untimed round of the largest client count runs (XLA compiles one program per
batch and source bucket), so the table shows the steady rate. Prints the
machine line (with the load average: the machine may be shared) and writes
JSON with the command, the machine and the table to `--output`.

The model is `--model` (a SavedModel with serving signatures, or a training
run directory) or, by default, the tiny preset trained for 1 epoch on 300
pairs and exported (about 1-2 minutes). Not run by CI.

The requests are sentences in the model's own source language: the lines of
`--sources FILE`, else the validation sources of `--corpus NAME`, else those
of the corpus a run directory was trained on (its config.json), with a few
blank and long ones. A SavedModel does not record its corpus: name one.

Example:

    python benchmarks/serve_http_load.py --clients 1,4,16 --requests 50
    python benchmarks/serve_http_load.py --model saved_models/chatbot-ko-export --corpus chatbot-ko --signature greedy
    python benchmarks/serve_http_load.py --model saved_models/multi30k-en-de   # English validation sources
"""

import argparse
import http.client
import json
import os
import pathlib
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from machine import describe_machine, machine_line  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_OUTPUT = REPO / "benchmarks" / "results" / "serving" / "http_load.json"


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a SavedModel or a run directory (default: train the tiny preset)")
    parser.add_argument("--clients", default="1,4,16", help="concurrent client counts, comma-separated")
    parser.add_argument("--requests", type=int, default=50, help="requests per client")
    parser.add_argument("--signature", default="serving_default")
    parser.add_argument("--max-batch-size", type=int, default=32)
    parser.add_argument("--batch-timeout-ms", type=float, default=5.0)
    parser.add_argument("--threads", type=int, default=2, help="the server's --threads (batches decoded at once)")
    parser.add_argument("--score-tolerance", type=float, default=1e-4)
    parser.add_argument("--sources", type=pathlib.Path, help="source sentences to send, one a line")
    parser.add_argument("--corpus", help="send this corpus's validation sources (default: the run's corpus)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=pathlib.Path, default=DEFAULT_OUTPUT)
    return parser.parse_args()


def saved_model(args, workdir):
    """(path of a SavedModel or run directory, description, the corpus it translates from or None)."""
    if args.model:
        return pathlib.Path(args.model), args.model, run_corpus(pathlib.Path(args.model))
    from keras_transformer.training import train

    started = time.perf_counter()
    train("tiny", output=workdir / "run", epochs=1, max_examples=300, verbose=0)
    from keras_transformer.engines.xla.export import export_run

    export_run(workdir / "run", workdir / "export")
    seconds = time.perf_counter() - started
    description = f"tiny preset, 1 epoch on 300 pairs ({seconds:.0f} s to train and export)"
    return workdir / "export", description, "chatbot-ko"


def run_corpus(path):
    """The built-in corpus the run directory `path` was trained on; None for a SavedModel or the user's files."""
    from keras_transformer import runs
    from keras_transformer.datasets import CORPORA

    if not runs.is_run_dir(path):
        return None
    preset = runs.RunConfig.read(path).preset
    corpus = preset.data.corpus if preset is not None else None
    return corpus if corpus in CORPORA else None


def sentences(args, corpus, count=60):
    """`count` source sentences in the model's language (see the module docstring), with blank and long ones."""
    if args.sources is not None:
        pool = [line.strip() for line in args.sources.read_text(encoding="utf-8").splitlines() if line.strip()]
        origin = str(args.sources)
    else:
        corpus = args.corpus or corpus
        if corpus is None:
            raise SystemExit("name the model's source sentences: --sources FILE or --corpus NAME")
        from keras_transformer.datasets import load_split_pairs

        pool, origin = [source for source, _ in load_split_pairs(corpus)["validation"]], f"{corpus} validation"
    rng = random.Random(args.seed)
    picked = rng.sample(pool, min(count, len(pool)))
    return picked + ["", " ", " ".join(rng.sample(pool, min(6, len(pool))))], origin


class Server:
    """`keras-transformer serve` in a subprocess; `predict_url` once it listens."""

    def __init__(self, model, flags):
        command = [sys.executable, "-m", "keras_transformer.commands.cli", "serve", "--model", str(model)]
        command += ["--port", "0", "--name", "bench", *flags]
        env = dict(os.environ, PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="3")
        self.process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
        for line in self.process.stderr:
            found = re.search(r"at (http://127\.0\.0\.1:\d+)/", line)
            if found:
                self.predict_url = f"{found[1]}/v1/models/bench:predict"
                return
        raise RuntimeError(f"the server did not start (exit {self.process.wait()})")

    def stop(self):
        """The exit status, after SIGTERM; prints the server's last line (sentences per signature call)."""
        self.process.send_signal(signal.SIGTERM)
        status = self.process.wait(120)
        lines = [line.strip() for line in self.process.stderr.read().splitlines() if line.startswith("Stopped")]
        self.summary = lines[-1] if lines else ""
        return status


class Client:
    """One kept-alive HTTP/1.1 connection (the standard library's: lighter than httpx on a busy machine)."""

    def __init__(self, url):
        parts = urllib.parse.urlsplit(url)
        self.connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=300)
        self.path = parts.path

    def predict(self, signature, sentence):
        body = json.dumps({"signature_name": signature, "instances": [sentence]}).encode()
        self.connection.request("POST", self.path, body=body, headers={"Content-Type": "application/json"})
        response = self.connection.getresponse()
        answer = response.read()
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}: {answer[:200]!r}")
        return json.loads(answer)["predictions"][0]

    def close(self):
        self.connection.close()


def drive(url, signature, plans):
    """(seconds, latencies, answers) of one client thread per plan, all at once."""
    barrier, lock = threading.Barrier(len(plans)), threading.Lock()
    latencies, answers = [], []

    def client(plan):
        connection = Client(url)
        barrier.wait()
        for sentence in plan:
            start = time.perf_counter()
            try:
                answer = connection.predict(signature, sentence)
            except Exception as error:  # noqa: BLE001  (counted and reported)
                answer = error
            elapsed = time.perf_counter() - start
            with lock:
                latencies.append(elapsed)
                answers.append((sentence, answer))
        connection.close()

    workers = [threading.Thread(target=client, args=(plan,)) for plan in plans]
    start = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return time.perf_counter() - start, latencies, answers


def compare(answers, reference, tolerance):
    """(translation mismatches, score mismatches, errors, largest score difference)."""
    mismatches = score_mismatches = errors = 0
    largest = 0.0
    for sentence, answer in answers:
        if isinstance(answer, Exception):
            errors += 1
            continue
        expected = reference[sentence]
        mismatches += answer["translations"] != expected["translations"]
        difference = abs(answer["scores"] - expected["scores"])
        largest = max(largest, difference)
        score_mismatches += difference > tolerance
    return mismatches, score_mismatches, errors, largest


def measure(args, model, batching, texts, reference):
    flags = ["--max-batch-size", str(args.max_batch_size), "--batch-timeout-ms", str(args.batch_timeout_ms)]
    flags += ["--threads", str(args.threads), "--max-queue", "4096"] + ([] if batching else ["--no-batching"])
    server = Server(model, flags)
    rows = []
    try:
        connection = Client(server.predict_url)
        for sentence in texts:  # every source bucket once, alone
            reference.setdefault(sentence, connection.predict(args.signature, sentence))
        connection.close()
        counts = [int(n) for n in args.clients.split(",")]
        rng = random.Random(args.seed)
        drive(server.predict_url, args.signature, [rng.choices(texts, k=10) for _ in range(max(counts))])  # warm-up
        for clients in counts:
            plans = [rng.choices(texts, k=args.requests) for _ in range(clients)]
            seconds, latencies, answers = drive(server.predict_url, args.signature, plans)
            mismatches, score_mismatches, errors, largest = compare(answers, reference, args.score_tolerance)
            q = statistics.quantiles(latencies, n=100)
            rows.append(
                {
                    "batching": batching,
                    "clients": clients,
                    "requests": len(answers),
                    "seconds": round(seconds, 3),
                    "requests_per_s": round(len(answers) / seconds, 2),
                    "p50_ms": round(1000 * statistics.median(latencies), 1),
                    "p95_ms": round(1000 * q[94], 1),
                    "p99_ms": round(1000 * q[98], 1),
                    "mismatches": mismatches,
                    "score_mismatches": score_mismatches,
                    "largest_score_difference": largest,
                    "errors": errors,
                }
            )
            print(table_row(rows[-1]), flush=True)
    finally:
        status = server.stop()
    print(f"  server ({'batching' if batching else 'no batching'}): {server.summary}", flush=True)
    for row in rows:
        row["server_summary"] = server.summary
    if status != 0:
        raise RuntimeError(f"the server exited with status {status} after SIGTERM")
    return rows


def table_row(row):
    return (
        f"| {'on' if row['batching'] else 'off (batch of 1)'} | {row['clients']} | {row['requests']} "
        f"| {row['requests_per_s']:.1f} | {row['p50_ms']:.0f} | {row['p95_ms']:.0f} | {row['p99_ms']:.0f} "
        f"| {row['mismatches']} | {row['score_mismatches']} | {row['errors']} |"
    )


def goal(rows):
    """The issue's goal at the largest client count: >= 3x the requests/s, p95 <= 2x one client's latency."""
    most = max(row["clients"] for row in rows)
    on = next(r for r in rows if r["batching"] and r["clients"] == most)
    off = next(r for r in rows if not r["batching"] and r["clients"] == most)
    single = next(r for r in rows if not r["batching"] and r["clients"] == 1)
    return {
        "clients": most,
        "speedup": round(on["requests_per_s"] / off["requests_per_s"], 2),
        "p95_over_single_client_p50": round(on["p95_ms"] / single["p50_ms"], 2),
        "p95_over_single_client_p95": round(on["p95_ms"] / single["p95_ms"], 2),
    }


def main():
    args = parse_args()
    info = describe_machine()
    print(machine_line(info))
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="serve-http-load-"))
    try:
        model, description, corpus = saved_model(args, workdir)
        texts, origin = sentences(args, corpus)
        print(f"model: {description} | signature {args.signature} | {len(texts)} distinct sentences from {origin}")
        print(
            "| batching | clients | requests | requests/s | p50 ms | p95 ms | p99 ms | mismatches "
            "| score mismatches | errors |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|")
        reference = {}
        rows = measure(args, model, False, texts, reference) + measure(args, model, True, texts, reference)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    summary = goal(rows)
    print(
        f"goal at {summary['clients']} clients: batching {summary['speedup']}x the requests/s of batch-of-one "
        f"(goal >= 3); p95 {summary['p95_over_single_client_p50']}x one client's p50 latency and "
        f"{summary['p95_over_single_client_p95']}x its p95 (goal <= 2)"
    )
    report = {
        "command": " ".join(["python", *sys.argv]),
        "machine": info,
        "machine_line": machine_line(info),
        "load_average_1min_after": round(os.getloadavg()[0], 2),
        "model": description,
        "sentences": origin,
        "signature": args.signature,
        "settings": {k: v for k, v in vars(args).items() if k not in ("output", "model")},
        "rows": rows,
        "goal": summary,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.output}")
    return 1 if any(r["mismatches"] or r["errors"] for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
