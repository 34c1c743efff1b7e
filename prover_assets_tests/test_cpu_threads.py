"""torch's threads on the CPU: the config's count, else $OMP_NUM_THREADS, else the cores less the
Lean workers beside and one; set while a step's torch work runs and put back after."""

from __future__ import annotations

import pytest

from prover_assets.config import parse_engine_settings, parse_lean_settings
from prover_assets.cpu_threads import THREADS_VARIABLE, cpu_threads, torch_threads

SIMULATED = {"simulated": {"workers": 3, "rule": "planted_tactic", "seed": 1}}
LOCAL = {"local": {"workers": 3, "workspace": "/lean"}}
PINS = {"lean_version": "v4.28.0", "mathlib_rev": "abc", "repl_rev": "def"}
REMOTE = {"remote": {"workers": 3, "url": "http://lean:8000", "expected_pins": PINS}}


def engine(**settings):
    return parse_engine_settings({"engine": "transformers", "device": "cpu", **settings})


# cores, schedule, lean backend -> threads: the cores less one, less the Lean workers (3 here)
# only where they run on this host at the same time (overlapped, not a remote server's)
@pytest.mark.parametrize(
    ("cores", "schedule", "lean", "expected"),
    [
        (16, "exclusive", LOCAL, 15),
        (16, "overlapped", LOCAL, 12),
        (16, "overlapped", SIMULATED, 12),
        (16, "overlapped", REMOTE, 15),
        (2, "exclusive", SIMULATED, 1),
        (4, "overlapped", LOCAL, 1),  # 4 - 3 - 1 = 0: at least one
        (1, "exclusive", LOCAL, 1),
    ],
)
def test_by_default_the_cores_less_one_and_the_lean_workers_running_beside(
    cores, schedule, lean, expected
):
    threads = cpu_threads(
        engine(schedule=schedule), parse_lean_settings(lean), cores=cores, environ={}
    )
    assert (threads.count, threads.source) == (expected, "cores")


def test_an_exclusive_step_without_lean_settings_reserves_no_worker():
    threads = cpu_threads(engine(schedule="exclusive"), None, cores=16, environ={})
    assert (threads.count, threads.lean_beside) == (15, 0)


def test_an_overlapped_step_without_lean_settings_is_refused():
    with pytest.raises(ValueError, match="counts the Lean workers beside"):
        cpu_threads(engine(schedule="overlapped"), None, cores=16, environ={})


def test_auto_sized_lean_workers_are_reserved_as_sized():
    lean = parse_lean_settings(
        {"local": {"workspace": "/lean", "auto_workers": True, "host_reserve_cores": 2}}
    )
    from prover_assets.verify.sizing import sized_workers

    sized = sized_workers(lean).workers
    threads = cpu_threads(engine(schedule="overlapped"), lean, cores=64, environ={})
    assert threads.count == max(1, 64 - sized - 1)


def test_the_operators_variable_wins_over_the_cores():
    threads = cpu_threads(
        engine(), parse_lean_settings(LOCAL), cores=16, environ={THREADS_VARIABLE: " 4 "}
    )
    assert (threads.count, threads.source) == (4, THREADS_VARIABLE)
    assert threads.describe() == "4 torch threads (set by $OMP_NUM_THREADS)"


def test_the_configs_count_wins_over_the_variable():
    threads = cpu_threads(
        engine(cpu_threads=6),
        parse_lean_settings(LOCAL),
        cores=16,
        environ={THREADS_VARIABLE: "4"},
    )
    assert (threads.count, threads.source) == (6, "config")
    assert threads.describe() == "6 torch threads (set by gpu.settings.cpu_threads)"


@pytest.mark.parametrize("told", ["0", "-2", "two", "1.5"])
def test_a_variable_that_is_not_a_positive_count_is_refused_naming_it(told):
    with pytest.raises(ValueError) as refused:
        cpu_threads(engine(), parse_lean_settings(LOCAL), cores=4, environ={THREADS_VARIABLE: told})
    assert str(refused.value).startswith(f"OMP_NUM_THREADS={told!r} is not a positive whole number")


def test_an_empty_variable_is_as_if_unset():
    threads = cpu_threads(
        engine(), parse_lean_settings(LOCAL), cores=8, environ={THREADS_VARIABLE: ""}
    )
    assert (threads.count, threads.source) == (7, "cores")
    assert (
        threads.describe()
        == "7 torch threads (8 cores less 0 Lean workers beside and 1 for the rest)"
    )


def test_a_config_count_below_one_is_refused_at_load():
    from prover_assets.config import ConfigError

    with pytest.raises(ConfigError, match="cpu_threads"):
        engine(cpu_threads=0)


def test_torch_threads_are_set_inside_and_put_back_after():
    import torch

    before = torch.get_num_threads()
    inside = 3 if before != 3 else 2
    with torch_threads(inside):
        assert torch.get_num_threads() == inside
    assert torch.get_num_threads() == before
    with pytest.raises(RuntimeError), torch_threads(inside):
        raise RuntimeError("a failed step")
    assert torch.get_num_threads() == before
    with torch_threads(None):
        assert torch.get_num_threads() == before


@pytest.mark.parametrize(
    ("asked", "world", "each"), [(7, 2, 3), (7, 1, 7), (1, 4, 1), (None, 2, None)]
)
def test_the_trainers_ranks_share_the_threads_each_at_least_one(asked, world, each):
    from prover_assets.sft.trainer import TrainRun

    run = TrainRun("shards", "base", "out", {}, "cuda", ranks=world, cpu_threads=asked)
    assert run.threads_per_rank() == each
