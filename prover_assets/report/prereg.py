"""The pre-registration: a hashed block of configs/prereg.md, with a machine-readable twin.

The registered design sits between `<!-- PREREG:BEGIN -->` and `<!-- PREREG:END -->`; the
sha256 of that block is recorded on the line `<!-- PREREG:SHA256 <hex> -->` after it.
Amendments go below, outside the block. The block carries a ```yaml fenced `registered:`
mapping that the report's PRIMARY guard reads, so the numbers the guard enforces are the hashed
numbers themselves.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import yaml
from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "Prereg",
    "PreregError",
    "RegisteredDesign",
    "RegisteredVerifier",
    "block_sha256",
    "read_prereg",
]

BEGIN = "<!-- PREREG:BEGIN -->"
END = "<!-- PREREG:END -->"
_HASH_LINE = re.compile(r"<!-- PREREG:SHA256 ([0-9a-f]{64}) -->")
_YAML_BLOCK = re.compile(r"```yaml\n(.*?)```", re.DOTALL)


class PreregError(ValueError):
    """The pre-registration file is malformed or its recorded hash is missing."""

    pass


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class RegisteredVerifier(_Strict):
    """The verifier the pre-registration names (pins and policy)."""

    lean_version: str
    mathlib_rev: str
    repl_rev: str
    budget_s: float
    statement_check: str
    gate: bool
    axiom_check: bool


class RegisteredDesign(_Strict):
    """The registered design: problems, samples, cap, k, alpha, the decision rule."""

    problem_set: str
    problem_count: Annotated[int, Field(gt=0)]
    problems_sha256: str
    baseline_model: str
    baseline_revision: str
    handler: str
    temperature: float
    top_p: float
    top_k: int | None
    n_samples: int
    cap_tokens: int
    k: int
    outcome: str
    test: str
    alpha: float
    verifier: RegisteredVerifier


@dataclass(frozen=True)
class Prereg:
    """A pre-registration read from its file: the design, its block's sha256 and the recorded
    one."""

    path: Path
    block: str
    sha256: str  # of the block as it is now
    recorded_sha256: str | None
    design: RegisteredDesign

    @property
    def hash_matches(self) -> bool:
        return self.recorded_sha256 == self.sha256


def block_sha256(block: str) -> str:
    """The sha256 of the pre-registration's fenced design block."""
    return hashlib.sha256(block.encode("utf-8")).hexdigest()


def read_prereg(path: Path) -> Prereg:
    """The pre-registration at `path`, with whether its block matches the recorded hash."""
    text = path.read_text(encoding="utf-8")
    if text.count(BEGIN) != 1 or text.count(END) != 1:
        raise PreregError(f"{path}: needs exactly one {BEGIN} and one {END}")
    start = text.index(BEGIN) + len(BEGIN)
    end = text.index(END)
    block = text[start:end]
    recorded = _HASH_LINE.search(text[end:])
    fenced = _YAML_BLOCK.search(block)
    if fenced is None:
        raise PreregError(f"{path}: the registered block has no ```yaml `registered:` mapping")
    data = yaml.safe_load(fenced.group(1))
    if not isinstance(data, dict) or set(data) != {"registered"}:
        raise PreregError(f"{path}: the yaml block must hold one `registered:` mapping")
    return Prereg(
        path=path,
        block=block,
        sha256=block_sha256(block),
        recorded_sha256=recorded.group(1) if recorded else None,
        design=RegisteredDesign.model_validate(data["registered"]),
    )
