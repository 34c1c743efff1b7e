"""The experiment's rules across iterations, without Dagster: each against a hand-built table of
what iteration 1, 2 and 3 read under each setting (two correction rounds: r0, r1)."""

from __future__ import annotations

import pytest

from prover_assets.config import load_run_config
from prover_assets.iteration import (
    EXPORTED_MODEL_PATH,
    OutputRef,
    iteration_number,
    iteration_partition,
    iterations_before,
    pool_model,
    pool_round_refs,
    previous_iteration,
    sft_round_refs,
    solved_before_refs,
    training_start,
)
from prover_assets_tests.support import CONFIGS

SPEC = load_run_config(CONFIGS / "demo-iterations.yaml").experiment
assert SPEC.corrections.rounds == 1  # round 0 and one correction round: r0, r1


def with_iteration(**settings):
    return SPEC.model_copy(update={"iteration": SPEC.iteration.model_copy(update=settings)})


def rounds(pairs: list[tuple[OutputRef, OutputRef]]) -> list[str]:
    """Each pair as "<iteration>/<round>", its two halves checked to be one round's."""
    named = []
    for generations, verdicts in pairs:
        round = generations.asset[-1].removeprefix("generations_pool_")
        assert generations.asset == ("generations", "pool", f"generations_pool_{round}")
        assert verdicts.asset == ("verdicts", "pool", f"verdicts_pool_{round}")
        assert generations.partition == verdicts.partition
        assert (generations.file, verdicts.file) == ("generations.jsonl", "verdicts.jsonl")
        named.append(f"{generations.partition}/{round}")
    return named


def test_the_partitions_of_iterations_one_to_k_and_of_the_one_iteration():
    assert [iteration_number(p) for p in (None, "1", "4")] == [1, 1, 4]
    assert [previous_iteration(p) for p in (None, "1", "2", "3")] == [None, None, "1", "2"]
    assert [iterations_before(p) for p in (None, "1", "3")] == [[], [], ["1", "2"]]
    assert [iteration_partition(1, 1), iteration_partition(2, 2), iteration_partition(3, 2)] == [
        None,
        "2",
        "2",
    ]


def test_an_iterations_pool_rounds_are_round_zero_then_each_correction_round():
    assert rounds(pool_round_refs(SPEC, "2")) == ["2/r0", "2/r1"]
    assert rounds(pool_round_refs(SPEC, None)) == ["None/r0", "None/r1"]


@pytest.mark.parametrize(
    ("problems", "partition", "expected"),
    [
        ("unsolved", None, []),
        ("unsolved", "1", []),
        ("unsolved", "3", ["1/r0", "1/r1", "2/r0", "2/r1"]),
        ("all", "3", []),
    ],
)
def test_round_zero_leaves_out_what_every_earlier_round_solved_only_when_sampling_the_unsolved(
    problems, partition, expected
):
    assert rounds(solved_before_refs(with_iteration(problems=problems), partition)) == expected


@pytest.mark.parametrize(
    ("sft_data", "partition", "expected"),
    [
        ("iteration", "2", ["2/r0", "2/r1"]),
        ("cumulative", "1", ["1/r0", "1/r1"]),
        ("cumulative", "2", ["1/r0", "1/r1", "2/r0", "2/r1"]),
        ("iteration", None, ["None/r0", "None/r1"]),
    ],
)
def test_an_iterations_sft_data_is_its_own_rounds_or_every_iterations_so_far(
    sft_data, partition, expected
):
    assert rounds(sft_round_refs(with_iteration(sft_data=sft_data), partition)) == expected


def test_the_pool_is_sampled_by_the_baseline_then_by_the_registered_export_before():
    assert pool_model(None) is None and pool_model("1") is None
    assert pool_model("3") == OutputRef(EXPORTED_MODEL_PATH, "2")  # its folder: no file


@pytest.mark.parametrize(
    ("start", "partition", "expected"),
    [
        ("base", "2", None),
        ("previous", "1", None),  # the first iteration: the base
        ("previous", "3", OutputRef(("exported_model_seed9",), "2")),
        ("previous", None, None),
    ],
)
def test_training_starts_from_the_base_or_from_the_same_seeds_export_of_the_iteration_before(
    start, partition, expected
):
    spec = with_iteration(start=start)
    assert training_start(spec, ("exported_model_seed9",), partition) == expected
