"""Heavy-pool safety on a real DagsterInstance (SQLite, temporary DAGSTER_HOME): two runs never
overlap in pool `heavy`, and a run killed with kill -9 is reaped so that it frees its slot."""

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.definitions.reconstruct import ReconstructableRepository
from dagster._grpc.types import ExecuteRunArgs

from prover_assets.sensors import process_alive_since, reap_dead_runs, sweep
from prover_assets_tests.support import ROOT, dagster_home

MODULE = "prover_assets_tests.heavy_defs"


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A real instance: the project's dagster.yaml (pool heavy, one slot per op)."""
    folder = dagster_home(tmp_path / "dagster_home")
    monkeypatch.setenv("DAGSTER_HOME", str(folder))
    monkeypatch.setenv("HEAVY_LOG", str(tmp_path / "heavy.jsonl"))
    return folder


def launch(instance: dg.DagsterInstance, job_name: str, env: dict) -> tuple[str, subprocess.Popen]:
    """Create a run and start its run worker exactly as Dagster's default launcher does
    (`dagster api execute_run`), as a separate process."""
    repository = ReconstructableRepository.for_module(MODULE, "defs", working_directory=str(ROOT))
    job = repository.get_reconstructable_job(job_name)
    definition = job.get_definition()
    run = instance.create_run_for_job(
        job_def=definition,
        job_code_origin=job.get_python_origin(),
        asset_selection=frozenset(definition.asset_layer.executable_asset_keys),
    )
    args = ExecuteRunArgs(
        job_origin=job.get_python_origin(), run_id=run.run_id, instance_ref=instance.get_ref()
    )
    env = {**env, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"}
    process = subprocess.Popen(
        args.get_command_args(),
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    return run.run_id, process


def events(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def wait_until(predicate, timeout=120.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise TimeoutError


@pytest.mark.slow
def test_two_concurrent_runs_never_overlap_in_the_heavy_pool(home, tmp_path):
    env = {**os.environ, "HEAVY_SECONDS": "3"}
    with dg.DagsterInstance.get() as instance:
        (_, first), (_, second) = launch(instance, "job_a", env), launch(instance, "job_b", env)
        assert first.wait(timeout=180) == 0
        assert second.wait(timeout=180) == 0
    spans = {}
    for event in events(tmp_path / "heavy.jsonl"):
        spans.setdefault(event["asset"], {})[event["event"]] = event["t"]
    (a_start, a_end), (b_start, b_end) = (
        (spans["heavy_a"]["start"], spans["heavy_a"]["end"]),
        (spans["heavy_b"]["start"], spans["heavy_b"]["end"]),
    )
    assert a_end <= b_start or b_end <= a_start, spans


def overlaps(one: dict, other: dict) -> bool:
    return one["start"] < other["end"] and other["start"] < one["end"]


@pytest.mark.slow
def test_in_the_overlapped_schedule_a_lean_step_runs_beside_a_gpu_step_never_two_gpu_steps(
    home, tmp_path
):
    with dg.DagsterInstance.get() as instance:
        _, run = launch(instance, "overlapped", {**os.environ, "HEAVY_SECONDS": "4"})
        assert run.wait(timeout=240) == 0
    spans: dict[str, dict] = {}
    for event in events(tmp_path / "heavy.jsonl"):
        spans.setdefault(event["asset"], {})[event["event"]] = event["t"]
    assert not overlaps(spans["gpu_a"], spans["gpu_b"]), spans
    assert overlaps(spans["lean_a"], spans["gpu_a"]) or overlaps(spans["lean_a"], spans["gpu_b"])


@pytest.mark.slow
def test_a_run_killed_with_kill_9_is_reaped_and_frees_its_slot(home, tmp_path):
    log = tmp_path / "heavy.jsonl"
    with dg.DagsterInstance.get() as instance:
        victim_id, victim = launch(instance, "job_a", {**os.environ, "HEAVY_SECONDS": "600"})
        wait_until(lambda: any(e["asset"] == "heavy_a" for e in events(log)))
        os.killpg(victim.pid, signal.SIGKILL)
        victim.wait()
        assert (
            instance.get_run_by_id(victim_id).status == dg.DagsterRunStatus.STARTED
        )  # Dagster cannot see it
        waiting_id, waiting = launch(instance, "job_b", {**os.environ, "HEAVY_SECONDS": "1"})
        time.sleep(8)
        assert not any(e["asset"] == "heavy_b" for e in events(log)), (
            "the dead run's slot must still block"
        )
        assert reap_dead_runs(instance) == [victim_id]
        assert instance.get_run_by_id(victim_id).status == dg.DagsterRunStatus.FAILURE
        assert waiting.wait(timeout=180) == 0
        assert instance.get_run_by_id(waiting_id).status == dg.DagsterRunStatus.SUCCESS


@pytest.mark.slow
def test_live_runs_are_left_alone(home, tmp_path):
    log = tmp_path / "heavy.jsonl"
    with dg.DagsterInstance.get() as instance:
        run_id, process = launch(instance, "job_a", {**os.environ, "HEAVY_SECONDS": "6"})
        wait_until(lambda: any(e["asset"] == "heavy_a" for e in events(log)))
        assert reap_dead_runs(instance) == []
        assert process.wait(timeout=120) == 0
        assert instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.SUCCESS


def test_a_reused_pid_does_not_pass_for_the_dead_process():
    assert process_alive_since(os.getpid(), time.time())
    assert not process_alive_since(os.getpid(), 0.0)  # this process started long after "0"


def started_run_whose_process_is_gone(
    instance: dg.DagsterInstance, tags: dict[str, str] | None = None
) -> str:
    """A run left STARTED by a run worker that no longer exists, as kill -9 leaves one."""
    import uuid

    from dagster._core.events import EngineEventData
    from dagster._core.storage.dagster_run import DagsterRun, DagsterRunStatus

    worker = subprocess.Popen([sys.executable, "-c", "pass"])
    worker.wait()
    run = instance.add_run(
        DagsterRun(
            job_name="j", run_id=str(uuid.uuid4()), status=DagsterRunStatus.STARTED, tags=tags
        )
    )
    instance.report_engine_event(
        "Started process for run", run, EngineEventData({"pid": dg.MetadataValue.int(worker.pid)})
    )
    return run.run_id


def test_a_run_of_this_hosts_launcher_whose_process_is_gone_is_reaped():
    with dg.instance_for_test() as instance:
        run_id = started_run_whose_process_is_gone(instance)
        assert reap_dead_runs(instance) == [run_id]
        assert instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.FAILURE


def test_two_hosts_sharing_an_instance_each_reap_their_own_dead_run_never_the_others():
    here = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]
    there = "0badc0de"
    with dg.instance_for_test() as instance:
        ours = started_run_whose_process_is_gone(instance, {"prover_assets/host": here})
        theirs = started_run_whose_process_is_gone(instance, {"prover_assets/host": there})
        assert reap_dead_runs(instance) == [ours]  # this host's reaper
        assert instance.get_run_by_id(theirs).status == dg.DagsterRunStatus.STARTED
        assert reap_dead_runs(instance, host=there) == [theirs]  # the other host's


def test_under_a_launcher_of_other_hosts_no_run_is_judged_by_a_pid_here():
    other_hosts = {"module": "dagster._core.test_utils", "class": "MockedRunLauncher"}
    with dg.instance_for_test(overrides={"run_launcher": other_hosts}) as instance:
        run_id = started_run_whose_process_is_gone(instance)
        done = sweep(instance, None)
        assert done.reaped == []
        assert instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.STARTED
    assert done.describe().startswith(
        "marked failed: none (the reaper is off: runs start through MockedRunLauncher, as "
        "processes of other hosts: their launcher's run monitoring judges them, not a pid here)"
    )
