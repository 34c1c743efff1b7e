"""The names of the graph: one iteration and one seed keep the registered graph's keys."""

import dagster as dg

from prover_assets.assets.keys import (
    CANDIDATE,
    EXPORTED_MODEL,
    SFT_CHECKPOINT,
    iteration_partitions,
    training_runs,
)


def test_one_iteration_is_unpartitioned_and_several_are_partitions_one_to_k():
    assert iteration_partitions(1) is None
    assert iteration_partitions(3).get_partition_keys() == ["1", "2", "3"]


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
