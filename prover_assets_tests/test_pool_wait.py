"""A run waiting for a pool slot costs no CPU and stops at once when terminated, leaving the
run that holds the slot untouched (prover_assets/pool_storage.py, `wait_for_slots_asleep`).
Before, Dagster's in-process executor spun a core while it waited and ignored the request."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import psutil
import pytest

from prover_assets_tests.conftest import ROOT, dagster_home

WINDOW_S = 4.0


def start(kind: str, folder: Path, home: Path, executor: str) -> subprocess.Popen:
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    return subprocess.Popen(
        [sys.executable, "-m", "prover_assets_tests.pool_jobs", kind, str(folder), executor],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def until(condition, what: str, timeout_s: float = 120.0) -> None:
    """A bound on a hung process, never an expectation of speed."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout_s} s")
        time.sleep(0.05)


def waiting_steps(home: Path) -> int:
    with dg.DagsterInstance.from_config(str(home)) as instance:
        info = instance.event_log_storage.get_concurrency_info("heavy")
    return sum(1 for step in info.pending_steps if step.assigned_timestamp is None)


def cpu_s(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


@pytest.mark.slow  # two Dagster processes
@pytest.mark.parametrize("executor", ["in_process", "multiprocess"])
def test_a_run_waiting_for_a_slot_sleeps_and_stops_on_sigterm_leaving_the_holder_be(
    tmp_path, executor
):
    home = dagster_home(tmp_path / "home")
    holder = start("hold", tmp_path, home, executor)
    waiter = None
    try:
        until(lambda: (tmp_path / "holding").exists(), "the holder taking the slot")
        waiter = start("wait", tmp_path, home, executor)
        until(lambda: waiting_steps(home) == 1, "the second run waiting for the slot")
        watched = psutil.Process(waiter.pid)
        before = cpu_s(watched)
        time.sleep(WINDOW_S)
        spent = cpu_s(watched) - before
        # Asleep between claim checks: a few ms a second. A loop that never sleeps spends the
        # whole window (a core), however loaded the machine, minus what others take from it.
        assert spent < 0.25 * WINDOW_S, f"{spent:.2f} s of CPU in {WINDOW_S} s of waiting"
        waiter.send_signal(signal.SIGTERM)
        waiter.wait(timeout=60)
        assert not (tmp_path / "ran").exists()
        assert waiting_steps(home) == 0  # its pending claim freed with it
        assert holder.poll() is None and not (tmp_path / "hold-done").exists()
        (tmp_path / "release").touch()
        assert holder.wait(timeout=120) == 0
        assert (tmp_path / "hold-done").read_text() == "success"
    finally:
        for process in (holder, waiter):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
