"""The validity conditions the report judged for each comparison: held or failed, what was
found, and the files read with their sha256."""

from __future__ import annotations

from prover_assets.report.summary.base import SummaryModel

__all__ = ["Condition", "JudgedFile", "ValidityJudgement"]


class JudgedFile(SummaryModel):
    """A file a condition read, by path and sha256."""

    path: str
    sha256: str


class Condition(SummaryModel):
    """One validity condition judged on one subject: held or not, what it found, which files
    (with their sha256) it read."""

    name: str  # the blocking check's name
    subject: str  # what it judged: "baseline on minif2f cap 256", "SFT shards", ...
    held: bool
    found: str
    files: tuple[JudgedFile, ...]


class ValidityJudgement(SummaryModel):
    """One comparison's validity conditions, judged from the files it read."""

    eval_set: str
    cap: int
    held: bool
    conditions: list[Condition]
