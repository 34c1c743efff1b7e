"""Verifying a generations file into a verdicts file: resumable, chunked, pinned by hash.

- Resume by key: a verdict is kept only if its `code_sha256` matches the generation now on
  disk. A stale verdict raises, unless re-verifying stale verdicts is asked for: then the stale
  rows move to `stale_verdicts.jsonl` (kept for the record) and are verified again.
- Infrastructure is never final: on resume every `infrastructure` verdict moves to
  `infrastructure_attempts.jsonl` (one row per attempt, numbered) and its sample is verified
  again; the new verdict records how many attempts came before it.
- Verdicts stream to the store in commit chunks; a chunk in which more than half of the
  samples died for infrastructure reasons is not written, and the run fails (a validity
  condition of the registered design).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from prover_assets.records import (
    Appender,
    Generation,
    Problem,
    SampleKey,
    Stage,
    Verification,
    code_sha256,
    follow_records,
    iter_records,
    publish_records,
    read_records,
    whole_records,
)
from prover_assets.records.outputs import StageResult
from prover_assets.records.staleness import StaleVerdictError, orphans_and_stale_by_hash
from prover_assets.verify.verifier import StrictVerifier

__all__ = [
    "CHUNKS_FILE",
    "ChunkInfrastructureError",
    "CommitChunk",
    "StaleVerdictError",
    "VerificationResult",
    "VerifyStats",
    "chunk_died",
    "verify_generations",
]

log = logging.getLogger(__name__)

STALE_FILE = "stale_verdicts.jsonl"
ATTEMPTS_FILE = "infrastructure_attempts.jsonl"
CHUNKS_FILE = "chunks.jsonl"
Progress = Callable[["VerifyStats"], None]


class CommitChunk(BaseModel):
    """One committed chunk of verdicts: how many, and how many died for infrastructure."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    schema_version: Literal[1] = 1
    index: int
    samples: int
    infrastructure: int

    @property
    def key(self) -> int:
        return self.index


def chunk_died(samples: int, infrastructure: int) -> bool:
    """A chunk more than half of whose samples died for infrastructure reasons is not a
    measurement (a validity condition): it is never written, and never passes a check."""
    return infrastructure * 2 > samples


class PriorAttempt(BaseModel):
    """An `infrastructure` verdict that a resume set aside to verify the sample again."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    schema_version: Literal[1] = 1
    attempt: Annotated[int, Field(ge=1)]  # 1 for the first verdict set aside for this key
    verdict: Verification

    @property
    def key(self) -> tuple:
        return (self.verdict.key, self.attempt)


class ChunkInfrastructureError(RuntimeError):
    """A commit chunk died mostly of infrastructure: not written, the run stops."""

    pass


@dataclass
class VerifyStats:
    """Counts, stages, reasons and times of one verification step, as it goes."""

    total: int = 0
    already_verified: int = 0
    verified_now: int = 0
    accepted_now: int = 0
    code_bearing_now: int = 0  # verified now with Lean code (the work a verifier sizes by)
    stale_reverified: int = 0
    infrastructure_reverified: int = 0
    torn_dropped: int = 0
    cached_now: int = 0  # verdicts copied from the cache or from a duplicate in the batch
    timeouts_rechecked: int = 0
    timeouts_after_recheck: int = 0
    ordered_by_history: int = 0
    stages: Counter[str] = field(default_factory=Counter)
    reasons: Counter[str] = field(default_factory=Counter)
    verify_seconds: list[float] = field(default_factory=list)
    header_imports: dict[str, int] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)

    @property
    def done(self) -> int:
        return self.already_verified + self.verified_now

    def rate(self) -> float:
        return self.verified_now / max(time.monotonic() - self.started, 1e-9)

    def percentiles(self) -> dict[str, float | None]:
        values = sorted(self.verify_seconds)
        if not values:
            return {"median": None, "p90": None, "max": None}
        pick = lambda q: values[min(len(values) - 1, int(q * (len(values) - 1) + 0.5))]  # noqa: E731
        return {"median": pick(0.5), "p90": pick(0.9), "max": values[-1]}

    def count(self, verdict: Verification) -> None:
        """Count one verdict of this attempt."""
        self.verified_now += 1
        self.accepted_now += verdict.accepted
        self.stages[verdict.stage.value] += 1
        self.reasons.update(verdict.reasons)
        self.code_bearing_now += verdict.stage is not Stage.NO_CODE
        self.cached_now += verdict.copied
        if verdict.timeout_rechecked:
            self.timeouts_rechecked += 1
            self.timeouts_after_recheck += verdict.stage is Stage.TIMEOUT
        measured = verdict.stage not in (Stage.NO_CODE, Stage.GATE, Stage.REINSERTION)
        if measured and not verdict.copied:
            self.verify_seconds.append(verdict.verify_s)

    def to_result(self) -> VerificationResult:
        """The step's result once every generation is judged."""
        return VerificationResult(
            total=self.total,
            already_verified=self.already_verified,
            verified_now=self.verified_now,
            accepted_now=self.accepted_now,
            code_bearing_now=self.code_bearing_now,
            wall_s=time.monotonic() - self.started,
            stale_reverified=self.stale_reverified,
            infrastructure_reverified=self.infrastructure_reverified,
            torn_dropped=self.torn_dropped,
            cached_now=self.cached_now,
            timeouts_rechecked=self.timeouts_rechecked,
            timeouts_after_recheck=self.timeouts_after_recheck,
            ordered_by_history=self.ordered_by_history,
            header_imports=dict(self.header_imports),
            stages=dict(self.stages),
            reasons=dict(self.reasons),
            verify_s=self.percentiles(),
        )


class VerificationResult(StageResult):
    """A verification step's counts, stages, reasons and times. `total` and `already_verified`
    count the stream; the rest (`stages`, `reasons` too) only the verdicts of this attempt."""

    total: int
    already_verified: int
    verified_now: int
    accepted_now: int
    code_bearing_now: int  # verified now with Lean code: what the verifier's rate is sized by
    wall_s: float
    stale_reverified: int
    infrastructure_reverified: int
    torn_dropped: int
    cached_now: int = 0  # copied from the verdict cache or a duplicate in the batch, not run
    timeouts_rechecked: int = 0  # timeouts run a second time after the batch
    timeouts_after_recheck: int = 0  # of those, still timeouts
    # Lean jobs ordered by their statement's measured history, not by their length alone
    ordered_by_history: int = 0
    # Header imports per worker (and by the warm spare) while the step's backend was open, the
    # self-test's warm-up included: one per worker for a batch of one header, unless it restarts.
    header_imports: dict[str, int] = Field(default_factory=dict)
    stages: dict[str, int]
    reasons: dict[str, int]
    verify_s: dict[str, float | None]  # median, p90, max of the verified-now proofs


def _remove_verdicts(path: Path, keys: set[tuple]) -> list[Verification]:
    """Take the verdicts of `keys` out of the stream (atomically); returns them."""
    rows = read_records(path, Verification)
    publish_records(path, [row for row in rows if row.key not in keys])
    return [row for row in rows if row.key in keys]


def _set_aside_stale(path: Path, stale: set[tuple]) -> int:
    """Move stale verdicts out of the stream, keeping them in stale_verdicts.jsonl."""
    with Appender(
        path.parent / STALE_FILE, Verification, key=lambda r: (r.key, r.code_sha256)
    ) as out:
        removed = [r for r in _remove_verdicts(path, stale) if (r.key, r.code_sha256) not in out]
        out.append_many(removed)
    return len(removed)


def _set_aside_infrastructure(path: Path, keys: set[tuple]) -> None:
    """Move `infrastructure` verdicts into infrastructure_attempts.jsonl, numbered per key. The
    attempts are appended before the stream is rewritten, and a verdict already recorded is not
    recorded twice: a crash in between loses and doubles nothing."""
    attempts_path = path.parent / ATTEMPTS_FILE
    with Appender(attempts_path, PriorAttempt) as out:
        prior = list(iter_records(attempts_path, PriorAttempt)) if out.keys else []
        attempts = Counter(row.verdict.key for row in prior)
        recorded = {row.verdict.model_dump_json() for row in prior}
        fresh = []
        for verdict in iter_records(path, Verification):
            if verdict.key in keys and verdict.model_dump_json() not in recorded:
                attempts[verdict.key] += 1
                fresh.append(PriorAttempt(attempt=attempts[verdict.key], verdict=verdict))
        out.append_many(fresh)
    _remove_verdicts(path, keys)


def _prior_attempts(verdicts_path: Path) -> Counter[tuple]:
    path = verdicts_path.parent / ATTEMPTS_FILE
    if not path.exists():
        return Counter()
    return Counter(row.verdict.key for row in iter_records(path, PriorAttempt))


def _prepare_resume(
    verdicts_path: Path,
    pins: Mapping[SampleKey, str],
    stats: VerifyStats,
    *,
    reverify_stale: bool,
) -> None:
    """Before a resume: refuse orphan verdicts, and stale ones unless `reverify_stale` (then set
    them aside); set aside `infrastructure` verdicts, which are never final."""
    with Appender(verdicts_path, Verification) as probe:
        stats.torn_dropped = probe.torn_dropped
    existing = {v.key: v for v in iter_records(verdicts_path, Verification)}
    orphans, stale = orphans_and_stale_by_hash(existing, pins)
    if orphans:
        raise StaleVerdictError(
            f"{verdicts_path}: {len(orphans)} verdicts have no generation (e.g. {orphans[0]})"
        )
    if stale and not reverify_stale:
        raise StaleVerdictError(
            f"{verdicts_path}: {len(stale)} verdicts judged other code than the generations now "
            f"on disk (e.g. {stale[0]}); re-run with reverify_stale to verify them again"
        )
    if stale:
        stats.stale_reverified = _set_aside_stale(verdicts_path, set(stale))
    infrastructure = {key for key, v in existing.items() if v.stage is Stage.INFRASTRUCTURE} - set(
        stale
    )
    if infrastructure:
        _set_aside_infrastructure(verdicts_path, infrastructure)
        stats.infrastructure_reverified = len(infrastructure)


def _code_pins(path: Path, follow: threading.Event | None) -> dict[SampleKey, str]:
    """The code pin of each generation on disk now (every line, or in follow mode the whole
    lines: the writer may be mid-line), read one record at a time: the generations themselves,
    token ids and all, are never held together."""
    records = iter_records(path, Generation) if follow is None else whole_records(path, Generation)
    return {g.key: code_sha256(g.lean_code) for g in records}


def _pending(
    problems: Mapping[str, Problem],
    path: Path,
    pins: dict[SampleKey, str],
    judged: Appender[Verification],
    stats: VerifyStats,
    follow: threading.Event | None,
) -> Iterator[tuple[Problem, Generation]]:
    """The generations without a verdict, read again from disk one at a time: those there now,
    then (in follow mode) each new one as it is committed, until `follow` is set."""
    stream = (
        iter_records(path, Generation)
        if follow is None
        else follow_records(path, Generation, follow)
    )
    for generation in stream:
        if generation.problem_id not in problems:
            raise ValueError(f"{path}: generations for unknown problem {generation.problem_id!r}")
        if generation.key not in pins:
            pins[generation.key] = code_sha256(generation.lean_code)
            stats.total += 1
        if generation.key not in judged:
            yield problems[generation.problem_id], generation


def verify_generations(
    problems: Mapping[str, Problem],
    generations_path: Path,
    verdicts_path: Path,
    verifier: StrictVerifier,
    *,
    commit_every: int,
    reverify_stale: bool = False,
    progress: Progress | None = None,
    follow: threading.Event | None = None,
) -> VerifyStats:
    """Verify every generation without a current verdict, appending verdicts in commit chunks
    (see the module docstring); returns what was done. `follow`: the generations file is still
    growing; verify each generation as it lands, until `follow` is set (then what waits is left
    for a later run, and what runs finishes)."""
    pins = _code_pins(generations_path, follow)
    stats = VerifyStats(total=len(pins))
    foreign = sorted({key.problem_id for key in pins} - set(problems))
    if foreign:
        raise ValueError(f"{generations_path}: generations for unknown problems {foreign[:5]}")
    if verdicts_path.exists():
        _prepare_resume(verdicts_path, pins, stats, reverify_stale=reverify_stale)
    with (
        Appender(verdicts_path, Verification) as appender,
        Appender(verdicts_path.with_name(CHUNKS_FILE), CommitChunk) as chunks,
    ):
        stats.already_verified = len(appender.keys)
        prior_attempts = _prior_attempts(verdicts_path)
        pending = _pending(problems, generations_path, pins, appender, stats, follow)
        chunk: list[Verification] = []
        ordered_before = verifier.ordered_by_history

        def commit() -> None:
            infrastructure = sum(v.stage is Stage.INFRASTRUCTURE for v in chunk)
            # Samples verified again after earlier infrastructure verdicts are not counted: they
            # are a biased draw (all dead before), gated instead by the share of what is left.
            first = [v for v in chunk if not prior_attempts[v.key]]
            if chunk_died(len(first), sum(v.stage is Stage.INFRASTRUCTURE for v in first)):
                raise ChunkInfrastructureError(
                    f"{infrastructure} of {len(chunk)} samples in a commit chunk died for "
                    "infrastructure reasons; the chunk was not written (a validity condition). "
                    "Fix the verifier's environment and re-run: finished verdicts are kept."
                )
            appender.append_many(chunk)
            chunks.append(
                CommitChunk(
                    index=len(chunks.keys), samples=len(chunk), infrastructure=infrastructure
                )
            )
            chunk.clear()

        for verdict in verifier.verify_stream(pending, stop=follow):
            if prior_attempts[verdict.key]:
                diagnostics = verdict.diagnostics.model_copy(
                    update={"prior_attempts": prior_attempts[verdict.key]}
                )
                verdict = verdict.model_copy(update={"diagnostics": diagnostics})
            chunk.append(verdict)
            stats.count(verdict)
            if len(chunk) >= commit_every:
                commit()
            stats.ordered_by_history = verifier.ordered_by_history - ordered_before
            if progress is not None:  # every verdict: the caller decides how often to show it
                progress(stats)
        if chunk:
            commit()
    stats.header_imports = verifier.backend.header_imports()
    if progress is not None:
        progress(stats)
    return stats
