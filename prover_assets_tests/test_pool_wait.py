"""A run waiting for a pool slot costs no CPU and stops at once when terminated, leaving the
run that holds the slot untouched (prover_assets/pool_storage.py, `wait_for_slots_asleep`).
Before, Dagster's in-process executor spun a core while it waited and ignored the request."""

from __future__ import annotations

import signal
import time

import psutil
import pytest

from prover_assets_tests.processes import pool_waiting_steps, start_pool_run, until
from prover_assets_tests.support import dagster_home

WINDOW_S = 4.0


def cpu_s(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


@pytest.mark.slow  # two Dagster processes
@pytest.mark.parametrize("executor", ["in_process", "multiprocess"])
def test_a_run_waiting_for_a_slot_sleeps_and_stops_on_sigterm_leaving_the_holder_be(
    tmp_path, executor
):
    home = dagster_home(tmp_path / "home")
    holder = start_pool_run("hold", tmp_path, home, executor)
    waiter = None
    try:
        until(lambda: (tmp_path / "holding").exists(), "the holder taking the slot")
        waiter = start_pool_run("wait", tmp_path, home, executor)
        until(lambda: pool_waiting_steps(home) == 1, "the second run waiting for the slot")
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
        assert pool_waiting_steps(home) == 0  # its pending claim freed with it
        assert holder.poll() is None and not (tmp_path / "hold-done").exists()
        (tmp_path / "release").touch()
        assert holder.wait(timeout=120) == 0
        assert (tmp_path / "hold-done").read_text() == "success"
    finally:
        for process in (holder, waiter):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
