"""The Launchpad's path, through the webserver's GraphQL API as the UI drives it: each job's
run config is the one the Launchpad scaffolds (`rootDefaultYaml`: the schema's defaults, with
null values dropped), launched unedited; and a config with placeholders is refused at launch,
naming every one."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import pytest
import yaml

from prover_assets.config import placeholders
from prover_assets.definitions import build_definitions
from prover_assets_tests.conftest import CONFIGS

pytestmark = pytest.mark.slow

LOCATION = "prover_assets.definitions"
SELECTOR = {"repositoryLocationName": LOCATION, "repositoryName": "__repository__"}
DEFAULT_YAML = """
query Scaffold($selector: PipelineSelector!) {
  runConfigSchemaOrError(selector: $selector) {
    __typename
    ... on RunConfigSchema { rootDefaultYaml }
  }
}"""
LAUNCH = """
mutation Launch($executionParams: ExecutionParams!) {
  launchPipelineExecution(executionParams: $executionParams) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on RunConfigValidationInvalid { errors { message } }
    ... on PythonError { message cause { message } }
  }
}"""
STATUS = """
query Status($runId: ID!) {
  runOrError(runId: $runId) { __typename ... on Run { status } }
}"""
FAILURES = """
query Failures($runId: ID!) {
  logsForRun(runId: $runId) {
    ... on EventConnection {
      events {
        ... on ExecutionStepFailureEvent { stepKey error { message } }
        ... on RunFailureEvent { message }
      }
    }
  }
}"""


def graphql(url: str, query: str, variables: dict) -> dict:
    request = urllib.request.Request(
        f"{url}/graphql",
        data=json.dumps({"query": query, "variables": variables}).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            answer = json.loads(response.read())
    except urllib.error.HTTPError as exc:  # a PythonError answer comes with status 500
        answer = json.loads(exc.read())
    assert "errors" not in answer, answer
    return answer["data"]


def scaffold(url: str, job: str) -> dict:
    answer = graphql(url, DEFAULT_YAML, {"selector": {**SELECTOR, "pipelineName": job}})
    schema = answer["runConfigSchemaOrError"]
    assert schema["__typename"] == "RunConfigSchema", schema
    return yaml.safe_load(schema["rootDefaultYaml"])


def launch(url: str, job: str, run_config: dict) -> dict:
    params = {"selector": {**SELECTOR, "pipelineName": job}, "runConfigData": run_config}
    return graphql(url, LAUNCH, {"executionParams": params})["launchPipelineExecution"]


def wait_for(url: str, run_id: str, timeout: float = 1400) -> str:
    """The run's final status, with its failure events' messages when it did not succeed."""
    deadline = time.monotonic() + timeout
    while True:
        status = graphql(url, STATUS, {"runId": run_id})["runOrError"]["status"]
        if status in ("FAILURE", "CANCELED"):
            events = graphql(url, FAILURES, {"runId": run_id})["logsForRun"]["events"]
            return f"{status}: {[event for event in events if event]}"
        if status == "SUCCESS":
            return status
        assert time.monotonic() < deadline, f"run {run_id} still {status}"
        time.sleep(0.5)


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


# full_round first: the jobs after it reuse what it materialized, as a user's relaunch does. The
# limit bounds a hung run (a whole round, alone on a loaded machine), not its speed.
@pytest.mark.timeout(1500)
@pytest.mark.parametrize("job", sorted(JOBS, key=lambda name: name != "full_round"))
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
