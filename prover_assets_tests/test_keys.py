"""The names of the graph: one iteration and one seed keep the registered graph's keys."""

import dagster as dg

from prover_assets.assets.keys import (
    CANDIDATE,
    EXPORTED_MODEL,
    SFT_CHECKPOINT,
    iteration_number,
    iteration_partition,
    iteration_partitions,
    iterations_before,
    previous_iteration,
    training_runs,
)


def test_one_iteration_is_unpartitioned_and_several_are_partitions_one_to_k():
    assert iteration_partitions(1) is None
    assert iteration_partitions(3).get_partition_keys() == ["1", "2", "3"]


def test_an_iterations_predecessor_is_the_one_before_and_the_first_has_none():
    assert [previous_iteration(p) for p in (None, "1", "2", "3")] == [None, None, "1", "2"]
    assert [iteration_number(p) for p in (None, "1", "4")] == [1, 1, 4]


def test_the_registered_seed_keeps_the_one_seed_keys_and_each_other_seed_has_its_own():
    registered, other = training_runs([5, 9])
    assert (registered.system, registered.checkpoint, registered.export) == (
        CANDIDATE,
        SFT_CHECKPOINT,
        EXPORTED_MODEL,
    )
    assert registered.registered and not other.registered
    assert (other.system, other.checkpoint, other.export) == (
        "candidate_seed9",
        dg.AssetKey(["sft_checkpoint_seed9"]),
        dg.AssetKey(["exported_model_seed9"]),
    )


def test_the_iterations_before_one_are_listed_first_to_last_and_one_iteration_has_no_partition():
    assert [iterations_before(p) for p in (None, "1", "3")] == [[], [], ["1", "2"]]
    assert [iteration_partition(1, 1), iteration_partition(3, 2)] == [None, "2"]
