"""`make preflight CONFIG=...`: the `preflight` job, in this process, against the instance under
$DAGSTER_HOME (so it shows in `make ui`); prints the report and exits 0 only when it passed."""

import os
import sys
from pathlib import Path

import dagster as dg

from prover_assets.definitions import build_definitions, config_path
from prover_assets.preflight import PREFLIGHT_JOB, read_report


def main() -> int:
    """`make preflight`: run the preflight job of the config in `PROVER_ASSETS_CONFIG` on the
    instance of `DAGSTER_HOME`, print its report, and exit 0 only when every check passed."""
    if "DAGSTER_HOME" not in os.environ:
        print("DAGSTER_HOME is not set; run `make preflight`, which points it at .dagster_home/")
        return 2
    path = config_path()
    definitions = build_definitions(path)
    with dg.DagsterInstance.get() as instance:
        result = definitions.resolve_job_def(PREFLIGHT_JOB).execute_in_process(
            instance=instance, raise_on_error=False
        )
    written = report_file(result)
    if written is None:
        print(f"the preflight of {path} wrote no report: see the run {result.run_id} above")
        return 1
    report = read_report(written)
    print(report.markdown())
    print(f"report: {written}")
    return 0 if result.success and report.passed else 1


def report_file(result: dg.ExecuteInProcessResult) -> Path | None:
    """The report this run's preflight wrote, as its step recorded it (a passing one in its
    materialization, a failing one in its failure's metadata: an observation logged before a
    step raises never reaches the event log): never another run's, of another config, pins or
    code, that happens to be newer."""
    recorded = [
        event.step_materialization_data.materialization.metadata
        for event in result.get_asset_materialization_events()
    ] + [
        event.step_failure_data.user_failure_data.metadata
        for event in result.all_events
        if event.is_step_failure and event.step_failure_data.user_failure_data is not None
    ]
    files = [m["report_file"].value for m in recorded if "report_file" in m]
    return Path(files[-1]) if files else None


if __name__ == "__main__":
    sys.exit(main())
