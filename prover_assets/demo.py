"""`make demo`: materialize the main job on the embedded default and say where things are.

Runs in the current process against the instance under $DAGSTER_HOME, so the runs,
materializations and checks show in `make ui` afterwards.
"""

import os
import sys
import time

import dagster as dg

from prover_assets.definitions import CONFIG_ENV, build_definitions, config_path

MAIN_JOB = "full_round"


def main() -> int:
    if "DAGSTER_HOME" not in os.environ:
        print("DAGSTER_HOME is not set; run `make demo`, which points it at .dagster_home/")
        return 2
    definitions = build_definitions(config_path())
    started = time.monotonic()
    with dg.DagsterInstance.get() as instance:
        result = definitions.resolve_job_def(MAIN_JOB).execute_in_process(
            instance=instance, raise_on_error=False
        )
    elapsed = time.monotonic() - started
    experiment = definitions.resources["experiment"]
    print()
    print(
        f"{MAIN_JOB}: {'succeeded' if result.success else 'FAILED'} in {elapsed:.0f} s "
        f"(run {result.run_id}, config {os.environ.get(CONFIG_ENV)})"
    )
    print(f"outputs: {experiment.data_root().resolve()}")
    for event in result.get_asset_materialization_events():
        materialization = event.event_specific_data.materialization
        folder = materialization.metadata.get("output_dir")
        print(
            f"  {materialization.asset_key.to_user_string():45s} {folder.value if folder else ''}"
        )
    print("open the UI: make ui   (then http://127.0.0.1:3000)")
    return 0 if result.success else 1


if __name__ == "__main__":
    sys.exit(main())
