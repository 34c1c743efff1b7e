"""The Lean workers on a host: their memory (their own per process, mapped pages once) and how
many the host holds."""

import pytest

from prover_assets.config import LocalLeanSettings
from prover_assets.verify.sizing import HostShape, lean_host_mb, size_workers, sized_workers


@pytest.mark.parametrize(
    ("workers", "spare", "anonymous_mb", "mapped_mb", "host_mb"),
    [
        (8, True, 2000.0, 5000.0, 23000.0),  # 9 processes x 2000 + 5000 once
        (8, False, 2000.0, 5000.0, 21000.0),
        (1, True, 100.0, 50.0, 250.0),
        (0, True, 2000.0, 5000.0, 0.0),  # a Lean server: no REPL on this host
    ],
)
def test_the_host_holds_each_processes_own_memory_and_the_mapped_pages_once(
    workers, spare, anonymous_mb, mapped_mb, host_mb
):
    assert (
        lean_host_mb(workers, spare=spare, anonymous_mb=anonymous_mb, mapped_mb=mapped_mb)
        == host_mb
    )


@pytest.mark.parametrize(
    ("cores", "memory_gib", "workers", "by_cores", "by_memory"),
    [
        # 96 cores - 18 = 78; (0.9 x 1 TiB - 56 GiB - 5 GiB) / 8 GiB = 107.6 -> 107 - spare = 106
        (96, 1024, 78, 78, 106),
        # 96 cores, 128 GiB: (115.2 - 56 - 5) / 8 = 6.8 -> 6 - spare = 5: memory bounds
        (96, 128, 5, 78, 5),
        # a box too small for any: still one worker (the preflight's host check says so)
        (8, 64, 1, -10, -2),
    ],
)
def test_auto_workers_take_the_smaller_of_the_cores_and_the_memory_left(
    cores, memory_gib, workers, by_cores, by_memory
):
    sizing = size_workers(
        HostShape(cores, memory_gib * 1024.0),
        reserve_cores=18,
        reserve_mb=56 * 1024,
        per_worker_mb=8192,
        mapped_mb=5120,
        spare=True,
    )
    assert (sizing.workers, sizing.by_cores, sizing.by_memory) == (workers, by_cores, by_memory)


def lean_settings(**fields):
    return LocalLeanSettings(workspace="/w", **fields)


def test_pinned_workers_are_taken_as_given_whatever_the_host():
    sizing = sized_workers(lean_settings(workers=8), HostShape(96, 1 << 20))
    assert (sizing.workers, sizing.pinned) == (8, True)
    assert sizing.describe() == "8 workers (pinned in the config)"


def test_auto_workers_are_sized_by_the_ceiling_the_reserve_and_the_spare():
    settings = lean_settings(
        auto_workers=True, host_reserve_cores=4, host_reserve_mb=0, memory_ceiling_mb=1024
    )
    # cores: 16 - 4 = 12; memory: 0.9 x 16 GiB - 5 GiB prior shared = 9.4 GiB -> 9 - spare = 8
    sizing = sized_workers(settings, HostShape(16, 16 * 1024.0))
    assert (sizing.workers, sizing.by_cores, sizing.by_memory) == (8, 12, 8)
    assert sizing.describe() == "8 workers (auto: 12 by cores, 8 by memory; bound by memory)"


def test_a_tie_between_cores_and_memory_is_said_as_bound_by_cores_and_no_spare_frees_one():
    # cores 12 - 2 = 10; memory (0.9 x 20480 - 0 - 2048) / 1638.4 = 10.0 -> 10, no spare
    sizing = size_workers(
        HostShape(12, 20480.0),
        reserve_cores=2,
        reserve_mb=0,
        per_worker_mb=1638.4,
        mapped_mb=2048,
        spare=False,
    )
    assert sizing.describe() == "10 workers (auto: 10 by cores, 10 by memory; bound by cores)"


def test_this_host_is_the_cores_this_process_may_use_and_the_memory_installed():
    import os

    import psutil

    host = HostShape.this_host()
    assert host.cores == len(os.sched_getaffinity(0))
    assert host.memory_mb == psutil.virtual_memory().total / (1 << 20)
