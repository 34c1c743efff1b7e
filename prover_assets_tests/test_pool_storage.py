"""The instance storage of `dagster.yaml`: processes that claim a limit-1 pool at the same
instant get exactly one slot between them, and the lock that serialises claims is exclusive,
re-entrant and freed by the kernel when its holder dies. (With Dagster's plain SQLite storage
the first trial granted 2 or 3 slots in 2 of 3 runs on the 2-core development machine.)"""

import fcntl
import multiprocessing
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.execution.plan.instance_concurrency_context import InstanceConcurrencyContext
from dagster._core.storage.dagster_run import DagsterRun

from prover_assets.pool_storage import LOCK_FILE, PoolSafeSqliteEventLogStorage, SlotLock
from prover_assets_tests.support import ROOT, dagster_home

CLAIMERS, TRIALS = 6, 8


def free_to_other_holders(path: Path) -> bool:
    """Asks the kernel directly: can a fresh open file description take the flock now?"""
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(descriptor)
    return True


def claim_in_every_trial(home: str, barrier, results) -> None:
    """One run worker's claims, through the same context Dagster's executors use: per trial a
    fresh pool (each gets the default limit, 1), everyone released by the barrier at once."""
    os.environ["DAGSTER_HOME"] = home
    with dg.DagsterInstance.get() as instance:
        run = DagsterRun(job_name="claimers", run_id=str(uuid.uuid4()))
        context = InstanceConcurrencyContext(instance, run)
        for trial in range(TRIALS):
            barrier.wait(timeout=120)
            results.put((trial, context.claim(f"heavy_trial_{trial}", "heavy_step")))


@pytest.fixture
def home(tmp_path, monkeypatch):
    folder = dagster_home(tmp_path / "dagster_home")
    monkeypatch.setenv("DAGSTER_HOME", str(folder))
    return folder


def test_the_project_instance_uses_the_pool_safe_event_log(home):
    with dg.DagsterInstance.get() as instance:
        assert isinstance(instance.event_log_storage, PoolSafeSqliteEventLogStorage)
        assert instance.event_log_storage.slot_lock.path.parent.is_relative_to(home)


def test_an_instance_opened_from_its_folder_keeps_its_storage_there(home, tmp_path):
    elsewhere = dagster_home(tmp_path / "elsewhere")
    with dg.DagsterInstance.from_config(str(elsewhere)) as instance:
        assert instance.event_log_storage.slot_lock.path.parent.is_relative_to(elsewhere)
    assert (elsewhere / "history" / "runs" / "index.db").exists()
    assert not (home / "history").exists()


@pytest.mark.slow
def test_simultaneous_claims_on_a_limit_one_pool_grant_exactly_one_slot(home):
    with dg.DagsterInstance.get() as instance:
        instance.event_log_storage.get_pool_limits()  # the index database exists before the race
    spawn = multiprocessing.get_context("spawn")
    barrier, results = spawn.Barrier(CLAIMERS), spawn.Queue()
    claimers = [
        spawn.Process(target=claim_in_every_trial, args=(str(home), barrier, results))
        for _ in range(CLAIMERS)
    ]
    for claimer in claimers:
        claimer.start()
    granted = [0] * TRIALS
    for _ in range(CLAIMERS * TRIALS):
        trial, claimed = results.get(timeout=180)
        granted[trial] += claimed
    for claimer in claimers:
        claimer.join(timeout=60)
        assert claimer.exitcode == 0
    assert granted == [1] * TRIALS


def test_the_slot_lock_excludes_other_holders_and_nests_within_one(tmp_path):
    lock = SlotLock(tmp_path / LOCK_FILE)
    with lock.held():
        with lock.held():
            assert not free_to_other_holders(lock.path)
        assert not free_to_other_holders(lock.path)
    assert free_to_other_holders(lock.path)


@pytest.mark.slow
def test_a_slot_lock_held_by_a_process_killed_with_kill_9_is_free_at_once(tmp_path):
    path = tmp_path / LOCK_FILE
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path\n"
            "from prover_assets.pool_storage import SlotLock\n"
            "with SlotLock(Path(sys.argv[1])).held():\n"
            "    print('held', flush=True); time.sleep(600)\n",
            str(path),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    assert not free_to_other_holders(path)
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=30)
    assert free_to_other_holders(path)
