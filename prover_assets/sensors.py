"""Dead local runs must not hold the `heavy` pool forever.

A run killed with `kill -9` stays STARTED in the instance and keeps its pool slot: Dagster's
default launcher cannot see a dead process, and run monitoring frees slots only of runs already
marked finished. `reap_dead_runs` finds in-progress runs whose recorded processes (the run
worker and any step workers, from the run's own engine events) no longer exist on this host,
marks them failed, and frees their slots. It runs as a sensor under the daemon (`dagster dev`),
at the start of `make demo`, and on demand: `python -m prover_assets.sensors [DATA_ROOT]`. Each
sweep also ends the children those runs left behind and removes their publishes' debris.

A pid means something only on the host that started it: the reaper judges runs only when the
instance starts them as processes of this host (Dagster's default run launcher, or in this
process); under another launcher (Kubernetes, Celery, Docker) their processes live elsewhere and
it judges none (that launcher's run monitoring does). Runs of several hosts sharing one instance
are told apart by the tag their first step sets (`RUN_HOST_TAG`): a reaper leaves another
host's runs to that host's reaper. Children and debris are this host's only.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
from dagster import DagsterEventType, DagsterRunStatus, RunsFilter

from prover_assets.children import ChildRecord, end_orphans, process_start_time
from prover_assets.lean.repl import sweep_repl_folders
from prover_assets.preflight.gate import PREFLIGHT_DIR
from prover_assets.preflight.run import sweep_work_folders
from prover_assets.records.owned import HOST, RUN_HOST_TAG, Removed
from prover_assets.records.store import remove_debris

__all__ = ["Sweep", "reap_dead_runs", "reaper_sensor", "runs_elsewhere", "sweep"]

_IN_PROGRESS = [DagsterRunStatus.STARTING, DagsterRunStatus.STARTED, DagsterRunStatus.CANCELING]
_PROCESS_EVENTS = (DagsterEventType.ENGINE_EVENT, DagsterEventType.STEP_WORKER_STARTED)


def process_alive_since(pid: int, logged_at: float) -> bool:
    """Whether `pid` is a live process that already existed when `logged_at` (a pid that was
    reused by a later process does not count)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: alive, and not ours to judge
    started = process_start_time(pid)
    return started is not None and started <= logged_at + 5


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


def runs_elsewhere(instance: dg.DagsterInstance) -> str | None:
    """Why the instance's runs are not processes of this host (its run launcher), or None
    when they are: Dagster's default launcher, or runs in this process."""
    from dagster._core.launcher.sync_in_memory_run_launcher import SyncInMemoryRunLauncher

    launcher = instance.run_launcher
    if isinstance(launcher, dg.DefaultRunLauncher | SyncInMemoryRunLauncher):
        return None
    return (
        f"runs start through {type(launcher).__name__}, as processes of other hosts: their "
        "launcher's run monitoring judges them, not a pid here"
    )


def reap_dead_runs(instance: dg.DagsterInstance, host: str = HOST) -> list[str]:
    """Mark failed every in-progress run whose processes are all gone (runs of this host only:
    `runs_elsewhere`, and a run tagged with another `host` is left to that host's reaper); free
    the slots of every finished run that still holds some. Returns the ids of the runs marked
    failed."""
    reaped = _reap_local_runs(instance, host) if runs_elsewhere(instance) is None else []
    storage = instance.event_log_storage
    if storage.supports_global_concurrency_limits:
        for run_id in storage.get_concurrency_run_ids():
            holder = instance.get_run_by_id(run_id)
            if holder is None or holder.is_finished:
                storage.free_concurrency_slots_for_run(run_id)
    return reaped


def _reap_local_runs(instance: dg.DagsterInstance, host: str) -> list[str]:
    reaped = []
    for record in instance.get_run_records(filters=RunsFilter(statuses=_IN_PROGRESS)):
        run = record.dagster_run
        if run.tags.get(RUN_HOST_TAG, host) != host:
            continue  # another host's processes: its own reaper judges them
        processes = _run_processes(instance, run.run_id)
        if not processes or any(process_alive_since(pid, at) for pid, at in processes):
            continue
        instance.report_run_failed(
            run,
            message="The run's processes no longer exist (killed, e.g. with kill -9); marked failed by "
            "prover-assets so that its `heavy` pool slot is freed. Relaunch to resume.",
        )
        reaped.append(run.run_id)
    return reaped


@dataclass(frozen=True)
class Sweep:
    """What one sweep after dead runs did."""

    reaped: list[str]  # runs marked failed
    orphans: list[ChildRecord]  # children of dead parents, ended
    # removed: temporaries of interrupted publishes, work folders of killed preflights, and
    # the temporary folders of REPLs whose verifier is gone, each with its size
    debris: list[Removed]
    reaper_off: str | None = None  # why no run was judged (`runs_elsewhere`)

    def describe(self) -> str:
        judged = f" (the reaper is off: {self.reaper_off})" if self.reaper_off else ""
        parts = [
            f"marked failed: {', '.join(self.reaped) or 'none'}{judged}",
            "ended orphaned children: "
            + (", ".join(f"pid {o.child_pid} ({o.argv[-1]})" for o in self.orphans) or "none"),
            f"removed debris: {', '.join(d.describe() for d in self.debris) or 'none'}",
        ]
        return "; ".join(parts)


def sweep(instance: dg.DagsterInstance, data_root: Path | None) -> Sweep:
    """Reap dead runs, end the children they left (by pid and start time), and remove the
    temporaries of publishes they interrupted under `data_root`."""
    reaped = reap_dead_runs(instance)
    orphans = end_orphans()  # first: a REPL's folder is its verifier's, gone once it is
    debris = sweep_repl_folders()
    if data_root is not None:
        debris += remove_debris(data_root, recursive=True)
        debris += sweep_work_folders(data_root / PREFLIGHT_DIR)
    return Sweep(reaped, orphans, debris, runs_elsewhere(instance))


def reaper_sensor(data_root: Path | None) -> dg.SensorDefinition:
    """The sensor that reaps dead runs (and their children and debris) every sweep."""

    @dg.sensor(
        name="reap_dead_runs_sensor",
        minimum_interval_seconds=30,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Marks dead local runs failed and frees their `heavy` pool slots; ends "
        "their orphaned children; removes the debris of interrupted publishes.",
    )
    def reap_dead_runs_sensor(context: dg.SensorEvaluationContext) -> dg.SkipReason:
        return dg.SkipReason(sweep(context.instance, data_root).describe())

    return reap_dead_runs_sensor


def main() -> int:
    """`python -m prover_assets.sensors [DATA_ROOT]`: one sweep, printing what it reaped."""
    if "DAGSTER_HOME" not in os.environ:
        print("set DAGSTER_HOME to the instance to check (make ui uses .dagster_home/)")
        return 2
    root = sys.argv[1] if len(sys.argv) > 1 else None
    with dg.DagsterInstance.get() as instance:
        started = time.monotonic()
        done = sweep(instance, Path(root) if root else None)
    print(f"checked in {time.monotonic() - started:.1f} s; {done.describe()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
