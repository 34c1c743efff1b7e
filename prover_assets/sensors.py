"""Dead local runs must not hold the `heavy` pool forever.

A run killed with `kill -9` stays STARTED in the instance and keeps its pool slot: Dagster's
default launcher cannot see a dead process, and run monitoring frees slots only of runs already
marked finished. `reap_dead_runs` finds in-progress runs whose recorded processes (the run
worker and any step workers, from the run's own engine events) no longer exist on this host,
marks them failed, and frees their slots. It runs as a sensor under the daemon (`dagster dev`),
at the start of `make demo`, and on demand: `python -m prover_assets.sensors`.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import dagster as dg
from dagster._core.events import DagsterEventType
from dagster._core.storage.dagster_run import DagsterRunStatus, RunsFilter

__all__ = ["reap_dead_runs", "reap_dead_runs_sensor"]

_IN_PROGRESS = [DagsterRunStatus.STARTING, DagsterRunStatus.STARTED, DagsterRunStatus.CANCELING]
_PROCESS_EVENTS = (DagsterEventType.ENGINE_EVENT, DagsterEventType.STEP_WORKER_STARTED)


def _boot_time() -> float:
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("btime"):
            return float(line.split()[1])
    raise OSError("no btime in /proc/stat")


def process_alive_since(pid: int, logged_at: float) -> bool:
    """Whether `pid` is a live process that already existed when `logged_at` (a pid that was
    reused by a later process does not count)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: alive, and not ours to judge
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] == "Z":
            return False  # a zombie holds no slot-worthy work
        started = _boot_time() + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return True
    return started <= logged_at + 5


def _run_processes(instance: dg.DagsterInstance, run_id: str) -> list[tuple[int, float]]:
    """(pid, when it was logged) of the run worker and step workers this run recorded."""
    processes = []
    for event_type in _PROCESS_EVENTS:
        for record in instance.get_records_for_run(run_id, of_type=event_type).records:
            event = record.event_log_entry
            data = event.dagster_event.event_specific_data if event.dagster_event else None
            metadata = getattr(data, "metadata", None) or {}
            pid = metadata.get("pid")
            if pid is not None:
                processes.append((int(pid.value), event.timestamp))
    return processes


def reap_dead_runs(instance: dg.DagsterInstance) -> list[str]:
    """Mark failed every in-progress run whose processes are all gone; free the slots of every
    finished run that still holds some. Returns the ids of the runs marked failed."""
    reaped = []
    for record in instance.get_run_records(filters=RunsFilter(statuses=_IN_PROGRESS)):
        run = record.dagster_run
        processes = _run_processes(instance, run.run_id)
        if not processes or any(process_alive_since(pid, at) for pid, at in processes):
            continue
        instance.report_run_failed(
            run,
            message="The run's processes no longer exist (killed, e.g. with kill -9); marked failed by "
            "prover-assets so that its `heavy` pool slot is freed. Relaunch to resume.",
        )
        reaped.append(run.run_id)
    storage = instance.event_log_storage
    if storage.supports_global_concurrency_limits:
        for run_id in storage.get_concurrency_run_ids():
            holder = instance.get_run_by_id(run_id)
            if holder is None or holder.is_finished:
                storage.free_concurrency_slots_for_run(run_id)
    return reaped


@dg.sensor(
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Marks dead local runs failed and frees their `heavy` pool slots.",
)
def reap_dead_runs_sensor(context: dg.SensorEvaluationContext) -> dg.SkipReason:
    reaped = reap_dead_runs(context.instance)
    return dg.SkipReason(f"marked failed: {reaped}" if reaped else "no dead runs")


def main() -> int:
    if "DAGSTER_HOME" not in os.environ:
        print("set DAGSTER_HOME to the instance to check (make ui uses .dagster_home/)")
        return 2
    with dg.DagsterInstance.get() as instance:
        started = time.monotonic()
        reaped = reap_dead_runs(instance)
    print(f"checked in {time.monotonic() - started:.1f} s; marked failed: {reaped or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
