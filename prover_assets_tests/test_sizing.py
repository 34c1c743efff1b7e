"""The Lean workers' host memory: unique memory per process, shared pages once."""

import pytest

from prover_assets.verify.sizing import lean_host_mb


@pytest.mark.parametrize(
    ("workers", "spare", "unique_mb", "shared_mb", "host_mb"),
    [
        (8, True, 2000.0, 5000.0, 23000.0),  # 9 processes x 2000 + 5000 once
        (8, False, 2000.0, 5000.0, 21000.0),
        (1, True, 100.0, 50.0, 250.0),
        (0, True, 2000.0, 5000.0, 0.0),  # a Lean server: no REPL on this host
    ],
)
def test_the_host_holds_each_processes_unique_memory_and_the_shared_pages_once(
    workers, spare, unique_mb, shared_mb, host_mb
):
    assert lean_host_mb(workers, spare=spare, unique_mb=unique_mb, shared_mb=shared_mb) == host_mb
