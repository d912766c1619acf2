"""`DynamicBatcher`: concurrent jobs of the same key run as one batch, split back exactly; others never mix."""

import threading
import time

import numpy as np
import pytest

from keras_transformer.serving.batching import DynamicBatcher, QueueFull


def lengths(key, inputs):
    if "boom" in inputs["s"]:
        raise ValueError("boom")
    return {"length": np.array([len(s) for s in inputs["s"]]), "key": np.array([key] * len(inputs["s"]))}


def submit_together(batcher, jobs):
    """Submit `jobs` [(key, strings)] from one thread each, at once; their results in order."""
    barrier, results = threading.Barrier(len(jobs)), [None] * len(jobs)

    def send(index, key, strings):
        barrier.wait()
        try:
            results[index] = batcher.submit(key, {"s": strings}).result(10)
        except Exception as error:  # noqa: BLE001
            results[index] = error

    threads = [threading.Thread(target=send, args=(i, *job)) for i, job in enumerate(jobs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def test_concurrent_jobs_are_one_batch_split_back_per_job():
    batcher = DynamicBatcher(lengths, max_batch_size=16, timeout_ms=5000, always_wait=True)  # runs once 16 are in
    jobs = [("k", ["x" * i, "y" * (i + 1)]) for i in range(8)]
    results = submit_together(batcher, jobs)
    batcher.close()
    for (_, strings), result in zip(jobs, results):
        assert result["length"].tolist() == [len(s) for s in strings]
    assert batcher.batch_sizes == {16: 1}


def test_keys_never_share_a_batch_and_max_batch_size_holds():
    batcher = DynamicBatcher(lengths, max_batch_size=4, timeout_ms=100, always_wait=True)
    jobs = [("a", ["1"]), ("b", ["22"])] * 4
    results = submit_together(batcher, jobs)
    batcher.close()
    assert [r["key"].tolist() for r in results] == [[key] for key, _ in jobs]
    assert max(batcher.batch_sizes) <= 4 and sum(n * c for n, c in batcher.batch_sizes.items()) == 8


def test_batching_off_runs_each_job_alone():
    batcher = DynamicBatcher(lengths, max_batch_size=64, timeout_ms=100, enabled=False)
    submit_together(batcher, [("k", ["a", "b"])] * 5)
    batcher.close()
    assert batcher.batch_sizes == {2: 5}


def test_a_failing_batch_fails_only_its_jobs():
    batcher = DynamicBatcher(lengths, timeout_ms=100)
    results = submit_together(batcher, [("bad", ["boom"]), ("good", ["ok"])])
    batcher.close()
    assert isinstance(results[0], ValueError) and results[1]["length"].tolist() == [2]


def test_full_queue_and_close_answer_what_was_queued():
    batcher = DynamicBatcher(lengths, timeout_ms=300, max_queue=2, always_wait=True)
    futures = [batcher.submit("k", {"s": ["a"]}) for _ in range(2)]
    with pytest.raises(QueueFull, match="holds 2"):
        batcher.submit("k", {"s": ["b"]})
    started = time.monotonic()
    batcher.close()  # runs the queued jobs at once, without waiting out the timeout
    assert time.monotonic() - started < 0.25
    assert [f.result(0)["length"].tolist() for f in futures] == [[1], [1]]
    with pytest.raises(QueueFull, match="shutting down"):
        batcher.submit("k", {"s": ["c"]})


def test_an_idle_batcher_runs_a_job_at_once_and_gathers_while_busy():
    release = threading.Event()

    def slow_lengths(key, inputs):
        release.wait(5)
        return lengths(key, inputs)

    batcher = DynamicBatcher(slow_lengths, timeout_ms=10_000)
    started = time.monotonic()
    first = batcher.submit("k", {"s": ["a"]})  # idle: runs at once, then blocks in slow_lengths
    time.sleep(0.2)
    later = [batcher.submit("k", {"s": ["bb"]}) for _ in range(3)]  # queued while the worker is busy
    release.set()
    assert first.result(5)["length"].tolist() == [1]
    assert [f.result(5)["length"].tolist() for f in later] == [[2]] * 3
    batcher.close()
    assert time.monotonic() - started < 5  # nobody waited out the 10 s timeout
    assert batcher.batch_sizes == {1: 1, 3: 1}
