"""What a step used of its machine, read from the kernel where it ran (getrusage), never
estimated as wall time times workers: wall seconds, the CPU seconds of the step's own process,
and those of the child processes that ended during it and were waited for: the REPLs (and the
Lean they ran, under bubblewrap or not), the trainer's ranks, vLLM's engines. Recorded in every
step's manifest (`usage`), one attempt's worth: the attempt that completed the output."""

from __future__ import annotations

import resource
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

__all__ = ["USAGE_KEY", "StepUsage", "UsageMark", "recorded_usage", "usage_since"]

# Where a step's manifest records its usage.
USAGE_KEY = "usage"


def _cpu_s(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


@dataclass(frozen=True)
class UsageMark:
    """Where a step started: the monotonic clock and the CPU seconds counted so far."""

    wall: float
    cpu_s: float
    children_cpu_s: float

    @classmethod
    def now(cls) -> UsageMark:
        return cls(time.monotonic(), _cpu_s(resource.RUSAGE_SELF), _cpu_s(resource.RUSAGE_CHILDREN))


class StepUsage(BaseModel):
    """One attempt of a step: wall seconds; CPU seconds of its process (every thread, Dagster's
    beside the step's in an in-process run); CPU seconds of its ended children (the REPLs,
    the trainer, vLLM's engines: for a verdict step, Lean's own CPU time)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    wall_s: float
    cpu_s: float
    children_cpu_s: float


def usage_since(mark: UsageMark) -> StepUsage:
    """What was used since `mark`, to the millisecond."""
    now = UsageMark.now()
    return StepUsage(
        wall_s=round(now.wall - mark.wall, 3),
        cpu_s=round(now.cpu_s - mark.cpu_s, 3),
        children_cpu_s=round(now.children_cpu_s - mark.children_cpu_s, 3),
    )


def recorded_usage(manifest: Mapping[str, Any]) -> StepUsage | None:
    """The usage a step's manifest records; None for a manifest written before usage was."""
    recorded = manifest.get(USAGE_KEY)
    return None if recorded is None else StepUsage.model_validate(recorded)
