"""Load: a loaded SavedModel `Translator` serves concurrent requests exactly as it serves one at a time.

4 threads send single-sentence requests of mixed lengths (empty, whitespace
only, short, around the 16-token source bucket, at and far beyond the
model's 32-token limit, non-Korean text) to one `tf.saved_model.load`ed
module, alternating beam search and greedy. Every output must equal the
output of the same request sent alone, from one thread, and no request may
fail. The module is loaded fresh for the concurrent phase, so the threads
also race through the first (XLA-compiling) calls of each shape.

4 x 200 requests take about 30 s on 2 busy CPU cores (the cold phase's XLA
compiles included), so they run by default; the module's fixture (train 1
epoch, export, translate each input alone) takes 1-2 minutes more.
`benchmarks/serve_load.py` measures requests/s more thoroughly.
"""

import random
import threading
import time

import pytest
import tensorflow as tf

from trained_runs import trained_export  # noqa: F401  (also imported from here)

THREADS = 4
REQUESTS_PER_THREAD = 200
MAX_LENGTH = 32  # the tiny preset's max_length: longer sources are truncated


def mixed_inputs():
    """About 40 distinct requests: corpus questions of every length, blanks, over-long, odd text."""
    from keras_transformer.datasets import load_split_pairs

    questions = [q for q, _ in load_split_pairs("chatbot-ko")["validation"]]
    rng = random.Random(0)
    short = rng.sample(questions, 16)
    inputs = ["", " ", "   \t ", "\n", "\u3000"]  # empty and whitespace only (ideographic space too)
    inputs += short
    inputs += [" " + short[0] + "  ", short[1] + "\t"]  # padded with whitespace
    for words in (4, 8, 12, 20, 40, 200):  # across the 16-token bucket, up to far over 32 tokens
        inputs.append(" ".join(rng.choice(questions) for _ in range(words)))
    inputs += ["A dog runs in the park.", "😀 🎉 ??? !!!", "1234567890 " * 5, "ㅋ" * 300, "x"]
    return list(dict.fromkeys(inputs))


@pytest.fixture(scope="module")
def served():
    """(SavedModel path, inputs, {(method, input): output} computed alone, from one thread)."""
    from keras_transformer.export import load

    _, export = trained_export()
    inputs = mixed_inputs()
    translator = load(export)
    lengths = translator.source_lengths(tf.constant(inputs)).numpy()
    assert min(lengths) == 0 and max(lengths) > 3 * MAX_LENGTH  # blanks and over-long inputs present
    assert any(16 < n <= MAX_LENGTH for n in lengths) and any(0 < n <= 16 for n in lengths)
    reference = {}
    for text in inputs:
        for method in ("beam", "greedy"):
            reference[method, text] = _translate(translator, method, text)
    for text in inputs:
        if not text.strip():
            assert reference["beam", text] == reference["greedy", text] == ""
    return export, inputs, reference


def _translate(translator, method, text):
    fn = translator if method == "beam" else translator.greedy
    outputs = fn(tf.constant([text])).numpy()
    assert outputs.shape == (1,)
    return outputs[0].decode("utf-8")


def _serve(translator, requests_per_thread, inputs, seed=0):
    """Runs the threads; returns (list of (method, input, output), list of errors, seconds)."""
    rng = random.Random(seed)
    plans = [
        [(("beam", "greedy")[(t + i) % 2], rng.choice(inputs)) for i in range(requests_per_thread)]
        for t in range(THREADS)
    ]
    results, errors = [[] for _ in range(THREADS)], []
    barrier = threading.Barrier(THREADS)

    def worker(index):
        barrier.wait()
        for method, text in plans[index]:
            try:
                results[index].append((method, text, _translate(translator, method, text)))
            except Exception as error:  # noqa: BLE001  (every failure is counted and reported)
                errors.append(f"thread {index}, {method} {text[:30]!r}: {type(error).__name__}: {error}")

    threads = [threading.Thread(target=worker, args=(t,), name=f"client-{t}") for t in range(THREADS)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    seconds = time.perf_counter() - start
    assert not any(thread.is_alive() for thread in threads), "a client thread hung"
    return [r for rs in results for r in rs], errors, seconds


@pytest.mark.slow  # test_serving_model's 16 concurrent clients check the same
def test_concurrent_requests_match_single_threaded(served):
    from keras_transformer.export import load

    export, inputs, reference = served
    translator = load(export)  # a fresh module: the threads also race through its first calls
    results, errors, seconds = _serve(translator, REQUESTS_PER_THREAD, inputs)
    assert errors == []
    assert len(results) == THREADS * REQUESTS_PER_THREAD
    mismatches = [(m, t[:30], out[:30], reference[m, t][:30]) for m, t, out in results if out != reference[m, t]]
    assert mismatches == []
    print(
        f"\n{THREADS} threads x {REQUESTS_PER_THREAD} requests: {len(results) / seconds:.1f} requests/s "
        f"({seconds:.1f} s, first calls' XLA compiles included) on {len(inputs)} distinct inputs"
    )

    # Warm now: the steady rate.
    results, errors, seconds = _serve(translator, REQUESTS_PER_THREAD, inputs, seed=1)
    assert errors == [] and all(out == reference[m, t] for m, t, out in results)
    print(f"{THREADS} threads x {REQUESTS_PER_THREAD} requests, warm: {len(results) / seconds:.1f} requests/s")
