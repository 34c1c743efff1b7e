"""Long-running helper processes of the tests (`dagster dev`, the daemon), each in its own
session so that it and everything it starts are stopped by their exact process group."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


STOP_GRACE_S = 15


@contextlib.contextmanager
def process_group(
    command: Sequence[str | Path], *, cwd: Path, env: Mapping[str, str], log_path: Path
) -> Iterator[subprocess.Popen]:
    """Run `command` (output to `log_path`); on exit SIGTERM its group, SIGKILL after
    `STOP_GRACE_S` (noted in the log). `dagster dev` alone stops in about 2 s; after the
    session's runs it once sat out a 60 s grace at the end of the suite."""
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [str(part) for part in command],
            cwd=cwd,
            env=dict(env),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            yield process
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                log.write(f"\n[test] not ended {STOP_GRACE_S} s after SIGTERM: killed\n".encode())


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_until_serving(url: str, process: subprocess.Popen, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"dagster dev exited with {process.returncode}")
        with (
            contextlib.suppress(OSError),
            urllib.request.urlopen(f"{url}/server_info", timeout=5) as response,
        ):
            if response.status == 200:
                return
        time.sleep(1)
    raise TimeoutError(f"dagster dev did not serve {url} within {timeout} s")


@dataclass(frozen=True)
class DagsterDev:
    """A running `dagster dev`: its webserver's URL, its instance, the config its definitions
    were built from, and the environment a `dagster` command needs to reach it."""

    url: str
    home: Path
    config: Path
    data: Path
    env: dict[str, str]


@contextlib.contextmanager
def dagster_dev(tmp: Path, run_config: dict) -> Iterator[DagsterDev]:
    """`dagster dev` (webserver and daemon) on 127.0.0.1 with a fresh DAGSTER_HOME under `tmp`
    and the definitions built from `run_config`."""
    import dagster as dg

    from prover_assets_tests.support import dagster_home

    home = dagster_home(tmp / "dagster_home")
    with dg.DagsterInstance.from_config(str(home)):
        pass  # create the SQLite storage first: two processes creating it at once can race
    config = tmp / "run_config.yaml"
    config.write_text(yaml.safe_dump(run_config))
    port = free_port()
    env = {**os.environ, "DAGSTER_HOME": str(home), "PROVER_ASSETS_CONFIG": str(config)}
    command = [BIN / "dagster", "dev", "-h", "127.0.0.1", "-p", str(port)]
    with process_group(
        [*command, "-w", "workspace.yaml"], cwd=ROOT, env=env, log_path=tmp / "dagster-dev.log"
    ) as process:
        url = f"http://127.0.0.1:{port}"
        wait_until_serving(url, process)
        data = Path(run_config["resources"]["experiment"]["config"]["spec"]["data_root"])
        yield DagsterDev(url, home, config, data, env)


def until(condition, what: str, timeout_s: float = 120.0) -> None:
    """A bound on a hung process, never an expectation of speed."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout_s} s")
        time.sleep(0.05)


def start_pool_run(kind: str, folder: Path, home: Path, executor: str) -> subprocess.Popen:
    """A one-step run on pool `heavy` (`prover_assets_tests.pool_jobs`: `hold` holds the slot
    until `folder`/release exists, `wait` waits for it) on the instance of `home`."""
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    return subprocess.Popen(
        [sys.executable, "-m", "prover_assets_tests.pool_jobs", kind, str(folder), executor],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def pool_waiting_steps(home: Path, pool: str = "heavy") -> int:
    """The steps of the instance of `home` waiting for a slot of `pool`."""
    import dagster as dg

    with dg.DagsterInstance.from_config(str(home)) as instance:
        info = instance.event_log_storage.get_concurrency_info(pool)
    return sum(1 for step in info.pending_steps if step.assigned_timestamp is None)


@contextlib.contextmanager
def dagster_webserver(tmp: Path, config: Path) -> Iterator[str]:
    """`dagster-webserver` alone (no daemon: nothing here launches) on 127.0.0.1 with a fresh
    DAGSTER_HOME under `tmp` and the definitions built from the config file `config`; its URL."""
    from prover_assets_tests.support import dagster_home

    home = dagster_home(tmp / "dagster_home")
    env = {**os.environ, "DAGSTER_HOME": str(home), "PROVER_ASSETS_CONFIG": str(config)}
    port = free_port()
    command = [BIN / "dagster-webserver", "-h", "127.0.0.1", "-p", str(port)]
    with process_group(
        [*command, "-w", "workspace.yaml"], cwd=ROOT, env=env, log_path=tmp / "webserver.log"
    ) as process:
        url = f"http://127.0.0.1:{port}"
        wait_until_serving(url, process)
        yield url


def launch(dev: DagsterDev, job: str, config: Path | None = None) -> subprocess.CompletedProcess:
    """`dagster job launch -w workspace.yaml -j <job> -c <config>` as a user runs it against
    `dev`'s instance (its daemon runs what is queued)."""
    command = [BIN / "dagster", "job", "launch", "-w", "workspace.yaml", "-j", job]
    command += ["-c", str(config or dev.config)]
    return subprocess.run(
        [str(part) for part in command],
        cwd=ROOT,
        env=dev.env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def launch_and_wait(dev: DagsterDev, job: str, timeout: float = 1800):
    """Launch `job` and wait for its run to end (a generous bound on a hung run, not a speed
    expectation); the run."""
    import dagster as dg

    finished = {
        dg.DagsterRunStatus.SUCCESS,
        dg.DagsterRunStatus.FAILURE,
        dg.DagsterRunStatus.CANCELED,
    }
    with dg.DagsterInstance.from_config(str(dev.home)) as instance:
        before = {run.run_id for run in instance.get_runs()}
        launched = launch(dev, job)
        assert launched.returncode == 0, launched.stdout[-3000:] + launched.stderr[-3000:]
        (run_id,) = {run.run_id for run in instance.get_runs()} - before
        deadline = time.monotonic() + timeout
        while (run := instance.get_run_by_id(run_id)).status not in finished:
            assert time.monotonic() < deadline, f"run {run_id} of {job} still {run.status}"
            time.sleep(0.5)
        return run


# The webserver's GraphQL API as the UI drives it.
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
    """The `data` of the webserver's answer to a GraphQL query, as the UI sends it."""
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


def launchpad_scaffold(url: str, job: str) -> dict:
    """The run config the Launchpad scaffolds for `job` (`rootDefaultYaml`: the schema's
    defaults, null values dropped)."""
    answer = graphql(url, DEFAULT_YAML, {"selector": {**SELECTOR, "pipelineName": job}})
    schema = answer["runConfigSchemaOrError"]
    assert schema["__typename"] == "RunConfigSchema", schema
    return yaml.safe_load(schema["rootDefaultYaml"])


def launch_from_launchpad(url: str, job: str, run_config: dict) -> dict:
    """The answer of the launch mutation the Launchpad sends for `job` with `run_config`."""
    params = {"selector": {**SELECTOR, "pipelineName": job}, "runConfigData": run_config}
    return graphql(url, LAUNCH, {"executionParams": params})["launchPipelineExecution"]


def wait_for_run(url: str, run_id: str, timeout: float = 1400) -> str:
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
