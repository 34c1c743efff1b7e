"""A work-stealing pool of verification workers: no chunk barriers.

Jobs wait in one priority queue (likely-long proofs first); a free worker takes the next one
at once. Results stream out in completion order, so the caller commits while work continues.
"""

from __future__ import annotations

import heapq
import itertools
import queue
import threading
from collections.abc import Iterator, Sequence

from prover_assets.verify.worker import LeanJob, LeanResult, ReplWorker

__all__ = ["WorkStealingPool"]

_DONE = object()


class WorkStealingPool:
    """Workers that each take the next job as they free up, highest priority first."""

    def __init__(self, workers: Sequence[ReplWorker], *, retries: int) -> None:
        if not workers:
            raise ValueError("a pool needs at least one worker")
        self.workers = list(workers)
        self.retries = retries

    def run(
        self, jobs: Sequence[LeanJob], *, max_workers: int | None = None
    ) -> Iterator[LeanResult]:
        """Yield one result per job, as each finishes, on at most `max_workers` of the workers
        (all by default). Stopping early stops the workers after their current job."""
        order = itertools.count()
        pending = [(-job.priority, next(order), job) for job in jobs]
        heapq.heapify(pending)
        lock = threading.Lock()
        stop = threading.Event()
        results: queue.Queue[object] = queue.Queue()

        def work(worker: ReplWorker) -> None:
            try:
                while not stop.is_set():
                    with lock:
                        if not pending:
                            return
                        _, _, job = heapq.heappop(pending)
                    results.put(worker.execute(job, self.retries))
            except BaseException as exc:  # a bug in a worker must surface, not hang the pool
                results.put(exc)
            finally:
                results.put(_DONE)

        threads = [
            threading.Thread(target=work, args=(w,), name=f"lean-worker-{w.index}", daemon=True)
            for w in self.workers[: max_workers or len(self.workers)]
        ]
        for thread in threads:
            thread.start()
        running = len(threads)
        try:
            while running:
                item = results.get()
                if item is _DONE:
                    running -= 1
                elif isinstance(item, BaseException):
                    raise item
                else:
                    yield item  # type: ignore[misc]
        finally:
            stop.set()
            for thread in threads:
                thread.join()

    def close(self) -> None:
        for worker in self.workers:
            worker.close()

    def restarts(self) -> int:
        return sum(worker.restarts for worker in self.workers)

    def recycles(self) -> int:
        return sum(worker.recycles for worker in self.workers)
