"""The result of a validity check: plain data that the Dagster layer turns into a gate."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["CheckOutcome", "CountsError"]


class CountsError(RuntimeError):
    """Counts that must reconcile (in = out + dropped) do not: a bug in the step, never a
    judgement of its inputs."""


@dataclass(frozen=True)
class CheckOutcome:
    """A validity check's result: passed, what it found, and metadata for the UI."""

    passed: bool
    description: str
    metadata: dict[str, Any] = field(default_factory=dict)
