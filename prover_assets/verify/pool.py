"""A work-stealing pool of verification workers: no chunk barriers.

Jobs wait in one priority queue (likely-long proofs first); a free worker takes the next one
at once. The queue may keep growing while the pool runs (verification that follows a growing
generation stream), and results stream out in completion order, so the caller commits while
work continues.
"""

from __future__ import annotations

import heapq
import itertools
import queue
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence

from prover_assets.verify.worker import LeanJob, LeanResult, ReplWorker, WarmSpare

__all__ = ["JobQueue", "WorkStealingPool", "serve_jobs"]

_DONE = object()
# Waiting jobs by header, each a heap of (-priority, arrival, job).
_Heaps = dict[str, list[tuple[float, int, LeanJob]]]


def _entries(heaps: _Heaps) -> list[tuple[float, int, LeanJob]]:
    return [entry for heap in heaps.values() for entry in heap]


def _pop(heaps: _Heaps, held: Collection[str]) -> LeanJob:
    """The first waiting job of a header in `held`, else the first of any header."""
    mine = [header for header in held if heaps.get(header)]
    candidates = mine or [header for header, heap in heaps.items() if heap]
    header = min(candidates, key=lambda h: heaps[h][0][:2])
    return heapq.heappop(heaps[header])[2]


class JobQueue:
    """Jobs waiting for a worker, highest priority first. Producers `push` (and `defer`) until
    `close`; a `cancel` drops what still waits (jobs already taken finish).

    A deferred job (a timeout's re-check) waits until no other job waits and fewer than
    `defer_while_running` jobs run: it fills the pool's tail on an otherwise idle host instead
    of queueing behind the batch or running beside a full one."""

    def __init__(
        self, jobs: Iterable[LeanJob] = (), *, closed: bool = False, defer_while_running: int = 1
    ) -> None:
        self._order = itertools.count()
        self._heap: _Heaps = {}
        self._deferred: _Heaps = {}
        self._running = 0
        self._defer_while_running = defer_while_running
        self._ready = threading.Condition()
        self._closed = False
        self.push(jobs)
        self._closed = closed

    def push(self, jobs: Iterable[LeanJob]) -> None:
        self._add(self._heap, jobs)

    def defer(self, jobs: Iterable[LeanJob]) -> None:
        self._add(self._deferred, jobs)

    def _add(self, heaps: _Heaps, jobs: Iterable[LeanJob]) -> None:
        with self._ready:
            if self._closed:
                raise RuntimeError("a closed job queue takes no more jobs")
            for job in jobs:
                entry = (-job.priority, next(self._order), job)
                heapq.heappush(heaps.setdefault(job.header, []), entry)
            self._ready.notify_all()

    def close(self) -> None:
        """No more jobs: workers stop once the queue is empty."""
        with self._ready:
            self._closed = True
            self._ready.notify_all()

    def cancel(self) -> list[LeanJob]:
        """Close, and drop every job not yet taken; returns them."""
        with self._ready:
            waiting = [*_entries(self._heap), *_entries(self._deferred)]
            dropped = [job for _, _, job in sorted(waiting)]
            self._heap.clear()
            self._deferred.clear()
            self._closed = True
            self._ready.notify_all()
            return dropped

    def take(self, held: Collection[str] = ()) -> LeanJob | None:
        """The next job, waiting for one while the queue is open; None once closed and empty.

        `held`: the headers the taker has imported. Its next job is the first of those headers
        while one waits, else the first of all: each header costs a worker one import (time,
        and gigabytes for Mathlib), so a worker takes another header only when its own are
        done."""
        with self._ready:
            while True:
                if any(self._heap.values()):
                    job = _pop(self._heap, held)
                    break
                if any(self._deferred.values()) and self._running < self._defer_while_running:
                    job = _pop(self._deferred, held)
                    break
                if self._closed and not any(self._deferred.values()):
                    return None
                self._ready.wait()
            self._running += 1
            return job

    def done(self) -> None:
        """A taken job finished: a deferred one may start."""
        with self._ready:
            self._running -= 1
            self._ready.notify_all()


def serve_jobs(
    jobs: Sequence[LeanJob] | JobQueue,
    handlers: Sequence[Callable[[LeanJob], LeanResult]],
    *,
    name: str = "lean-worker",
    held: Sequence[Callable[[], Collection[str]]] | None = None,
) -> Iterator[LeanResult]:
    """One thread per handler, each taking the next job as it frees up; results as each
    finishes. Stopping early drops the jobs still waiting and lets current ones finish.
    `held[i]`: the headers handler i has imported, which it takes first (`JobQueue.take`)."""
    feed = jobs if isinstance(jobs, JobQueue) else JobQueue(jobs, closed=True)
    results: queue.Queue[object] = queue.Queue()
    held_by = held or [tuple] * len(handlers)

    def work(handle: Callable[[LeanJob], LeanResult], holds: Callable[[], Collection[str]]) -> None:
        try:
            while (job := feed.take(holds())) is not None:
                try:
                    results.put(handle(job))
                finally:
                    feed.done()
        except BaseException as exc:  # a bug in a worker must surface, not hang the pool
            results.put(exc)
        finally:
            results.put(_DONE)

    threads = [
        threading.Thread(target=work, args=(handle, holds), name=f"{name}-{i}", daemon=True)
        for i, (handle, holds) in enumerate(zip(handlers, held_by, strict=True))
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
        feed.cancel()
        for thread in threads:
            thread.join()


class WorkStealingPool:
    """Workers that each take the next job as they free up, highest priority first."""

    def __init__(
        self, workers: Sequence[ReplWorker], *, retries: int, spare: WarmSpare | None = None
    ) -> None:
        if not workers:
            raise ValueError("a pool needs at least one worker")
        self.workers = list(workers)
        self.retries = retries
        self.spare = spare

    def run(self, jobs: Sequence[LeanJob] | JobQueue) -> Iterator[LeanResult]:
        """Yield one result per job, as each finishes; a `JobQueue` may grow while the pool
        runs."""
        handlers = [lambda job, w=worker: w.execute(job, self.retries) for worker in self.workers]
        return serve_jobs(jobs, handlers, held=[w.held_headers for w in self.workers])

    def warm(self, header: str) -> None:
        """Every worker starts its REPL and imports `header`, all at once."""
        threads = [threading.Thread(target=w.warm, args=(header,)) for w in self.workers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def close(self) -> None:
        if self.spare is not None:
            self.spare.close()
        for worker in self.workers:
            worker.close()

    def restarts(self) -> int:
        return sum(worker.restarts for worker in self.workers)

    def memory_report(self) -> dict[str, dict[str, float]]:
        """Each running worker's REPL: its largest process's address space, its resident memory."""
        reports = {f"worker-{w.index}": w.memory_report() for w in self.workers}
        return {worker: report for worker, report in reports.items() if report is not None}

    def header_imports(self) -> dict[str, int]:
        """Header imports so far, per worker (restarts included) and by the warm spare."""
        imports = {f"worker-{w.index}": w.header_imports for w in self.workers}
        return imports | ({"spare": self.spare.header_imports} if self.spare else {})

    def recycles(self) -> int:
        return sum(worker.recycles for worker in self.workers)
