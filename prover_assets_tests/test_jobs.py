"""`dagster job launch -w workspace.yaml -j baseline -c <config>` as a user runs it: with the
project's dagster.yaml (runs queue until a daemon takes them), a daemon in its own process
group, and the same command launched twice: the second run reuses every finished asset."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest
import yaml

from prover_assets.definitions import build_definitions
from prover_assets_tests.conftest import ROOT, dagster_home, demo_run_config
from prover_assets_tests.processes import process_group

pytestmark = pytest.mark.slow  # a whole loop

BIN = Path(sys.executable).parent
FINISHED = {dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED}


@pytest.fixture(scope="module")
def user_setup(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("launch")
    home = dagster_home(tmp / "dagster_home")
    config = tmp / "demo.yaml"
    config.write_text(yaml.safe_dump(demo_run_config(tmp / "data")))
    env = {**os.environ, "DAGSTER_HOME": str(home), "PROVER_ASSETS_CONFIG": str(config)}
    with dg.DagsterInstance.from_config(str(home)):
        pass  # create the SQLite storage first: two processes creating it at once can race
    daemon = [BIN / "dagster-daemon", "run", "-w", "workspace.yaml"]
    with process_group(daemon, cwd=ROOT, env=env, log_path=tmp / "daemon.log"):
        setup = {"home": home, "config": config, "env": env, "data": tmp / "data"}
        setup["refused"] = launch(setup, "baseline")  # before any preflight
        setup["preflight"] = launch_and_wait(setup, "preflight")
        yield setup


def launch(setup: dict, job: str) -> subprocess.CompletedProcess:
    command = [
        BIN / "dagster",
        "job",
        "launch",
        "-w",
        "workspace.yaml",
        "-j",
        job,
        "-c",
        str(setup["config"]),
    ]
    return subprocess.run(
        command, cwd=ROOT, env=setup["env"], capture_output=True, text=True, timeout=300
    )


def launch_and_wait(setup: dict, job: str, timeout: float = 600) -> dg.DagsterRun:
    launched = launch(setup, job)
    assert launched.returncode == 0, launched.stdout[-3000:] + launched.stderr[-3000:]
    deadline = time.monotonic() + timeout
    with dg.DagsterInstance.from_config(str(setup["home"])) as instance:
        while True:
            (run,) = instance.get_runs(limit=1)
            if run.status in FINISHED:
                return run
            assert time.monotonic() < deadline, f"run {run.run_id} still {run.status}"
            time.sleep(2)


def materializations(setup: dict, run_id: str) -> dict[str, dict]:
    with dg.DagsterInstance.from_config(str(setup["home"])) as instance:
        records = instance.get_records_for_run(
            run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION
        ).records
        return {
            r.event_log_entry.dagster_event.asset_key.to_user_string(): {
                name: value.value
                for name, value in r.event_log_entry.asset_materialization.metadata.items()
            }
            for r in records
        }


def test_a_heavy_job_launched_before_any_preflight_is_refused_saying_what_to_run(user_setup):
    refused = user_setup["refused"]
    assert refused.returncode != 0
    output = refused.stdout + refused.stderr
    assert "job 'baseline' refused: no preflight has run for this config" in output
    assert "make preflight" in output
    with dg.DagsterInstance.from_config(str(user_setup["home"])) as instance:
        assert [run.job_name for run in instance.get_runs()] == ["preflight"]  # none for it


def test_the_preflight_job_launched_from_the_cli_passes_with_its_report(user_setup):
    run = user_setup["preflight"]
    assert run.status == dg.DagsterRunStatus.SUCCESS
    (metadata,) = materializations(user_setup, run.run_id).values()
    assert metadata["passed"] is True
    assert metadata["report"].startswith("# Preflight PASSED")
    assert metadata["figures"]["tokens_per_s"] > 0


def test_baseline_launch_then_relaunch_resumes_without_recomputing(user_setup):
    first = launch_and_wait(user_setup, "baseline")
    assert first.status == dg.DagsterRunStatus.SUCCESS
    made = materializations(user_setup, first.run_id)
    expected = {
        key.to_user_string()
        for key in build_definitions(user_setup["config"])
        .resolve_job_def("baseline")
        .asset_layer.executable_asset_keys
    }
    assert set(made) == expected
    generations = user_setup["data"] / "generations/minif2f/baseline/c256/generations.jsonl"
    before = generations.read_bytes()

    second = launch_and_wait(user_setup, "baseline")
    assert second.status == dg.DagsterRunStatus.SUCCESS and second.run_id != first.run_id
    again = materializations(user_setup, second.run_id)
    assert set(again) == expected
    assert {key: meta["reused_complete_output"] for key, meta in again.items()} == dict.fromkeys(
        expected, True
    )
    assert generations.read_bytes() == before
    manifest = json.loads((generations.parent / "manifest.json").read_text())
    assert manifest["counts"]["rows"] == len(before.splitlines())
