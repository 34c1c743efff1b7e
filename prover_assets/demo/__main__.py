"""`make demo`: the whole loop on CPU, against the instance under $DAGSTER_HOME.

It first marks failed any run left dead by an earlier kill (so that no dead run holds the
`heavy` pool), ends the children such runs left and removes their publishes' debris, then runs
the preflight (heavy jobs refuse to launch without one; one that passed for this config, pins and
code, which they accept, is not run again), `full_round` and `eta` in this process,
so the runs, materializations and checks show in `make ui` afterwards, and ends by saying where
the report is and how to open the UI. A config of several iterations (`make demo-iterations`) runs the
baseline, then each iteration's partition of the `iteration` job in order (iteration i samples
with iteration i-1's export), then the report. Run again after a kill, it resumes where the
kill left it.
"""

import os
import sys
import time

import dagster as dg

from prover_assets import job_names
from prover_assets.assets.keys import REPORT_KEY
from prover_assets.assets.metadata import latest_materialization
from prover_assets.config import load_run_config
from prover_assets.definitions import CONFIG_ENV, build_definitions, config_path
from prover_assets.preflight.gate import passing_report
from prover_assets.report.markdown import clock_time
from prover_assets.sensors import sweep


def launches(iterations: int) -> list[tuple[str, str | None]]:
    """The jobs the demo runs, each with its partition: the preflight (heavy jobs need it), then
    `full_round` for one iteration; otherwise the baseline, each iteration in order, the
    report."""
    if iterations == 1:
        return [(job_names.PREFLIGHT, None), (job_names.FULL_ROUND, None)]
    return [
        (job_names.PREFLIGHT, None),
        (job_names.BASELINE, None),
        *((job_names.ITERATION, str(i)) for i in range(1, iterations + 1)),
        (job_names.REPORT, None),
    ]


def main() -> int:
    """`make demo`: the whole loop on the demo config, in process, then where the report is."""
    if "DAGSTER_HOME" not in os.environ:
        print("DAGSTER_HOME is not set; run `make demo`, which points it at .dagster_home/")
        return 2
    definitions = build_definitions(config_path())
    started = time.monotonic()
    with dg.DagsterInstance.get() as instance:
        experiment = definitions.resources["experiment"]
        print(f"before the run: {sweep(instance, experiment.data_root()).describe()}")
        for job, partition in launches(experiment.model().iterations):
            if job == job_names.PREFLIGHT and (
                passed := passing_report(load_run_config(config_path()))
            ):
                print(f"{job}: passed at {passed.finished_at} for this config, pins and code")
                continue
            print(f"{job}" + (f" (iteration {partition})" if partition else ""), flush=True)
            result = definitions.resolve_job_def(job).execute_in_process(
                instance=instance, raise_on_error=False, partition_key=partition
            )
            if not result.success:
                break
        elapsed = time.monotonic() - started
        eta = definitions.resolve_job_def(job_names.OPERATIONS).execute_in_process(
            instance=instance, raise_on_error=False
        )
        report = latest_materialization(instance, REPORT_KEY)
    print()
    print(
        f"{result.job_def.name}: {'succeeded' if result.success else 'FAILED'} in {clock_time(elapsed)} "
        f"(run {result.run_id}, config {os.environ.get(CONFIG_ENV) or config_path()})"
    )
    print(f"outputs: {experiment.data_root().resolve()}")
    for event in result.get_asset_materialization_events():
        materialization = event.event_specific_data.materialization
        folder = materialization.metadata.get("output_dir")
        print(
            f"  {materialization.asset_key.to_user_string():45s} {folder.value if folder else ''}"
        )
    for event in eta.get_asset_materialization_events():
        metadata = event.event_specific_data.materialization.metadata
        print(
            f"ETA of a full round at this config: {metadata['total_central'].value} central "
            f"({metadata['total_range'].value}; {metadata['inputs_measured'].value} inputs "
            f"measured); this round took {clock_time(elapsed)}"
        )
    if result.success and report is not None and report.asset_materialization is not None:
        metadata = report.asset_materialization.metadata
        for name, value in metadata.items():
            if name.endswith("_decision"):
                comparison = name.removesuffix("_decision")
                p_value = metadata[f"{comparison}_p_value"].value
                simulated = " [SIMULATED - NOT EVIDENCE]" if metadata["simulated"].value else ""
                print(
                    f"decision on {comparison}: {value.value}, exact McNemar p = {p_value:.3g}"
                    f"{simulated}"
                )
        print(f"report: {metadata['output_dir'].value}/report.md (and report.html)")
    print("open the UI: make ui, then http://127.0.0.1:3000 (Assets > eval_report, Runs)")
    return 0 if result.success and eta.success else 1


if __name__ == "__main__":
    sys.exit(main())
