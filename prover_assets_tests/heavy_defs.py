"""A test code location: assets that record when they run, in pool `heavy` (jobs executed
in-process, so that a run is one process: the run worker), and in pools `gpu` and `lean` (the
overlapped schedule: one job, a process per step)."""

import json
import os
import time

import dagster as dg


def _heavy(name: str, pool: str = "heavy") -> dg.AssetsDefinition:
    @dg.asset(name=name, pool=pool)
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
overlapped = [_heavy("gpu_a", "gpu"), _heavy("gpu_b", "gpu"), _heavy("lean_a", "lean")]
defs = dg.Definitions(
    assets=[heavy_a, heavy_b, *overlapped],
    jobs=[
        dg.define_asset_job("job_a", [heavy_a], executor_def=dg.in_process_executor),
        dg.define_asset_job("job_b", [heavy_b], executor_def=dg.in_process_executor),
        dg.define_asset_job("overlapped", overlapped, executor_def=dg.multiprocess_executor),
    ],
)
