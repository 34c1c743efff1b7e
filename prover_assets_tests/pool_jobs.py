"""Two one-step runs on pool `heavy`, each a process of its own on the instance of
$DAGSTER_HOME, as two launched runs are: `python -m prover_assets_tests.pool_jobs hold FOLDER
EXECUTOR` holds the slot until FOLDER/release exists; `... wait FOLDER EXECUTOR` waits for it,
then writes FOLDER/ran. EXECUTOR is `in_process` (the exclusive schedule's) or `multiprocess`
(the overlapped one's). SIGTERM is an interrupt, as in Dagster's run workers."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import dagster as dg
from dagster._utils.interrupts import setup_interrupt_handlers

KIND, FOLDER, EXECUTOR = [*sys.argv[1:4], "", "", ""][:3]

EXECUTORS = {"in_process": dg.in_process_executor, "multiprocess": dg.multiprocess_executor}


@dg.asset(pool="heavy")
def holder() -> None:
    (Path(FOLDER) / "holding").touch()
    while not (Path(FOLDER) / "release").exists():
        time.sleep(0.05)


@dg.asset(pool="heavy")
def waiter() -> None:
    (Path(FOLDER) / "ran").touch()


def job() -> dg.JobDefinition:
    """The run's job, rebuilt by name in a multiprocess executor's step process."""
    asset = {"hold": holder, "wait": waiter}[KIND]
    return dg.Definitions(
        assets=[asset],
        jobs=[dg.define_asset_job(KIND, [asset], executor_def=EXECUTORS[EXECUTOR])],
    ).resolve_job_def(KIND)


def main() -> None:
    setup_interrupt_handlers()  # SIGTERM as SIGINT, as `dagster api execute_run` sets it
    with dg.DagsterInstance.get() as instance:
        result = dg.execute_job(dg.reconstructable(job), instance=instance, raise_on_error=False)
    (Path(FOLDER) / f"{KIND}-done").write_text("success" if result.success else "failed")


if __name__ == "__main__":
    main()
