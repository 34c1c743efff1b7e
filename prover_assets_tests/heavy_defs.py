"""A test code location: two assets in pool `heavy` that record when they run, and jobs for
them, executed in-process so that a run is one process (the run worker)."""

import json
import os
import time

import dagster as dg


def _heavy(name: str) -> dg.AssetsDefinition:
    @dg.asset(name=name, pool="heavy")
    def heavy() -> None:
        log = os.environ["HEAVY_LOG"]
        with open(log, "a") as handle:
            handle.write(
                json.dumps({"asset": name, "event": "start", "t": time.time(), "pid": os.getpid()})
                + "\n"
            )
        time.sleep(float(os.environ.get("HEAVY_SECONDS", "2")))
        with open(log, "a") as handle:
            handle.write(
                json.dumps({"asset": name, "event": "end", "t": time.time(), "pid": os.getpid()})
                + "\n"
            )

    return heavy


heavy_a, heavy_b = _heavy("heavy_a"), _heavy("heavy_b")
defs = dg.Definitions(
    assets=[heavy_a, heavy_b],
    jobs=[
        dg.define_asset_job("job_a", [heavy_a], executor_def=dg.in_process_executor),
        dg.define_asset_job("job_b", [heavy_b], executor_def=dg.in_process_executor),
    ],
)
