"""Two one-step runs on pool `heavy`, each a process of its own on the instance of
$DAGSTER_HOME, as two launched runs are: `python -m prover_assets_tests.pool_jobs hold FOLDER`
holds the slot until FOLDER/release exists; `... wait FOLDER` waits for it, then writes
FOLDER/ran. SIGTERM is an interrupt, as in Dagster's run workers."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import dagster as dg
from dagster._utils.interrupts import setup_interrupt_handlers

FOLDER = Path(sys.argv[2]) if len(sys.argv) > 2 else Path()


@dg.asset(pool="heavy")
def holder() -> None:
    (FOLDER / "holding").touch()
    while not (FOLDER / "release").exists():
        time.sleep(0.05)


@dg.asset(pool="heavy")
def waiter() -> None:
    (FOLDER / "ran").touch()


def main() -> None:
    setup_interrupt_handlers()  # SIGTERM as SIGINT, as `dagster api execute_run` sets it
    asset = {"hold": holder, "wait": waiter}[sys.argv[1]]
    with dg.DagsterInstance.get() as instance:
        result = dg.materialize([asset], instance=instance, raise_on_error=False)
    (FOLDER / f"{sys.argv[1]}-done").write_text("success" if result.success else "failed")


if __name__ == "__main__":
    main()
