"""Known defects of the evaluation's own statements: a curated list shipped with the project
(`prover_assets/data/defects/`), one entry per defective statement of a registered eval set,
each with the public source that shows it.

A registered result on statements some of which are false, trivial or vacuous means less than
its p-value says; the report scores the registered comparison unchanged and, beside it, the same
test on the problems with no known defect.
"""

from __future__ import annotations

import importlib.resources
import json
from collections.abc import Collection
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, StringConstraints

from prover_assets.config import EvalSetSpec, resolve_path
from prover_assets.problems.stages import read_eval_set
from prover_assets.records.models import ProblemId
from prover_assets.records.store import RecordError, iter_records

__all__ = [
    "DefectKind",
    "DefectList",
    "KnownDefect",
    "known_defects_of",
    "load_known_defects",
    "shipped_list",
]

Said = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


class DefectKind(StrEnum):
    """What is wrong with a statement, as its public source says."""

    FALSE = "false"  # the statement is false: no proof exists
    TRIVIAL = "trivial"  # a closing tactic proves it alone: it measures nothing
    VACUOUS_HYPOTHESES = "vacuous_hypotheses"  # its hypotheses prove False
    MISFORMALISED = "misformalised"  # provable, but not the informal problem
    PHANTOM_VARIABLE = "phantom_variable"  # elaborates only through auto-bound implicits


class KnownDefect(BaseModel):
    """One statement's defect, as its public source shows it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    problem_id: ProblemId
    kind: DefectKind
    description: Said
    source: Said  # owner/repo@commit, or owner/repo#issue or PR

    @property
    def key(self) -> tuple[str, DefectKind]:
        return self.problem_id, self.kind


def load_known_defects(path: Path, problem_ids: Collection[str]) -> list[KnownDefect]:
    """The list at `path`, every entry validated; an entry whose problem is not one of
    `problem_ids` (the eval set's), a bad field or a repeated (problem, kind) raises naming the
    file and line."""
    defects = []
    for line, defect in enumerate(iter_records(path, KnownDefect), start=1):
        if defect.problem_id not in problem_ids:
            raise RecordError(
                path, line, f"problem_id {defect.problem_id!r} is not a problem of the eval set"
            )
        defects.append(defect)
    return defects


DEFECTS_DIR = Path(str(importlib.resources.files("prover_assets") / "data" / "defects"))
INDEX_FILE = "index.json"  # the sha256 of an eval file -> the list of its copy's defects


def shipped_list(eval_file_sha256: str) -> Path | None:
    """The shipped list of the eval copy whose file has this sha256; None when none is shipped
    (another copy: its defects are not known here)."""
    index = json.loads((DEFECTS_DIR / INDEX_FILE).read_text(encoding="utf-8"))
    name = index.get(eval_file_sha256)
    return None if name is None else DEFECTS_DIR / name


@dataclass(frozen=True)
class DefectList:
    """An eval set's shipped defect list: the file (an input of whatever reads it, hashed) and
    its entries among the eval set's kept problems."""

    path: Path
    defects: tuple[KnownDefect, ...]


def known_defects_of(eval_set: EvalSetSpec, kept: Collection[str]) -> DefectList | None:
    """The shipped defects of the eval set's copy among the problems `kept` (after its limit),
    the list validated against every problem of the copy; None when no list is shipped for it."""
    path = shipped_list(eval_set.file.sha256)
    if path is None:
        return None
    problems, unsupported = read_eval_set(eval_set, resolve_path(eval_set.file.path, "eval file"))
    every = {p.problem_id for p in problems} | {u.problem_id for u in unsupported}
    return DefectList(
        path, tuple(d for d in load_known_defects(path, every) if d.problem_id in kept)
    )
