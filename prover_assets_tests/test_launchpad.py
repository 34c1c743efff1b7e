"""The Launchpad's path, through the webserver's GraphQL API as the UI drives it: each job's
run config is the one the Launchpad scaffolds (`rootDefaultYaml`: the schema's defaults, with
null values dropped), launched unedited; and a config with placeholders is refused at launch,
naming every one; and a job launched after a gate failed in an earlier run stops at its first
step, the asset's page showing the check that holds it."""

from __future__ import annotations

import pytest
import yaml

from prover_assets.config import placeholders
from prover_assets.definitions import build_definitions
from prover_assets.records import MANIFEST_NAME
from prover_assets_tests.output_faults import repeated_micro_step, rewrite, rows
from prover_assets_tests.processes import LAUNCH, SELECTOR, graphql
from prover_assets_tests.processes import launch_from_launchpad as launch
from prover_assets_tests.processes import launchpad_scaffold as scaffold
from prover_assets_tests.processes import wait_for_run as wait_for
from prover_assets_tests.support import CONFIGS

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


ASSET_CHECKS = """
query AssetChecks($assetKey: AssetKeyInput!) {
  assetNodeOrError(assetKey: $assetKey) {
    ... on AssetNode {
      jobNames
      assetChecksOrError {
        ... on AssetChecks { checks { name executionForLatestMaterialization { runId status } } }
      }
    }
  }
}"""


def asset_page(url: str, path: list[str]) -> dict:
    """What the asset's page shows: its jobs, and each check's execution on its latest output."""
    return graphql(url, ASSET_CHECKS, {"assetKey": {"path": path}})["assetNodeOrError"]


def execute_check(url: str, path: list[str], check: str) -> dict:
    """The launch the asset page's check "Execute" button sends (Dagster's ExecuteChecksButton:
    the asset's first job, that check alone, an empty run config)."""
    selector = {
        **SELECTOR,
        "pipelineName": asset_page(url, path)["jobNames"][0],
        "assetSelection": [],
        "assetCheckSelection": [{"assetKey": {"path": path}, "name": check}],
    }
    params = {"selector": selector, "runConfigData": {}, "mode": "default"}
    return graphql(url, LAUNCH, {"executionParams": params})["launchPipelineExecution"]


def test_a_job_launched_after_a_gate_failed_stops_at_its_first_step_and_the_asset_shows_the_check(
    webserver, demo_dagster_dev
):
    # after the jobs above: the checkpoint exists, judged; a faulty resume's order log is put in
    # its place (manifest rewritten to match), as it would have been left, then put back
    checkpoint = demo_dagster_dev.data / "sft_checkpoint"
    kept = {name: (checkpoint / name).read_bytes() for name in ("data_order.jsonl", MANIFEST_NAME)}
    try:
        rewrite(checkpoint, "data_order.jsonl", rows(repeated_micro_step))
        judged = execute_check(webserver, ["sft_checkpoint"], "data_order")
        assert judged["__typename"] == "LaunchRunSuccess", judged
        judged_run = judged["run"]["runId"]
        # a blocking check that fails fails its run too, as Dagster reports it
        judged_outcome = wait_for(webserver, judged_run)
        assert judged_outcome.startswith("FAILURE"), judged_outcome
        assert "blocking asset check failed" in judged_outcome, judged_outcome
        launched = launch(webserver, "candidate_eval", scaffold(webserver, "candidate_eval"))
        outcome = wait_for(webserver, launched["run"]["runId"])
        checks = asset_page(webserver, ["sft_checkpoint"])["assetChecksOrError"]["checks"]
    finally:
        for name, data in kept.items():
            (checkpoint / name).write_bytes(data)
    # The shared server as this test found it: the restored checkpoint judged again, so that a
    # later test's jobs are not refused by the failure judged here, whatever order they run in.
    rejudged = execute_check(webserver, ["sft_checkpoint"], "data_order")
    assert wait_for(webserver, rejudged["run"]["runId"]).startswith("SUCCESS")
    assert outcome.startswith("FAILURE"), outcome
    assert "refusing to read" in outcome, outcome
    assert f"sft_checkpoint: check `data_order` failed in run {judged_run}" in outcome, outcome
    (shown,) = [c["executionForLatestMaterialization"] for c in checks if c["name"] == "data_order"]
    assert shown == {"runId": judged_run, "status": "FAILED"}
