"""How many threads each torch process the project starts takes on the CPU.

torch's default is one thread per core, as if the process had the host to itself. It rarely
does: the Lean workers of the overlapped schedule run beside the engine, the run's own process
and its daemon take their share, and a developer's second run or test suite may share the cores.
On a loaded 2-core host the default made the demo's format tuning about 8 times slower than one
thread (0.3 steps/s against 2.3: a whole demo 51 min against 8 min 24 s), the threads spinning
against each other at every small matmul.

The count, in order: `gpu.settings.cpu_threads` when the config sets it; else `OMP_NUM_THREADS`
when the operator exported it (the variable OpenMP itself reads); else the cores this process
may run on, less the Lean workers that run beside it and one core for everything else, at least
one. The count a step ran with is recorded in its manifest.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from prover_assets.config import EngineSettings, LeanSettings, RemoteLeanSettings

__all__ = ["THREADS_VARIABLE", "CpuThreads", "cpu_threads", "torch_threads", "usable_cores"]

THREADS_VARIABLE = "OMP_NUM_THREADS"


def usable_cores() -> int:
    """The cores this process may run on (its affinity, which a container or `taskset` narrows
    below the host's count)."""
    return len(os.sched_getaffinity(0))


@dataclass(frozen=True)
class CpuThreads:
    """A thread count and where it came from, for the manifest and the step's log."""

    count: int
    source: str  # "config", THREADS_VARIABLE, or "cores"
    cores: int
    lean_beside: int

    def describe(self) -> str:
        if self.source == "cores":
            return (
                f"{self.count} torch threads ({self.cores} cores less {self.lean_beside} Lean "
                f"workers beside and 1 for the rest)"
            )
        by = "gpu.settings.cpu_threads" if self.source == "config" else f"${self.source}"
        return f"{self.count} torch threads (set by {by})"

    def record(self) -> dict[str, int | str]:
        return {"count": self.count, "source": self.source, "cores": self.cores}


def lean_workers_beside(engine: EngineSettings, lean: LeanSettings | None) -> int:
    """The Lean workers that may run on this host while a torch step runs: those of the
    overlapped schedule's `lean` pool (none in the exclusive schedule, where the two take turns,
    and none for a remote server's). `lean` None: a step of the exclusive schedule, which
    holds no Lean settings."""
    if engine.schedule != "overlapped" or isinstance(lean, RemoteLeanSettings):
        return 0
    if lean is None:
        raise ValueError(
            "the overlapped schedule counts the Lean workers beside: give its settings"
        )
    from prover_assets.verify.sizing import sized_workers  # which reads usable_cores from here

    return sized_workers(lean).workers


def cpu_threads(
    engine: EngineSettings,
    lean: LeanSettings | None,
    *,
    cores: int | None = None,
    environ: Mapping[str, str] | None = None,
) -> CpuThreads:
    """The threads a torch process of this config takes (the module's rule)."""
    cores = usable_cores() if cores is None else cores
    beside = lean_workers_beside(engine, lean)
    if engine.cpu_threads is not None:
        return CpuThreads(engine.cpu_threads, "config", cores, beside)
    told = (os.environ if environ is None else environ).get(THREADS_VARIABLE, "").strip()
    if told:
        if not told.isdigit() or int(told) < 1:
            raise ValueError(
                f"{THREADS_VARIABLE}={told!r} is not a positive whole number: unset it, or set "
                f"gpu.settings.cpu_threads in the config"
            )
        return CpuThreads(int(told), THREADS_VARIABLE, cores, beside)
    return CpuThreads(max(1, cores - beside - 1), "cores", cores, beside)


@contextlib.contextmanager
def torch_threads(count: int | None) -> Iterator[None]:
    """torch's intra-op threads at `count` inside (None: as they are), what they were after."""
    if count is None:
        yield
        return
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
