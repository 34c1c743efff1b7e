"""What a preflight found: one named result per check, and the report of them all."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "CheckStatus",
    "Measurement",
    "PreflightCheck",
    "PreflightIdentity",
    "PreflightReport",
    "blocked",
    "not_applicable",
    "passed_or_failed",
    "timed",
]


class CheckStatus(StrEnum):
    """How one preflight check ended."""

    PASSED = "passed"
    FAILED = "failed"
    BLOCKED = "blocked"  # not run: a check it needs failed (named in `measured`)
    NOT_APPLICABLE = "not applicable"  # this config does not use what it checks (said why)


@dataclass(frozen=True)
class Measurement:
    """What one check's measure found: how it ended, what it measured in words, and the
    numbers it measured (the ETA reads them); `environment.timed` makes it a `PreflightCheck`
    with the check's name, threshold, remedy and seconds."""

    status: CheckStatus
    measured: str
    figures: dict[str, float] = field(default_factory=dict)


class PreflightCheck(BaseModel):
    """One check: what it measured, against what, and what to do when it fails."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str  # e.g. `lean.round_trip`: section, then what
    status: CheckStatus
    measured: str
    threshold: str
    remedy: str  # what to do when it fails (kept on a pass: the table says what each guards)
    seconds: float
    figures: dict[str, float] = Field(default_factory=dict)  # measured numbers, for the ETA

    @property
    def ok(self) -> bool:
        return self.status in (CheckStatus.PASSED, CheckStatus.NOT_APPLICABLE)


class PreflightIdentity(BaseModel):
    """What a passing preflight vouches for: this config, these pins, this code."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    config_sha256: str
    pins: dict[str, Any]
    code_commit: str | None
    code_dirty: bool | None

    def differences(self, other: PreflightIdentity) -> list[str]:
        """The fields in which `other` differs from this one, in words."""
        found = []
        if other.config_sha256 != self.config_sha256:
            found.append(
                f"config sha256 {other.config_sha256[:12]}... (this {self.config_sha256[:12]}...)"
            )
        for name in sorted(set(self.pins) | set(other.pins)):
            if self.pins.get(name) != other.pins.get(name):
                found.append(f"pin {name} {other.pins.get(name)!r} (this {self.pins.get(name)!r})")
        if (other.code_commit, other.code_dirty) != (self.code_commit, self.code_dirty):
            found.append(
                f"code {other.code_commit} dirty={other.code_dirty} "
                f"(this {self.code_commit} dirty={self.code_dirty})"
            )
        return found


class PreflightReport(BaseModel):
    """Every check in the order it ran; the preflight passed when every check is ok."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    identity: PreflightIdentity
    config_source: str
    checks: list[PreflightCheck]
    wall_s: float
    finished_at: str
    simulated: bool  # a simulated verifier or the demo's tiny model: figures are not a GPU's
    work_folder: str | None  # kept when a check failed (its logs), else removed
    # work folders of earlier preflights removed at the start (killed, or failed with this
    # identity), each with its size
    swept: list[str] = Field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(check.ok for check in self.checks)

    def failed(self) -> list[PreflightCheck]:
        return [check for check in self.checks if not check.ok]

    def figures(self) -> dict[str, float]:
        """Every measured figure, by the name its check gave it."""
        return {name: value for check in self.checks for name, value in check.figures.items()}

    def markdown(self) -> str:
        """The report as a markdown table, one row per check, failures' remedies in full."""
        verdict = "PASSED" if self.passed else f"FAILED ({len(self.failed())} checks)"
        lines = [
            f"# Preflight {verdict}",
            "",
            f"Config `{self.config_source}` (sha256 `{self.identity.config_sha256[:16]}`), code "
            f"`{self.identity.code_commit}`{' (uncommitted changes)' if self.identity.code_dirty else ''}, "
            f"pins {', '.join(f'{k} `{v}`' for k, v in self.identity.pins.items())}. "
            f"{len(self.checks)} checks in {self.wall_s:.1f} s, finished {self.finished_at}."
            + (" SIMULATED parts: not a measurement of real hardware." if self.simulated else ""),
            "",
            "| check | status | measured | threshold | s |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| `{c.name}` | {c.status.value} | {_cell(c.measured)} | {_cell(c.threshold)} | "
            f"{c.seconds:.1f} |"
            for c in self.checks
        ]
        if self.work_folder:
            lines += [
                "",
                f"Logs of the smoke round: `{self.work_folder}` (kept until the next preflight "
                "of this config, pins and code).",
            ]
        if self.swept:
            lines += [
                "",
                "Removed the work folders of earlier preflights: " + "; ".join(self.swept),
            ]
        if self.failed():
            lines += ["", "## What to do", ""]
            lines += [f"- `{c.name}`: {c.remedy}" for c in self.failed()]
        return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def timed(
    name: str,
    threshold: str,
    remedy: str,
    measure: Callable[[], Measurement],
) -> PreflightCheck:
    """Run `measure` as the check `name`; an exception is the check's failure, its message
    what was measured."""
    started = time.monotonic()
    try:
        found = measure()
    except Exception as exc:
        found = Measurement(CheckStatus.FAILED, f"{type(exc).__name__}: {exc}")
    return PreflightCheck(
        name=name,
        status=found.status,
        measured=found.measured,
        threshold=threshold,
        remedy=remedy,
        seconds=round(time.monotonic() - started, 3),
        figures=found.figures,
    )


def blocked(name: str, needs: str, threshold: str, remedy: str) -> PreflightCheck:
    """A check not run because `needs` failed."""
    return PreflightCheck(
        name=name,
        status=CheckStatus.BLOCKED,
        measured=f"not run: {needs} failed",
        threshold=threshold,
        remedy=f"fix {needs} first; then: {remedy}",
        seconds=0.0,
    )


def passed_or_failed(ok: bool) -> CheckStatus:
    """PASSED when `ok`, else FAILED."""
    return CheckStatus.PASSED if ok else CheckStatus.FAILED


def not_applicable(name: str, why: str, threshold: str, remedy: str) -> PreflightCheck:
    """A check this config does not use, and why."""
    return PreflightCheck(
        name=name,
        status=CheckStatus.NOT_APPLICABLE,
        measured=why,
        threshold=threshold,
        remedy=remedy,
        seconds=0.0,
    )
