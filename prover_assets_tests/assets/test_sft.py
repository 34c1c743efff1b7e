"""Which data and which model an iteration's training reads, by the iteration settings, as the
SFT assets resolve `prover_assets.iteration`'s rules (the rules alone: test_iteration.py)."""

from pathlib import Path

import pytest

from prover_assets.assets.keys import EXPORTED_MODEL, SFT_SHARDS, schedule_of, training_runs
from prover_assets.assets.sft import sft_assets, sft_rounds, training_start
from prover_assets.config import load_run_config
from prover_assets.iteration import OutputRef
from prover_assets.records.layout import folder_path
from prover_assets_tests.support import CONFIGS

SPEC = load_run_config(CONFIGS / "demo-iterations.yaml").experiment


def with_iteration(**settings):
    return SPEC.model_copy(update={"iteration": SPEC.iteration.model_copy(update=settings)})


class Files:
    """The experiment resource's `resolve`, naming each file by its key's folder and partition."""

    def resolve(self, ref) -> Path:
        return Path(*folder_path(ref.asset), f"iteration-{ref.partition}", ref.file)


def iterations_read(spec, partition) -> list[tuple[str, str]]:
    return [(g.parts[-2], g.parts[-3]) for g, _ in sft_rounds(spec, Files(), partition)]


def test_an_iterations_sft_data_is_its_own_rounds_or_every_iterations_so_far():
    own = with_iteration(sft_data="iteration")
    cumulative = with_iteration(sft_data="cumulative")
    assert iterations_read(own, "2") == [("iteration-2", "r0"), ("iteration-2", "r1")]
    assert iterations_read(cumulative, "2") == [
        ("iteration-1", "r0"),
        ("iteration-1", "r1"),
        ("iteration-2", "r0"),
        ("iteration-2", "r1"),
    ]
    assert iterations_read(cumulative, "1") == [("iteration-1", "r0"), ("iteration-1", "r1")]


@pytest.mark.parametrize("seed_index", [0, 1])
def test_training_starts_from_the_base_or_from_the_same_seeds_export_of_the_iteration_before(
    seed_index,
):
    run = training_runs(SPEC.training.all_seeds())[seed_index]
    assert training_start(with_iteration(start="base"), run, "2") is None
    previous = with_iteration(start="previous")
    assert training_start(previous, run, "1") is None  # the first iteration: the base
    assert training_start(previous, run, "3") == OutputRef(tuple(run.export.path), "2")
    assert (run.export == EXPORTED_MODEL) == (seed_index == 0)


def upstream_iterations(spec, downstream: str) -> dict[str, set[str]]:
    """The iterations of each pool round Dagster's graph draws `sft_shards` of iteration
    `downstream` from."""
    (shards, *_) = sft_assets(spec, schedule_of("exclusive"))
    partitions = shards.partitions_def
    subset = partitions.empty_subset().with_partition_keys([downstream])
    found = {}
    for dep in shards.specs_by_key[SFT_SHARDS].deps:
        if dep.asset_key.path[0] not in ("generations", "verdicts"):
            continue
        mapped = dep.partition_mapping.get_upstream_mapped_partitions_result_for_partitions(
            subset, partitions, partitions
        )
        found[dep.asset_key.path[-1]] = set(mapped.partitions_subset.get_partition_keys())
    return found


@pytest.mark.parametrize(
    ("sft_data", "expected"), [("iteration", {"2"}), ("cumulative", {"1", "2"})]
)
def test_the_graph_draws_an_iterations_shards_from_the_rounds_of_the_iterations_it_reads(
    sft_data, expected
):
    found = upstream_iterations(with_iteration(sft_data=sft_data), "2")
    rounds = {"generations_pool_r0", "verdicts_pool_r0", "generations_pool_r1", "verdicts_pool_r1"}
    assert found == dict.fromkeys(rounds, expected)
