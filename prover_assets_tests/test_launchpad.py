"""The Launchpad's path, through the webserver's GraphQL API as the UI drives it: each job's
run config is the one the Launchpad scaffolds (`rootDefaultYaml`: the schema's defaults, with
null values dropped), launched unedited; and a config with placeholders is refused at launch,
naming every one."""

from __future__ import annotations

import pytest
import yaml

from prover_assets.config import placeholders
from prover_assets.definitions import build_definitions
from prover_assets_tests.conftest import CONFIGS
from prover_assets_tests.processes import launch_from_launchpad as launch
from prover_assets_tests.processes import launchpad_scaffold as scaffold
from prover_assets_tests.processes import wait_for_run as wait_for

pytestmark = pytest.mark.slow


def nulls(value) -> int:
    if isinstance(value, dict):
        return sum(v is None or nulls(v) for v in value.values())
    if isinstance(value, list):
        return sum(nulls(v) for v in value)
    return 0


@pytest.fixture(scope="module")
def webserver(demo_dagster_dev, demo_preflight_run):
    """The session's `dagster dev`, after the preflight its heavy jobs need."""
    return demo_dagster_dev.url


JOBS = [job.name for job in build_definitions(CONFIGS / "demo.yaml").jobs]


def test_the_demo_config_holds_nulls_that_the_launchpad_drops():
    demo = yaml.safe_load((CONFIGS / "demo.yaml").read_text())
    assert nulls(demo) >= 2  # generation.top_k and training.pad_token_id: what was dropped


def test_the_preflight_launched_unedited_from_the_launchpad_succeeded(
    webserver, demo_preflight_run
):
    # The session's preflight is this launch (conftest.demo_preflight_run), made once for all
    # the heavy jobs below rather than once more here.
    assert nulls(scaffold(webserver, "preflight")) == 0
    assert demo_preflight_run.job_name == "preflight"
    assert demo_preflight_run.run_config == scaffold(webserver, "preflight")
    assert demo_preflight_run.status.value == "SUCCESS"


# full_round first: the jobs after it reuse what it materialized, as a user's relaunch does. The
# limit bounds a hung run (a whole round, alone on a loaded machine), not its speed.
@pytest.mark.timeout(1500)
@pytest.mark.parametrize(
    "job", sorted((j for j in JOBS if j != "preflight"), key=lambda name: name != "full_round")
)
def test_every_job_launched_unedited_from_the_launchpad_succeeds(webserver, job):
    run_config = scaffold(webserver, job)
    assert nulls(run_config) == 0
    launched = launch(webserver, job, run_config)
    assert launched["__typename"] == "LaunchRunSuccess", launched
    assert wait_for(webserver, launched["run"]["runId"]) == "SUCCESS"


def refusal(launched: dict) -> str:
    """The message of a launch the launch-time validation refused: Dagster's own config error
    (raised as the code server builds the plan), not an unexpected error of user code, and no
    stack trace of ours beneath it."""
    assert launched["__typename"] == "PythonError", launched
    assert launched["cause"] is None, launched
    message = launched["message"]
    assert message.startswith("dagster._core.errors.DagsterInvalidConfigError: Error in config")
    return message


def test_a_launch_with_placeholders_is_refused_naming_every_one(webserver):
    p2 = yaml.safe_load((CONFIGS / "p2.yaml").read_text())
    expected = placeholders(p2)
    assert len(expected) == 11  # data_root, 4 shard paths and sha256s, the model, the workspace
    launched = launch(webserver, "baseline", p2)
    message = refusal(launched)
    assert f"{len(expected)} placeholder values" in message
    listed = message.split("placeholder values", 1)[1].splitlines()[1:]
    assert [line.strip() for line in listed if line.strip()][: len(expected)] == expected


def test_a_heavy_job_whose_config_has_no_preflight_is_refused_at_launch(webserver):
    run_config = scaffold(webserver, "baseline")
    run_config["resources"]["experiment"]["config"]["spec"]["generation"]["temperature"] = 0.7
    message = refusal(launch(webserver, "baseline", run_config))
    assert "job 'baseline' refused: no preflight has run for this config" in message
    assert "The last passing preflight" in message  # the webserver's, for another config
