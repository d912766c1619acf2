"""Dynamic batching: concurrent requests with the same key are decoded in one call.

As TF Serving's `--enable_batching`: a job waits up to `timeout_ms` after it
arrived for other jobs of the same key (signature and scalar inputs), or
until `max_batch_size` instances are gathered; a worker thread then runs them
as one batch and splits the outputs back per job. Unlike TF Serving, a job
that arrives while no batch is being decoded runs at once (unless
`always_wait`): waiting helps only under load, when jobs arrive while the
workers are busy, and at low load it would only add `timeout_ms` of latency. A job is only ever batched
with jobs of the same key, and a job that was rejected while parsing never
gets here, so one bad request cannot affect another.

The queue is bounded: `submit` raises `QueueFull` once `max_queue` jobs are
waiting. `close()` lets the workers finish every queued job, then stops them.

Example:

>>> def run(key, inputs):                # inputs: {name: list}; returns {name: array} of the same length
...     return {"lengths": np.array([len(s) for s in inputs["sentences"]])}
>>> batcher = DynamicBatcher(run, max_batch_size=8, timeout_ms=2)
>>> batcher.submit("k", {"sentences": ["ab", "c"]}).result()["lengths"].tolist()
[2, 1]
>>> batcher.close()
"""

import collections
import concurrent.futures
import dataclasses
import threading
import time

import numpy as np


class QueueFull(RuntimeError):
    """The batcher's queue holds `max_queue` jobs already: try again later."""


@dataclasses.dataclass
class _Job:
    key: object
    inputs: dict  # name -> list, every list of length `size`
    size: int
    future: concurrent.futures.Future
    arrived: float


class DynamicBatcher:
    """Gathers jobs of the same key into batches and runs them on worker threads.

    Args:
        run_batch: `run_batch(key, inputs)` -> dict of arrays whose first axis matches the inputs'.
        max_batch_size: instances per batch at most (a larger job runs alone).
        timeout_ms: how long the oldest job waits for others; 0 runs at once what is queued.
        max_queue: jobs waiting at most before `submit` raises `QueueFull`.
        num_threads: worker threads (batches run concurrently on them).
        enabled: False runs every job alone (batch-of-one, as without `--enable_batching`).
        always_wait: wait `timeout_ms` for other jobs also while no batch is being decoded (as TF Serving).
    """

    def __init__(
        self,
        run_batch,
        max_batch_size=32,
        timeout_ms=5.0,
        max_queue=256,
        num_threads=1,
        enabled=True,
        always_wait=False,
    ):
        self.run_batch = run_batch
        self.max_batch_size = max_batch_size if enabled else 1
        self.timeout = timeout_ms / 1000.0 if enabled else 0.0
        self.max_queue = max_queue
        self.always_wait = always_wait
        self._busy = 0  # workers decoding a batch now
        self.batch_sizes = collections.Counter()  # instances per batch -> batches run (for tests and logs)
        self._pending = collections.deque()
        self._condition = threading.Condition()
        self._closing = False
        self._workers = [
            threading.Thread(target=self._work, name=f"batcher-{i}", daemon=True) for i in range(num_threads)
        ]
        for worker in self._workers:
            worker.start()

    def submit(self, key, inputs):
        """A `Future` of the job's outputs (a dict of arrays, its own rows only)."""
        size = len(next(iter(inputs.values())))
        job = _Job(key, inputs, size, concurrent.futures.Future(), time.monotonic())
        with self._condition:
            if self._closing:
                raise QueueFull("the server is shutting down")
            if len(self._pending) >= self.max_queue:
                raise QueueFull(f"the queue holds {self.max_queue} requests already")
            self._pending.append(job)
            self._condition.notify_all()
        return job.future

    def close(self):
        """Run every queued job, then stop the workers."""
        with self._condition:
            self._closing = True
            self._condition.notify_all()
        for worker in self._workers:
            worker.join()

    def _work(self):
        while True:
            jobs = self._next_batch()
            if jobs is None:
                return
            try:
                self._run(jobs)
            finally:
                with self._condition:
                    self._busy -= 1
                    self._condition.notify_all()

    def _next_batch(self):
        """The next batch's jobs (removed from the queue), or None once closing with nothing queued."""
        with self._condition:
            while True:
                self._drop_cancelled()
                if not self._pending:
                    if self._closing:
                        return None
                    self._condition.wait()
                    continue
                first = self._pending[0]
                same = [job for job in self._pending if job.key == first.key]
                waited = time.monotonic() - first.arrived
                idle = self._busy == 0 and not self.always_wait
                full = sum(job.size for job in same) >= self.max_batch_size
                if full or idle or waited >= self.timeout or self._closing:
                    return self._take(same)
                self._condition.wait(self.timeout - waited)

    def _drop_cancelled(self):
        for job in [job for job in self._pending if job.future.cancelled()]:
            self._pending.remove(job)

    def _take(self, same):
        jobs, total = [], 0
        for job in same:
            if jobs and total + job.size > self.max_batch_size:
                break
            jobs.append(job)
            total += job.size
        for job in jobs:
            self._pending.remove(job)
        self._busy += 1
        return [job for job in jobs if job.future.set_running_or_notify_cancel()]

    def _run(self, jobs):
        if not jobs:
            return
        names = list(jobs[0].inputs)
        inputs = {name: [value for job in jobs for value in job.inputs[name]] for name in names}
        self.batch_sizes[len(inputs[names[0]])] += 1
        try:
            outputs = self.run_batch(jobs[0].key, inputs)
        except Exception as error:  # noqa: BLE001  (handed to every job of the batch)
            for job in jobs:
                job.future.set_exception(error)
            return
        start = 0
        for job in jobs:
            job.future.set_result(
                {name: np.asarray(value)[start : start + job.size] for name, value in outputs.items()}
            )
            start += job.size
