"""The work-stealing pool's job queue: a queue that grows while the workers run, and stops."""

import threading
import time

import pytest

from prover_assets.verify.pool import JobQueue, WorkStealingPool, serve_jobs
from prover_assets.verify.worker import LeanJob, LeanResult


def job(index: int, priority: float = 0.0, header: str = "") -> LeanJob:
    return LeanJob(
        key=(index,), header=header, body="", theorem_name=None, budget_s=1.0, priority=priority
    )


def answered(job: LeanJob) -> LeanResult:
    return LeanResult(
        key=job.key, outcome=None, axioms=None, failure=None, elapsed_s=0.0, attempts=1, worker=0
    )


def test_jobs_pushed_while_the_pool_runs_are_all_served_once():
    feed = JobQueue([job(0)])

    def produce() -> None:
        for i in range(1, 20):
            time.sleep(0.005)
            feed.push([job(i)])
        feed.close()

    producer = threading.Thread(target=produce)
    producer.start()
    keys = [result.key for result in serve_jobs(feed, [answered, answered, answered])]
    producer.join()
    assert sorted(keys) == [(i,) for i in range(20)]


def test_one_worker_takes_waiting_jobs_highest_priority_first():
    feed = JobQueue([job(0, 1.0), job(1, 5.0), job(2, 3.0), job(3, 5.0)], closed=True)
    keys = [result.key for result in serve_jobs(feed, [answered])]
    assert keys == [(1,), (3,), (2,), (0,)]  # ties in the order they came


def test_a_worker_takes_jobs_of_a_header_it_holds_before_higher_priority_ones_of_another():
    jobs = [job(0, 9.0, "B"), job(1, 1.0, "A"), job(2, 5.0, "B"), job(3, 2.0, "A")]
    feed = JobQueue(jobs, closed=True)
    taken = [feed.take(held) for held in (("A",), ("A",), ("A",), ("C",))]
    # A's jobs by priority while A's wait, then the first of all; a header held by nobody: any.
    assert [j.key for j in taken if j is not None] == [(3,), (1,), (0,), (2,)]
    assert feed.take(("A",)) is None


def test_each_worker_of_a_pool_takes_its_own_headers_jobs_first():
    jobs = [job(i, float(i), "AB"[i % 2]) for i in range(8)]
    feed = JobQueue(jobs, closed=True)
    order: dict[str, list[str]] = {"A": [], "B": []}

    def taker(header: str):
        def handle(job: LeanJob) -> LeanResult:
            order[header].append(job.header)
            return answered(job)

        return handle

    list(serve_jobs(feed, [taker("A"), taker("B")], held=[lambda: ("A",), lambda: ("B",)]))
    # Each takes its own header's four jobs; another's only once its own are gone.
    assert all(
        taken[: taken.count(h)] == [h] * taken.count(h) for h, taken in order.items() if taken
    )
    assert sorted(order["A"] + order["B"]) == ["A"] * 4 + ["B"] * 4


def test_cancel_drops_the_waiting_jobs_and_lets_the_running_one_finish():
    started, release = threading.Event(), threading.Event()

    def slow(job: LeanJob) -> LeanResult:
        started.set()
        release.wait(5)
        return answered(job)

    feed = JobQueue([job(0, 9.0), job(1), job(2)])
    results = serve_jobs(feed, [slow])
    collected: list[tuple] = []
    consumer = threading.Thread(target=lambda: collected.extend(r.key for r in results))
    consumer.start()
    assert started.wait(5)
    dropped = feed.cancel()
    release.set()
    consumer.join(5)
    assert not consumer.is_alive()  # a cancelled queue lets every worker stop
    assert [d.key for d in dropped] == [(1,), (2,)]
    assert collected == [(0,)]


def test_a_closed_queue_refuses_more_jobs():
    feed = JobQueue(closed=True)
    with pytest.raises(RuntimeError, match=r"^a closed job queue takes no more jobs$"):
        feed.push([job(0)])
    with pytest.raises(RuntimeError, match=r"^a closed job queue takes no more jobs$"):
        feed.defer([job(1)])


def test_a_plain_list_of_jobs_is_served_whole():
    keys = [result.key for result in serve_jobs([job(i) for i in range(5)], [answered] * 2)]
    assert sorted(keys) == [(i,) for i in range(5)]


def timed(log: list, lock: threading.Lock, seconds: float):
    def handle(job: LeanJob) -> LeanResult:
        with lock:
            log.append(("start", job.key, time.monotonic()))
        time.sleep(seconds)
        with lock:
            log.append(("end", job.key, time.monotonic()))
        return answered(job)

    return handle


def test_a_deferred_job_waits_until_no_job_waits_and_the_pool_is_otherwise_idle():
    log: list = []
    lock = threading.Lock()
    feed = JobQueue()  # by default a deferred job starts only while no other job runs
    feed.defer([job(9, priority=100.0)])  # deferred first, and with the highest priority
    feed.push([job(0), job(1), job(2)])
    feed.close()
    list(serve_jobs(feed, [timed(log, lock, 0.05)] * 2))
    starts = {key: t for kind, key, t in log if kind == "start"}
    ends = {key: t for kind, key, t in log if kind == "end"}
    assert starts[(9,)] >= max(ends[(0,)], ends[(1,)], ends[(2,)])


def test_a_deferred_job_may_start_beside_fewer_than_its_limit_of_running_jobs():
    log: list = []
    lock = threading.Lock()
    feed = JobQueue(defer_while_running=2)
    feed.push([job(0)])
    feed.defer([job(9)])
    feed.close()
    list(serve_jobs(feed, [timed(log, lock, 0.2)] * 3))
    starts = {key: t for kind, key, t in log if kind == "start"}
    ends = {key: t for kind, key, t in log if kind == "end"}
    assert starts[(9,)] < ends[(0,)]  # one running, under the limit of two: it starts at once


def test_a_deferred_job_does_not_start_beside_as_many_running_jobs_as_its_limit():
    log: list = []
    lock = threading.Lock()
    feed = JobQueue(defer_while_running=2)
    feed.push([job(0), job(1)])
    feed.defer([job(9)])
    feed.close()
    list(serve_jobs(feed, [timed(log, lock, 0.2)] * 3))
    starts = {key: t for kind, key, t in log if kind == "start"}
    ends = {key: t for kind, key, t in log if kind == "end"}
    assert starts[(9,)] >= min(ends[(0,)], ends[(1,)])


def test_cancel_drops_deferred_jobs_too():
    feed = JobQueue([job(0)])
    feed.defer([job(1)])
    assert [d.key for d in feed.cancel()] == [(0,), (1,)]
    assert feed.take() is None


def test_a_pool_needs_a_worker():
    from prover_assets.verify.pool import WorkStealingPool

    with pytest.raises(ValueError, match=r"^a pool needs at least one worker$"):
        WorkStealingPool([], retries=1)


def test_a_worker_that_raises_surfaces_its_error_to_the_caller():
    def broken(job: LeanJob) -> LeanResult:
        raise KeyError("bug in a worker")

    feed = JobQueue([job(0), job(1)], closed=True)
    try:
        list(serve_jobs(feed, [broken]))
    except KeyError as exc:
        assert "bug in a worker" in str(exc)
    else:
        raise AssertionError("the worker's error was swallowed")


def test_a_worker_holding_no_waiting_header_takes_the_highest_priority_job_of_any():
    # Alphabetical order and arrival disagree with priority: only priority may decide.
    feed = JobQueue([job(0, 1.0, "A"), job(1, 9.0, "B"), job(2, 5.0, "C")], closed=True)
    assert [feed.take(("Z",)).key for _ in range(3)] == [(1,), (2,), (0,)]


class HeaderHolder:
    """A worker as the pool sees one: it holds one header and records what it ran."""

    def __init__(self, index: int, header: str, seconds: float) -> None:
        self.index, self.header, self.seconds, self.ran = index, header, seconds, []

    def held_headers(self) -> tuple[str, ...]:
        return (self.header,)

    def execute(self, job: LeanJob, retries: int) -> LeanResult:
        self.ran.append(job.header)
        time.sleep(self.seconds)
        return answered(job)


def test_the_pool_hands_each_worker_the_jobs_of_the_header_it_holds():
    # The fast worker runs out of its own header's jobs long before the slow one: only then
    # does it take the other's (in arrival order, it would have taken every second job).
    holders = [HeaderHolder(0, "A", 0.001), HeaderHolder(1, "B", 0.05)]
    jobs = [job(i, 0.0, "AB"[i % 2]) for i in range(8)]
    results = list(WorkStealingPool(holders, retries=0).run(jobs))  # type: ignore[arg-type]
    assert len(results) == 8
    for holder in holders:
        own = holder.ran.count(holder.header)
        assert holder.ran[:own] == [holder.header] * own
    assert holders[0].ran[:4] == ["A"] * 4
