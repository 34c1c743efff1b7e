"""What a step used of its machine, read from the kernel where it ran (getrusage, and the
process tree in /proc), never estimated as wall time times workers: wall seconds, the CPU
seconds of the step's own process, those of its child processes (the REPLs and the Lean they
ran, under bubblewrap or not, the trainer's ranks, vLLM's engines: the ended ones from
getrusage, the live ones from the tree), the peak resident memory of each, and on a GPU box
the peak device memory in use on the GPUs the step may use (`GpuMemoryPeak`: nvidia-smi's
reading, taken with every journal record and at the manifest).

Recorded in every step's manifest (`usage`: the attempt that completed the output). A streamed
step also keeps an attempt journal (`usage/` in its folder, `AttemptJournal`): each attempt's
usage so far, rewritten every few seconds while it runs, and how it ended. An attempt killed
with kill -9 leaves its last record (no end): the manifest of the attempt that completes the
output lists every earlier one (`earlier_attempts`), so that a resumed step's cost is every
attempt's, the killed ones' up to their last record."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import resource
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

__all__ = [
    "EARLIER_ATTEMPTS_KEY",
    "USAGE_KEY",
    "AttemptJournal",
    "AttemptUsage",
    "GpuMemoryPeak",
    "StepUsage",
    "UsageMark",
    "earlier_attempts",
    "gpu_memory_used_mib",
    "live_descendant_pids",
    "live_descendants_cpu_s",
    "recorded_earlier_attempts",
    "recorded_usage",
    "usage_since",
]

# Where a step's manifest records its usage, and its earlier attempts'.
USAGE_KEY = "usage"
EARLIER_ATTEMPTS_KEY = "earlier_attempts"
JOURNAL_DIR = "usage"
_TICKS = os.sysconf("SC_CLK_TCK")
log = logging.getLogger(__name__)


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
    beside the step's in an in-process run); CPU seconds of its children, ended or live (the
    REPLs, the trainer, vLLM's engines: for a verdict step, Lean's own CPU time); the peak
    resident memory of its process (over the process's life: an in-process run's is the
    whole run's) and of its largest ended child, in MiB (None: recorded before they were);
    the peak device memory in use on the fullest GPU it may use, in MiB (None: no GPU, or not
    read)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    wall_s: float
    cpu_s: float
    children_cpu_s: float
    peak_rss_mib: float | None = None
    children_peak_rss_mib: float | None = None
    peak_gpu_mib: float | None = None


def _stat_cpu_s(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds of the process and of its waited-for children) from
    /proc/<pid>/stat; None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the name, field 2, is in parentheses and may hold spaces: split after its last ")"
    fields = stat[stat.rindex(")") + 2 :].split()
    utime, stime, cutime, cstime = (int(f) for f in fields[11:15])
    return int(fields[1]), (utime + stime + cutime + cstime) / _TICKS


def _process_tree() -> tuple[dict[int, float], dict[int, list[int]]]:
    """Every live process's CPU seconds (its own and its waited-for children's), and the
    children of each."""
    stats = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and (found := _stat_cpu_s(int(entry.name))) is not None:
            stats[int(entry.name)] = found
    children: dict[int, list[int]] = {}
    for child, (parent, _) in stats.items():
        children.setdefault(parent, []).append(child)
    return {pid: cpu for pid, (_, cpu) in stats.items()}, children


def _descendants(root: int, children: Mapping[int, list[int]], skip: frozenset[int]) -> list[int]:
    """The descendants of `root`, leaving out each process of `skip` with its own."""
    found, stack = [], [c for c in children.get(root, []) if c not in skip]
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack += [c for c in children.get(pid, []) if c not in skip]
    return found


def live_descendant_pids() -> frozenset[int]:
    """The processes descending from this one now (a journal leaves them, and theirs, out)."""
    _, children = _process_tree()
    return frozenset(_descendants(os.getpid(), children, frozenset()))


def live_descendants_cpu_s(pid: int | None = None, *, skip: frozenset[int] = frozenset()) -> float:
    """The CPU seconds of the live descendants of `pid` (this process by default), each with
    its own waited-for children's: what getrusage's RUSAGE_CHILDREN does not count yet. `skip`:
    processes (with their descendants) that are not the caller's to count."""
    cpu, children = _process_tree()
    root = os.getpid() if pid is None else pid
    return sum(cpu[found] for found in _descendants(root, children, skip))


def _peak_mib(who: int) -> float:
    return round(resource.getrusage(who).ru_maxrss / 1024, 1)  # Linux: KiB


# nvidia-smi's query of each GPU's memory in use, in MiB, one line a GPU: "0, GPU-8f0c..., 1234"
NVIDIA_SMI_MEMORY = (
    "nvidia-smi",
    "--query-gpu=index,uuid,memory.used",
    "--format=csv,noheader,nounits",
)
NVIDIA_SMI_TIMEOUT_S = 30.0  # it answers in well under a second; a hung driver must not hang us


def _visible_gpus(environ: Mapping[str, str]) -> frozenset[str] | None:
    """The GPUs CUDA lets this process use, by index or UUID as `CUDA_VISIBLE_DEVICES` names
    them; None: every GPU (unset)."""
    named = environ.get("CUDA_VISIBLE_DEVICES")
    if named is None:
        return None
    return frozenset(token.strip() for token in named.split(",") if token.strip())


def gpu_memory_used_mib(visible: frozenset[str] | None) -> dict[str, float] | None:
    """The device memory in use now on each GPU of `visible` (None: all), by index, in MiB, as
    nvidia-smi reads it from the driver: every process's on that GPU, not the step's alone (the
    registered box runs one step at a time). None on a box without nvidia-smi, or where it
    fails or answers what it should not (logged)."""
    if shutil.which(NVIDIA_SMI_MEMORY[0]) is None:
        return None
    try:
        answer = subprocess.run(
            NVIDIA_SMI_MEMORY, capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT_S
        )
    except (OSError, subprocess.SubprocessError) as exc:
        _unread(str(exc))
        return None
    if answer.returncode != 0:
        said = (answer.stdout + answer.stderr).strip()
        _unread(f"exit status {answer.returncode}: {said}")
        return None
    used = {}
    try:
        for line in answer.stdout.splitlines():
            index, uuid, mib = (part.strip() for part in line.split(","))
            if visible is None or index in visible or uuid in visible:
                used[index] = float(mib)
    except ValueError:
        _unread(f"an answer not of the form 'index, uuid, MiB': {answer.stdout!r}")
        return None
    return used


@functools.cache
def _unread(why: str) -> None:
    """Say once a process why GPU memory was not read (a journal reads every few seconds)."""
    log.warning("GPU memory not read: %s failed, %s", " ".join(NVIDIA_SMI_MEMORY), why)


@dataclass
class GpuMemoryPeak:
    """The highest device memory in use seen on one GPU the step may use, over the readings
    taken (`read`): with each journal record, every few seconds while the body of `sampled`
    runs, and at the manifest."""

    visible: frozenset[str] | None = field(default_factory=lambda: _visible_gpus(os.environ))
    peak_mib: float | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def read(self) -> float | None:
        """Take a reading; the peak so far (None: no GPU reading yet)."""
        used = gpu_memory_used_mib(self.visible)
        with self._lock:
            if used:
                self.peak_mib = max(self.peak_mib or 0.0, *used.values())
            return self.peak_mib

    @contextlib.contextmanager
    def sampled(self, every_s: float) -> Iterator[None]:
        """Read now, every `every_s` seconds while the body runs, and at its end."""
        with _repeated(self.read, every_s, name="gpu memory"):
            yield


@contextlib.contextmanager
def _repeated(action: Callable[[], object], every_s: float, *, name: str) -> Iterator[None]:
    """`action` now and every `every_s` seconds from a thread of its own while the body runs."""
    stop = threading.Event()

    def repeat() -> None:
        while not stop.wait(every_s):
            action()

    action()
    thread = threading.Thread(target=repeat, name=name, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def usage_since(
    mark: UsageMark,
    *,
    live_children: bool = False,
    skip: frozenset[int] = frozenset(),
    peak_gpu_mib: float | None = None,
) -> StepUsage:
    """What was used since `mark`, to the millisecond; with `live_children`, the CPU of the
    children still running counted too (a journal record of an attempt under way), but those
    of `skip` (processes that were running before the attempt: not its own); `peak_gpu_mib`:
    as a `GpuMemoryPeak` read it."""
    now = UsageMark.now()
    live = live_descendants_cpu_s(skip=skip) if live_children else 0.0
    return StepUsage(
        wall_s=round(now.wall - mark.wall, 3),
        cpu_s=round(now.cpu_s - mark.cpu_s, 3),
        children_cpu_s=round(now.children_cpu_s - mark.children_cpu_s + live, 3),
        peak_rss_mib=_peak_mib(resource.RUSAGE_SELF),
        children_peak_rss_mib=_peak_mib(resource.RUSAGE_CHILDREN),
        peak_gpu_mib=peak_gpu_mib,
    )


def recorded_usage(manifest: Mapping[str, Any]) -> StepUsage | None:
    """The usage a step's manifest records; None for a manifest written before usage was."""
    recorded = manifest.get(USAGE_KEY)
    return None if recorded is None else StepUsage.model_validate(recorded)


def recorded_earlier_attempts(manifest: Mapping[str, Any]) -> list[AttemptUsage]:
    """The earlier attempts a step's manifest records (none before the journal was kept)."""
    return [AttemptUsage.model_validate(a) for a in manifest.get(EARLIER_ATTEMPTS_KEY, [])]


class AttemptUsage(BaseModel):
    """One attempt's record in a step's journal: its usage so far and how it ended (None: no
    end was recorded, the process was killed; its usage is then what it had used by
    `recorded_at`, unix seconds)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    attempt: str
    ended: Literal["completed", "failed"] | None
    recorded_at: float
    usage: StepUsage


@dataclass(frozen=True)
class AttemptJournal:
    """The journal of one attempt of the step writing into `folder` (`usage/<attempt>.json`)."""

    folder: Path
    attempt: str
    mark: UsageMark
    # the processes that were running before the attempt began: not its children
    before: frozenset[int] = field(default_factory=live_descendant_pids)
    gpu_memory: GpuMemoryPeak = field(default_factory=GpuMemoryPeak)

    @property
    def path(self) -> Path:
        return self.folder / JOURNAL_DIR / f"{self.attempt}.json"

    def record(self, ended: Literal["completed", "failed"] | None = None) -> None:
        """Write this attempt's usage so far (atomically: a kill leaves the previous record)."""
        entry = AttemptUsage(
            attempt=self.attempt,
            ended=ended,
            recorded_at=round(time.time(), 3),
            usage=usage_since(
                self.mark,
                live_children=ended is None,
                skip=self.before,
                peak_gpu_mib=self.gpu_memory.read(),
            ),
        )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        partial.write_text(entry.model_dump_json() + "\n", encoding="utf-8")
        os.replace(partial, self.path)

    @contextlib.contextmanager
    def kept(self, every_s: float) -> Iterator[None]:
        """Record now, every `every_s` seconds while the body runs (from a thread of its own),
        and once more at its end: "completed" or, when it raised, "failed"."""
        ended: Literal["completed", "failed"] = "failed"
        try:
            with _repeated(self.record, every_s, name=f"usage {self.attempt}"):
                yield
            ended = "completed"
        finally:
            self.record(ended)


def earlier_attempts(folder: Path, attempt: str) -> list[AttemptUsage]:
    """Every attempt the journal in `folder` records but `attempt`, oldest record first."""
    journal = folder / JOURNAL_DIR
    if not journal.is_dir():
        return []
    found = [_read_attempt(path) for path in journal.glob("*.json") if path.stem != attempt]
    return sorted(found, key=lambda entry: entry.recorded_at)


def _read_attempt(path: Path) -> AttemptUsage:
    try:
        return AttemptUsage.model_validate_json(path.read_text(encoding="utf-8"))
    except ValueError as exc:  # pydantic's ValidationError is one
        raise ValueError(f"{path}:1: not an attempt's usage record: {exc}") from exc
