"""The null control, run as `make demo-null` runs it (`python -m prover_assets.demo` on
configs/demo-null.yaml) at the size of the tests of its mechanics: no effect detected, and the
`eta` asset's total beside the round's measured time.

The size is the mechanics size (`mechanics_size`, the config's own rule kept) and not the
shipped 24 problems: under `seeded_theorems` which problems can be solved is fixed by a hash of
the theorem's name before any model runs, so the decision does not depend on how many problems
there are, and the `eta` is judged against the round it estimates, whatever its size. What the
shipped size alone shows, that the planted effect is detected at 24 problems, is the positive
control's (test_demo.py)."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys

import dagster as dg
import pytest
import yaml

from prover_assets_tests.seams import report_folder
from prover_assets_tests.support import dagster_home, mechanics_size, shipped_config

# The whole demo loop: a bound of its own on a hung loop, not an expectation of speed.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(2700)]


@pytest.fixture(scope="module")
def null_control(tmp_path_factory):
    """`make demo-null`: the demo's loop in one `full_round` run, acceptance independent of
    content, then the `eta` asset, as `python -m prover_assets.demo` runs them."""
    tmp = tmp_path_factory.mktemp("null")
    config = tmp / "demo-null.yaml"
    raw = mechanics_size(shipped_config(tmp / "data", "demo-null.yaml"), planted_rule=True)
    config.write_text(yaml.safe_dump(raw))
    home = dagster_home(tmp / "dagster_home")
    env = {**os.environ, "DAGSTER_HOME": str(home), "PROVER_ASSETS_CONFIG": str(config)}
    done = subprocess.run(
        [sys.executable, "-m", "prover_assets.demo"],
        env=env,
        capture_output=True,
        text=True,
        timeout=2400,
    )
    return {"root": tmp / "data", "home": home, "done": done}


def test_the_null_control_detects_no_improvement(null_control):
    assert null_control["done"].returncode == 0, null_control["done"].stdout[-3000:]
    folder = report_folder(null_control["root"])
    (comparison,) = json.loads((folder / "summary.json").read_text())["comparisons"]
    assert comparison["decision"] == "no detectable improvement"
    text = (folder / "report.md").read_text()
    assert "no effect is planted" in text


def test_the_eta_of_the_demo_round_is_within_half_again_of_its_measured_time(null_control):
    assert null_control["done"].returncode == 0, null_control["done"].stdout[-3000:]
    with dg.DagsterInstance.from_config(str(null_control["home"])) as instance:
        (run,) = instance.get_run_records(dg.RunsFilter(job_name="full_round"))
        measured_s = run.end_time - run.start_time
        eta = instance.get_latest_materialization_event(dg.AssetKey("eta"))
        metadata = eta.asset_materialization.metadata
    estimated_s = metadata["total_hours_central"].value * 3600
    measured, of = metadata["inputs_measured"].value.split(" of ")
    assert measured == of  # every input measured by the round itself, no prior left
    off_by = abs(math.log(estimated_s / measured_s))
    assert off_by <= math.log(1.5), f"eta {estimated_s:.0f} s, measured {measured_s:.0f} s"
    assert re.search(
        r"ETA of a full round .* this round took \d+:\d\d:\d\d", null_control["done"].stdout
    )
