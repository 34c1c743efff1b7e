"""A batch of samples through the Lean workers, for `StrictVerifier.verify_stream`.

Samples with the same code for the same statement share one Lean run (the others get copies
pointing at it); what the verdict cache holds is copied, never run; the rest go to the workers
as they come, in a growing stream. A `timeout` is run once more when the pool is otherwise idle
(at most `recheck_share` of the workers busy), and its verdict records both attempts. How long
each run held a worker goes to the cost history, which orders later batches.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from prover_assets.records import (
    Generation,
    Problem,
    SampleKey,
    Stage,
    Verification,
    code_sha256,
)
from prover_assets.records.models import AttemptOutcome, TimeoutRecheck
from prover_assets.verify.cache import cache_key, copy_for
from prover_assets.verify.pool import JobQueue
from prover_assets.verify.worker import LeanJob, LeanResult

if TYPE_CHECKING:  # the verifier makes a stream of itself; the stream only calls it
    from prover_assets.verify.verifier import StrictVerifier

__all__ = ["JudgedSample", "VerdictStream"]


@dataclass(frozen=True)
class JudgedSample:
    """What a verdict needs of its sample once the job is made: the key and the code. A queued
    run keeps this, not the generation, whose token ids (up to the cap, twice) would otherwise
    stay in memory for every sample waiting for Lean."""

    problem_id: str
    sample_idx: int
    round: int
    cap_tokens: int
    lean_code: str | None

    @classmethod
    def of(cls, generation: Generation) -> JudgedSample:
        return cls(
            generation.problem_id,
            generation.sample_idx,
            generation.round,
            generation.cap_tokens,
            generation.lean_code,
        )

    @property
    def key(self) -> SampleKey:
        return SampleKey(self.problem_id, self.sample_idx, self.round, self.cap_tokens)


@dataclass
class _Run:
    """One Lean run of a batch: its cache key, the trusted statement, the job, and the samples
    (same code, same statement) it judges, the first one measured."""

    key: str
    statement: str
    job: LeanJob
    samples: list[JudgedSample]


@dataclass
class _Batch:
    """The runs of one `verify_stream`, shared by the thread that admits samples and the one
    that settles verdicts: by cache key (queued or running, and settled) and by job key."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    runs: dict[str, _Run] = field(default_factory=dict)
    running: dict[tuple, _Run] = field(default_factory=dict)
    settled: dict[str, Verification] = field(default_factory=dict)
    pushed: int = 0  # Lean jobs fed, re-checks included: each answers once unless dropped


def _with_both_attempts(before: Verification, after: Verification) -> Verification:
    """The re-check's verdict, recording the timeout before it."""
    recheck = TimeoutRecheck(
        first=AttemptOutcome(stage=before.stage, verify_s=before.verify_s),
        second=AttemptOutcome(stage=after.stage, verify_s=after.verify_s),
    )
    diagnostics = after.diagnostics.model_copy(update={"timeout_recheck": recheck})
    return after.model_copy(update={"diagnostics": diagnostics})


_LEAN_DONE = object()
_FED = object()


class VerdictStream:
    """One batch of one verifier: its runs by cache key and job key, shared by the thread that
    admits samples and the one that settles verdicts."""

    def __init__(self, verifier: StrictVerifier) -> None:
        self.verifier = verifier

    def verdicts(
        self,
        pairs: Iterable[tuple[Problem, Generation]],
        *,
        stop: threading.Event | None = None,
    ) -> Iterator[Verification]:
        """Verdicts for every pair as each is ready: those needing no Lean (or found in the
        cache) at once, Lean's as they finish. `pairs` may be a growing stream: its pairs go to
        the workers as they come. A timeout is re-checked once the pool is otherwise idle (at
        most `recheck_share` of the workers busy), its verdict holding both attempts. Once
        `stop` is set and `pairs` ends, the runs still waiting are dropped (no verdict: a later
        run verifies them), those running finish, and no timeout waits for its re-check."""
        batch = _Batch()
        busy = max(1, int(self.verifier.backend.workers * self.verifier.policy.recheck_share))
        feed = JobQueue(defer_while_running=busy)
        channel: queue.Queue[object] = queue.Queue()

        def produce() -> None:
            try:
                for problem, generation in pairs:
                    for verdict in self._admit(problem, generation, batch, feed):
                        channel.put(verdict)
            except BaseException as exc:  # surfaces in the consumer, never lost in a thread
                channel.put(exc)
            finally:
                channel.put(_FED)

        def consume() -> None:
            try:
                for result in self.verifier.backend.run(feed):
                    channel.put(result)
            except BaseException as exc:
                channel.put(exc)
            finally:
                channel.put(_LEAN_DONE)

        producer = threading.Thread(target=produce, name="verifier-feed", daemon=True)
        runner = threading.Thread(target=consume, name="verifier-lean", daemon=True)
        producer.start()
        runner.start()
        try:
            yield from self._collect(channel, feed, batch, stop)
        finally:
            # Jobs still waiting are dropped, running ones finish; a producer still reading a
            # stream stops at its next sample (the feed refuses it).
            feed.cancel()
            runner.join()

    def _collect(
        self,
        channel: queue.Queue[object],
        feed: JobQueue,
        batch: _Batch,
        stop: threading.Event | None,
    ) -> Iterator[Verification]:
        """The verdicts of one `verify_stream`: the producer's, and Lean's results judged; the
        feed is closed once everything fed has an answer (re-checks included)."""
        fed = False
        received = 0
        first_attempts: dict[tuple, Verification] = {}
        while (item := channel.get()) is not _LEAN_DONE:
            if isinstance(item, BaseException):
                raise item
            if item is _FED:
                fed = True
                if stop is not None and stop.is_set():
                    # The waiting runs are dropped (no verdict); the feed is closed, so the
                    # workers end after the running ones.
                    feed.cancel()
            elif isinstance(item, Verification):
                yield item
            else:
                assert isinstance(item, LeanResult)
                received += 1
                with batch.lock:
                    run = batch.running[item.key]
                verdict: Verification | None = self.verifier.judge(run.samples[0], run.job, item)
                assert verdict is not None
                self._measured(run, item)
                if item.key in first_attempts:
                    verdict = _with_both_attempts(first_attempts.pop(item.key), verdict)
                    self.verifier.timeouts_rechecked += 1
                elif verdict.stage is Stage.TIMEOUT and self.verifier.policy.recheck_timeouts:
                    if not (stop is not None and stop.is_set() and fed):
                        first_attempts[item.key] = verdict
                        with batch.lock:
                            batch.pushed += 1
                        feed.defer([run.job])
                    verdict = None  # final only after its re-check
                if verdict is not None:
                    yield from self._settled(run, verdict, batch)
            with batch.lock:
                answered = fed and received == batch.pushed
            if answered:
                feed.close()

    def _measured(self, run: _Run, result: LeanResult) -> None:
        """Record how long the run held a worker (a run that failed on the host measured
        nothing about the proof)."""
        timed_out = result.failure == "timeout"
        if result.failure is None or timed_out:
            self.verifier.history.record(
                run.statement,
                run.job.diagnostics["code_chars"],
                result.elapsed_s,
                timed_out=timed_out,
            )

    def _admit(
        self, problem: Problem, generation: Generation, batch: _Batch, feed: JobQueue
    ) -> list[Verification]:
        """Take one sample into the batch: its verdicts ready now (no Lean needed, a cached
        verdict, a copy of a settled duplicate), or none when its run is queued or joined."""
        prepared = self.verifier.prepare(problem, generation)
        if isinstance(prepared, Verification):
            return [prepared]
        statement = problem.formal_statement
        key = cache_key(self.verifier.info, statement, code_sha256(generation.lean_code))
        with batch.lock:
            if key in batch.settled:
                self.verifier.batch_duplicates += 1
                return [copy_for(batch.settled[key], generation.key, key, self.verifier.info)]
            if key in batch.runs:
                batch.runs[key].samples.append(JudgedSample.of(generation))
                self.verifier.batch_duplicates += 1
                return []
            hit = (
                self.verifier.cache.get(key, self.verifier.info, statement)
                if self.verifier.cache
                else None
            )
            if hit is not None:
                return [copy_for(hit, generation.key, key, self.verifier.info)]
            run = _Run(key, statement, prepared, [JudgedSample.of(generation)])
            batch.runs[key] = run
            batch.running[prepared.key] = run
            batch.pushed += 1
        self.verifier.ordered_by_history += self.verifier.history.knows(statement)
        feed.push([prepared])
        return []

    def _settled(self, run: _Run, verdict: Verification, batch: _Batch) -> Iterator[Verification]:
        """The verdict of the run's first sample, stored when final, and its copies for the
        samples that shared the run (a duplicate that comes later is copied on admission)."""
        if self.verifier.cache is not None:
            self.verifier.cache.put(run.key, verdict, run.statement)
        with batch.lock:
            del batch.runs[run.key]
            batch.settled[run.key] = verdict
            copies = run.samples[1:]
        yield verdict
        for generation in copies:
            yield copy_for(verdict, generation.key, run.key, self.verifier.info)
