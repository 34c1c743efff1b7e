"""How many Lean workers a host holds, and how much of it they take, in the unit that matters.

A warmed REPL's resident memory is mostly Mathlib's `.olean` files, mapped from disk: file-backed
pages that every REPL of the host shares, one copy in the page cache. What one more worker adds
is its own, anonymous memory (the elaborator's heap), which grows with the proofs it runs until
`memory_ceiling_mb` recycles it: the ceiling is what a worker may hold.
Summing resident memory over eight workers would count the ~5 GB of `.oleans` eight times.

`auto_workers: true` takes the smaller of two counts: the host's cores less what the config reserves
(the engines' processes, the run worker), and its memory (90 %, less the reserve and the shared
`.olean` pages) over the ceiling, less the warm spare.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import psutil

from prover_assets.config import LocalLeanSettings, RemoteLeanSettings, SimulatedLeanSettings
from prover_assets.cpu_threads import usable_cores

__all__ = [
    "HOST_MEMORY_SHARE",
    "OLEAN_SHARED_MB_PRIOR",
    "HostShape",
    "WorkerSizing",
    "lean_host_mb",
    "size_workers",
    "sized_workers",
]

HOST_MEMORY_SHARE = 0.9  # of the host's memory, what the preflight lets a round plan to use
# Mathlib's mapped .olean files, shared by every REPL: about 5 GB (a prior; the preflight's
# import measures a warmed REPL's `mapped_mb`).
OLEAN_SHARED_MB_PRIOR = 5120.0


@dataclass(frozen=True)
class HostShape:
    """What a host offers the workers: cores and memory."""

    cores: int
    memory_mb: float

    @classmethod
    def this_host(cls) -> HostShape:
        return cls(usable_cores(), psutil.virtual_memory().total / (1 << 20))


@dataclass(frozen=True)
class WorkerSizing:
    """A worker count and how it was reached."""

    workers: int
    by_cores: int | None = None  # None: pinned in the config
    by_memory: int | None = None

    @property
    def pinned(self) -> bool:
        return self.by_cores is None

    def describe(self) -> str:
        if self.by_cores is None or self.by_memory is None:
            return f"{self.workers} workers (pinned in the config)"
        bound = "cores" if self.by_cores <= self.by_memory else "memory"
        return (
            f"{self.workers} workers (auto: {self.by_cores} by cores, {self.by_memory} by "
            f"memory; bound by {bound})"
        )


def lean_host_mb(workers: int, *, spare: bool, anonymous_mb: float, mapped_mb: float) -> float:
    """The host memory `workers` REPLs hold (and the warm spare, a REPL like them, when there
    is one): each process's own (anonymous) memory, and the mapped pages once."""
    if workers == 0:
        return 0.0
    processes = workers + (1 if spare else 0)
    return processes * anonymous_mb + mapped_mb


def size_workers(
    host: HostShape,
    *,
    reserve_cores: int,
    reserve_mb: float,
    per_worker_mb: float,
    mapped_mb: float,
    spare: bool,
) -> WorkerSizing:
    """`auto_workers`: one REPL per core left after the reserve, as many as the memory left
    (after the reserve and the mapped .oleans) holds at `per_worker_mb` each, the smaller; at
    least one."""
    by_cores = host.cores - reserve_cores
    room_mb = HOST_MEMORY_SHARE * host.memory_mb - reserve_mb - mapped_mb
    by_memory = math.floor(room_mb / per_worker_mb) - (1 if spare else 0)
    return WorkerSizing(max(1, min(by_cores, by_memory)), by_cores, by_memory)


def sized_workers(
    settings: LocalLeanSettings | SimulatedLeanSettings | RemoteLeanSettings,
    host: HostShape | None = None,
    mapped_mb: float = OLEAN_SHARED_MB_PRIOR,
) -> WorkerSizing:
    """The settings' worker count: as pinned, or sized to `host` (this one by default) with
    each worker at its `memory_ceiling_mb`, the most it holds before it is recycled."""
    if not isinstance(settings, LocalLeanSettings) or not settings.auto_workers:
        return WorkerSizing(settings.workers)
    return size_workers(
        host or HostShape.this_host(),
        reserve_cores=settings.host_reserve_cores,
        reserve_mb=settings.host_reserve_mb,
        per_worker_mb=settings.memory_ceiling_mb,
        mapped_mb=mapped_mb,
        spare=settings.warm_spare,
    )
