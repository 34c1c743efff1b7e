"""`make preflight CONFIG=...`: the `preflight` job, in this process, against the instance under
$DAGSTER_HOME (so it shows in `make ui`); prints the report and exits 0 only when it passed."""

import os
import sys

import dagster as dg

from prover_assets.config import load_run_config
from prover_assets.definitions import build_definitions, config_path
from prover_assets.preflight import PREFLIGHT_JOB, latest_report
from prover_assets.preflight.gate import report_path


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
    config = load_run_config(path)
    report = latest_report(config)
    if report is None:
        print(f"the preflight of {path} wrote no report: see the run {result.run_id} above")
        return 1
    print(report.markdown())
    print(f"report: {report_path(config, report.identity)}")
    return 0 if result.success and report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
