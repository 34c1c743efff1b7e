"""Make the format tunings the tests start from (prover_assets_tests/data/demo-tunings/).

Usage: make demo-tunings   (about 10 minutes on 2 cores)

For each demo config the tests run (the shipped `configs/demo.yaml`, which the null control and
the iteration demo share, and the mechanics-size config of `conftest.demo_run_config`), it runs
the product's own steps up to `demo_base_model` in a temporary data root and instance, with the
config's `shared_tunings` pointed at a fresh folder, so the product tunes and publishes the entry
exactly as a user's first `make demo` does; a shipped entry still current is copied instead of
tuned again. Then the shipped entries are replaced with the ones these configs used. Run it when
test_demo or test_jobs says the shipped tuning is stale (the tuning's code, untuned model,
examples or settings changed: its key, `tiny_model.tuning_recipe`, changed with them).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import dagster as dg
import yaml

from prover_assets.assets.keys import DEMO_BASE_MODEL
from prover_assets.definitions import build_definitions
from prover_assets_tests.support import (
    SHARED_ENV,
    SHIPPED_TUNINGS,
    dagster_home,
    demo_run_config,
    full_demo_run_config,
    seed_shared_tunings,
)

CONFIGS = {"demo.yaml": full_demo_run_config, "mechanics size": demo_run_config}


def tune(name: str, folder: Path, store: Path) -> str:
    """Materialize the preflight (heavy jobs need one), the eval sets, the train pool and
    `demo_base_model` of one config."""
    raw = CONFIGS[name](folder / "data")
    raw["resources"]["experiment"]["config"]["spec"]["demo"]["shared_tunings"] = str(store)
    folder.mkdir(parents=True)
    config = folder / "config.yaml"
    config.write_text(yaml.safe_dump(raw))
    definitions = build_definitions(config)
    with dg.DagsterInstance.from_config(str(dagster_home(folder / "home"))) as instance:
        jobs = (("preflight", None), ("problems", None), ("full_round", [DEMO_BASE_MODEL]))
        for job, selection in jobs:
            result = definitions.resolve_job_def(job).execute_in_process(
                instance=instance, asset_selection=selection, raise_on_error=False
            )
            if not result.success:
                raise SystemExit(f"{name}: job {job} failed; see the log above")
    manifest = json.loads((folder / "data" / "demo_base_model" / "manifest.json").read_text())
    entry = manifest["shared_tuning"]
    print(f"{name}: {'copied' if entry['copied'] else 'tuned'} {entry['entry']}", flush=True)
    return Path(entry["entry"]).name


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="demo-tunings-") as scratch:
        os.environ[SHARED_ENV] = scratch  # the configs' own store; `tune` points them at `store`
        store = Path(scratch) / "store"
        seed_shared_tunings(store)
        used = {tune(name, Path(scratch) / str(index), store) for index, name in enumerate(CONFIGS)}
        shutil.rmtree(SHIPPED_TUNINGS, ignore_errors=True)
        SHIPPED_TUNINGS.mkdir(parents=True)
        for name in sorted(used):
            shutil.copytree(store / name, SHIPPED_TUNINGS / name)
            print(f"shipped {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
