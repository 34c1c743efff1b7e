"""The result of a validity check: plain data that the Dagster layer turns into a gate."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["CheckOutcome"]


@dataclass(frozen=True)
class CheckOutcome:
    passed: bool
    description: str
    metadata: dict[str, Any] = field(default_factory=dict)
