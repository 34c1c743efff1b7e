"""Verifying a generations file into a verdicts file: resumable, chunked, pinned by hash.

- Resume by key: a verdict is kept only if its `code_sha256` matches the generation now on
  disk. A stale verdict raises, unless re-verifying stale verdicts is asked for: then the stale
  rows move to `stale_verdicts.jsonl` (kept for the record) and are verified again.
- Verdicts stream to the store in commit chunks; a chunk in which more than half of the
  samples died for infrastructure reasons is not written, and the run fails (a validity
  condition of the registered design).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from prover_assets.records import (
    Appender,
    Generation,
    Problem,
    Stage,
    Verification,
    iter_records,
    publish_records,
    read_records,
)
from prover_assets.records.staleness import StaleVerdictError, find_orphans_and_stale
from prover_assets.verify.verifier import StrictVerifier

__all__ = [
    "CHUNKS_FILE",
    "ChunkInfrastructureError",
    "CommitChunk",
    "StaleVerdictError",
    "VerifyStats",
    "verify_generations",
]

log = logging.getLogger(__name__)

STALE_FILE = "stale_verdicts.jsonl"
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


class ChunkInfrastructureError(RuntimeError):
    pass


@dataclass
class VerifyStats:
    total: int = 0
    already_verified: int = 0
    verified_now: int = 0
    accepted: int = 0
    code_bearing_now: int = 0  # verified now with Lean code (the work a verifier sizes by)
    stale_reverified: int = 0
    torn_dropped: int = 0
    stages: Counter[str] = field(default_factory=Counter)
    reasons: Counter[str] = field(default_factory=Counter)
    verify_seconds: list[float] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    @property
    def done(self) -> int:
        return self.already_verified + self.verified_now

    def rate(self) -> float:
        return self.verified_now / max(time.monotonic() - self.started, 1e-9)

    def eta_s(self) -> float | None:
        rate = self.rate()
        return (self.total - self.done) / rate if rate > 0 else None

    def percentiles(self) -> dict[str, float | None]:
        values = sorted(self.verify_seconds)
        if not values:
            return {"median": None, "p90": None, "max": None}
        pick = lambda q: values[min(len(values) - 1, int(q * (len(values) - 1) + 0.5))]  # noqa: E731
        return {"median": pick(0.5), "p90": pick(0.9), "max": values[-1]}

    def to_json(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "already_verified": self.already_verified,
            "verified_now": self.verified_now,
            "accepted_now": self.accepted,
            "code_bearing_now": self.code_bearing_now,
            "wall_s": time.monotonic() - self.started,
            "stale_reverified": self.stale_reverified,
            "torn_dropped": self.torn_dropped,
            "stages": dict(self.stages),
            "reasons": dict(self.reasons),
            "verify_s": self.percentiles(),
        }


def _set_aside_stale(path: Path, stale: set[tuple]) -> int:
    """Move stale verdicts out of the stream (atomically), keeping them in stale_verdicts.jsonl."""
    rows = read_records(path, Verification)
    kept = [row for row in rows if row.key not in stale]
    removed = [row for row in rows if row.key in stale]
    with Appender(
        path.parent / STALE_FILE, Verification, key=lambda r: (r.key, r.code_sha256)
    ) as out:
        out.append_many(r for r in removed if (r.key, r.code_sha256) not in out)
    publish_records(path, kept)
    return len(removed)


def verify_generations(
    problems: Mapping[str, Problem],
    generations_path: Path,
    verdicts_path: Path,
    verifier: StrictVerifier,
    *,
    commit_every: int,
    reverify_stale: bool = False,
    progress: Progress | None = None,
) -> VerifyStats:
    generations = {g.key: g for g in iter_records(generations_path, Generation)}
    stats = VerifyStats(total=len(generations))
    foreign = sorted({key[0] for key in generations} - set(problems))
    if foreign:
        raise ValueError(f"{generations_path}: generations for unknown problems {foreign[:5]}")
    if verdicts_path.exists():
        with Appender(verdicts_path, Verification) as probe:
            stats.torn_dropped = probe.torn_dropped
        existing = {v.key: v for v in iter_records(verdicts_path, Verification)}
        orphans, stale = find_orphans_and_stale(existing, generations)
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
    with (
        Appender(verdicts_path, Verification) as appender,
        Appender(verdicts_path.with_name(CHUNKS_FILE), CommitChunk) as chunks,
    ):
        stats.already_verified = len(appender.keys)
        pending = [
            (problems[g.problem_id], g) for key, g in generations.items() if key not in appender
        ]
        chunk: list[Verification] = []

        def commit() -> None:
            infrastructure = sum(v.stage is Stage.INFRASTRUCTURE for v in chunk)
            if infrastructure * 2 > len(chunk):
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

        for verdict in verifier.verify_stream(pending):
            chunk.append(verdict)
            stats.verified_now += 1
            stats.accepted += verdict.accepted
            stats.stages[verdict.stage.value] += 1
            stats.reasons.update(verdict.reasons)
            stats.code_bearing_now += verdict.stage is not Stage.NO_CODE
            if verdict.stage not in (Stage.NO_CODE, Stage.GATE, Stage.REINSERTION):
                stats.verify_seconds.append(verdict.verify_s)
            if len(chunk) >= commit_every:
                commit()
                if progress is not None:
                    progress(stats)
        if chunk:
            commit()
    if progress is not None:
        progress(stats)
    return stats
