"""Do statements elaborate? The pool's candidates (in rank order until N pass) and the
evaluation problems (every one, as `theorem _ref <signature> := by sorry`).

A statement elaborates when its `:= by sorry` form compiles without errors; the sorry warning is
expected. Results stream to a resumable file, one per problem.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from prover_assets.lean.extract import compile_view
from prover_assets.lean.signature import theorem_signature
from prover_assets.records import Appender, Problem, iter_records
from prover_assets.verify.backends import LeanBackend
from prover_assets.verify.worker import LeanJob, LeanResult

__all__ = [
    "Elaboration",
    "ElaborationCounts",
    "ElaborationStatus",
    "PoolElaboration",
    "elaborate_in_rank_order",
    "elaborate_references",
    "reference_statement",
]

log = logging.getLogger(__name__)
REFERENCE_NAME = "_ref"


class ElaborationStatus(StrEnum):
    """Whether a statement elaborated, failed, or could not be judged."""

    ELABORATED = "elaborated"
    ERROR = "error"
    TIMEOUT = "timeout"
    INFRASTRUCTURE = "infrastructure"


class Elaboration(BaseModel):
    """One statement's elaboration: its status and Lean's errors."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    schema_version: Literal[1] = 1
    problem_id: str
    rank: Annotated[int, Field(ge=0)]  # position in the candidates' rank order
    status: ElaborationStatus
    errors: list[dict[str, Any]]
    verify_s: float

    @property
    def key(self) -> str:
        return self.problem_id


def reference_statement(problem: Problem) -> str:
    """The problem's statement with its theorem renamed `_ref` (no clash with any library name)."""
    signature = theorem_signature(problem.formal_statement)
    if signature is None:
        raise ValueError(f"{problem.problem_id}: no theorem in the statement")
    text = problem.formal_statement
    head, tail = text[: signature.theorem_start], text[signature.theorem_start :]
    return head + re.sub(
        rf"theorem\s+{re.escape(signature.name)}", f"theorem {REFERENCE_NAME}", tail, count=1
    )


def _job(problem: Problem, rank: int, statement: str, budget_s: float) -> LeanJob:
    return LeanJob(
        key=(problem.problem_id, rank),
        header=problem.header,
        body=compile_view(statement),
        theorem_name=None,
        budget_s=budget_s,
    )


def _status(result: LeanResult) -> tuple[ElaborationStatus, list[dict[str, Any]]]:
    if result.failure == "timeout":
        return ElaborationStatus.TIMEOUT, []
    if result.failure is not None or result.outcome is None:
        return ElaborationStatus.INFRASTRUCTURE, [{"data": result.failure}]
    if not result.outcome.passed:
        return ElaborationStatus.ERROR, [dict(e) for e in result.outcome.errors]
    return ElaborationStatus.ELABORATED, []


def _record(result: LeanResult) -> Elaboration:
    status, errors = _status(result)
    problem_id, rank = result.key
    return Elaboration(
        problem_id=problem_id, rank=rank, status=status, errors=errors, verify_s=result.elapsed_s
    )


@dataclass
class PoolElaboration:
    """The train pool: the first N candidates that elaborate, and what happened to the others."""

    pool: list[Problem]  # the first N that elaborate, in rank order
    counts: ElaborationCounts


class ElaborationCounts(BaseModel):
    """The candidates' statements checked so far, by status, and those not checked (yet)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    elaborated: int
    error: int
    timeout: int
    infrastructure: int
    checked: int
    unchecked: int


def elaborate_in_rank_order(
    candidates: Sequence[Problem],
    backend: LeanBackend,
    *,
    target: int,
    budget_s: float,
    results_path: Path,
    progress: Callable[[ElaborationCounts], None] | None = None,
) -> PoolElaboration:
    """Check candidates in rank order until `target` elaborate (resumable by problem id)."""
    with Appender(results_path, Elaboration) as appender:
        results = {r.problem_id: r for r in iter_records(results_path, Elaboration)}
        while True:
            elaborated = sum(
                1
                for p in candidates
                if results.get(p.problem_id) is not None
                and results[p.problem_id].status is ElaborationStatus.ELABORATED
            )
            unchecked = [
                (rank, p) for rank, p in enumerate(candidates) if p.problem_id not in results
            ]
            if elaborated >= target or not unchecked:
                break
            # A batch a little larger than what is missing keeps every worker busy; the pool
            # still takes exactly the first `target` in rank order.
            size = max(backend.workers * 2, int((target - elaborated) * 1.2) + 1)
            batch = unchecked[:size]
            jobs = [_job(p, rank, p.formal_statement, budget_s) for rank, p in batch]
            for result in backend.run(jobs):
                record = _record(result)
                appender.append(record)
                results[record.problem_id] = record
                if progress is not None:  # the caller decides how often to show it
                    progress(_counts(results, candidates))
    pool = [
        p
        for p in candidates
        if results.get(p.problem_id)
        and results[p.problem_id].status is ElaborationStatus.ELABORATED
    ]
    return PoolElaboration(pool=pool[:target], counts=_counts(results, candidates))


def _counts(results: dict[str, Elaboration], candidates: Sequence[Problem]) -> ElaborationCounts:
    statuses = Counter(r.status.value for r in results.values())
    return ElaborationCounts(
        **{status.value: statuses.get(status.value, 0) for status in ElaborationStatus},
        checked=len(results),
        unchecked=len(candidates) - len(results),
    )


def elaborate_references(
    problems: Sequence[Problem], backend: LeanBackend, *, budget_s: float
) -> list[Elaboration]:
    """Every evaluation problem as `theorem _ref <signature> := by sorry`; one result each."""
    jobs = [_job(p, rank, reference_statement(p), budget_s) for rank, p in enumerate(problems)]
    results = sorted((_record(r) for r in backend.run(jobs)), key=lambda r: r.rank)
    return results
