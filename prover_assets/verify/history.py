"""Measured Lean time per trusted statement: the order in which the workers take proofs.

On a small batch the wall is set by the few proofs near the budget: one that starts late runs
on alone while the other workers idle. The code's length ranks them poorly; earlier runs on the
same statement (the baseline's samples before the candidate's, round 0's before a correction
round's, an earlier run's) rank them well. Every Lean run the verifier makes is recorded here,
one file per verifier (`<data_root>/lean_costs/<run>.jsonl`, so writers never share a file),
and a proof's predicted seconds are the geometric mean of its statement's earlier runs, scaled
by its code's length against theirs (the history ranks the problem, the length the sample
within it); a statement never run is predicted from its code's length at the history's seconds
per character (with no history at all, the length alone orders, as before).

The history only orders work: it never changes a verdict, so it is not part of the verdict
cache's key, and a line a killed writer left half-written is not read.
"""

from __future__ import annotations

import math
import statistics
import threading
import uuid
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from prover_assets.records.hashing import sha256_text
from prover_assets.records.store import Appender, whole_records

__all__ = ["COST_HISTORY_DIR", "CostHistory", "LeanCost"]

COST_HISTORY_DIR = "lean_costs"  # under the data root
_SHORTEST_S = 1e-3  # a run measured as 0 s still ranks below every longer one


class LeanCost(BaseModel):
    """One Lean run, measured: how long the statement's proof held a worker."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seq: Annotated[int, Field(ge=0)]
    statement_sha256: str
    code_chars: Annotated[int, Field(ge=0)]
    lean_s: Annotated[float, Field(ge=0)]
    timed_out: bool  # then lean_s is the budget: a lower bound on what the proof would take


def _seq(cost: LeanCost) -> int:
    return cost.seq


def read_costs(folder: Path) -> list[LeanCost]:
    """Every whole line of every history file in `folder`, validated (a bad line raises with
    its file and line); a last line still unterminated is not read."""
    return [
        cost
        for path in sorted(folder.glob("*.jsonl"))
        for cost in whole_records(path, LeanCost, key=_seq)
    ]


class CostHistory:
    """Earlier Lean runs by statement, the rule that predicts a proof's seconds from them, and
    (with a folder) the file this verifier's own runs are appended to."""

    def __init__(self, costs: Iterable[LeanCost] = (), *, folder: Path | None = None) -> None:
        self.folder = folder
        # statement -> (log seconds, log characters) of each earlier run
        self._runs: dict[str, list[tuple[float, float]]] = defaultdict(list)
        s_per_char = []
        for cost in costs:
            self._runs[cost.statement_sha256].append(
                (math.log(max(cost.lean_s, _SHORTEST_S)), math.log(max(cost.code_chars, 1)))
            )
            if cost.code_chars:
                s_per_char.append(cost.lean_s / cost.code_chars)
        self.earlier_runs = sum(len(runs) for runs in self._runs.values())
        self._s_per_char = statistics.median(s_per_char) if s_per_char else 1.0
        self._lock = threading.Lock()
        self._appender: Appender[LeanCost] | None = None
        self.recorded = 0

    @classmethod
    def open(cls, folder: Path) -> CostHistory:
        """The history under `folder` (none yet is an empty history), recording into it."""
        folder.mkdir(parents=True, exist_ok=True)
        return cls(read_costs(folder), folder=folder)

    @property
    def statements(self) -> int:
        return len(self._runs)

    def knows(self, statement: str) -> bool:
        return sha256_text(statement) in self._runs

    def predicted_s(self, statement: str, code_chars: int) -> float:
        """The seconds a proof of `statement` of `code_chars` characters is expected to take."""
        runs = self._runs.get(sha256_text(statement))
        if not runs:
            return code_chars * self._s_per_char
        log_s = statistics.fmean(s for s, _ in runs)
        log_chars = statistics.fmean(c for _, c in runs)
        return math.exp(log_s + math.log(max(code_chars, 1)) - log_chars)

    def record(self, statement: str, code_chars: int, lean_s: float, *, timed_out: bool) -> None:
        """Append one measured run to this verifier's file (nothing without a folder)."""
        if self.folder is None:
            return
        with self._lock:
            if self._appender is None:
                self._appender = Appender(
                    self.folder / f"{uuid.uuid4().hex}.jsonl", LeanCost, key=_seq
                )
            self._appender.append(
                LeanCost(
                    seq=self.recorded,
                    statement_sha256=sha256_text(statement),
                    code_chars=code_chars,
                    lean_s=lean_s,
                    timed_out=timed_out,
                )
            )
            self.recorded += 1

    def close(self) -> None:
        with self._lock:
            if self._appender is not None:
                self._appender.close()
                self._appender = None
