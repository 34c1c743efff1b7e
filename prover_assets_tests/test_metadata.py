"""Reading what a materialization recorded: of the right iteration for a partitioned asset."""

import dagster as dg
import pytest

from prover_assets.assets.keys import iteration_partitions
from prover_assets.assets.metadata import OUTPUT_DIR, latest_materialization, output_dir

ITERATIONS = iteration_partitions(2)


@dg.asset(partitions_def=ITERATIONS)
def per_iteration(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    return dg.MaterializeResult(metadata={OUTPUT_DIR: f"/data/iteration-{context.partition_key}"})


@dg.asset
def once() -> dg.MaterializeResult:
    return dg.MaterializeResult(metadata={OUTPUT_DIR: "/data/once"})


seen: dict[str, str] = {}


@dg.asset_check(asset=per_iteration, partitions_def=ITERATIONS)
def reads_its_iteration(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
    seen[context.op_execution_context.partition_key] = output_dir(context, per_iteration.key)
    seen["earlier"] = output_dir(context, per_iteration.key, "1")
    seen["once"] = output_dir(context, once.key)
    return dg.AssetCheckResult(passed=True)


@pytest.fixture
def instance():
    with dg.instance_for_test() as instance:
        dg.materialize([once], instance=instance)
        for partition in ("1", "2"):
            dg.materialize([per_iteration], instance=instance, partition_key=partition)
        yield instance


def test_a_partitioned_assets_materialization_is_read_for_the_partition_asked(instance):
    def folder(partition=None, **options):
        event = latest_materialization(instance, per_iteration.key, partition, **options)
        return event.asset_materialization.metadata[OUTPUT_DIR].value

    assert folder("1") == "/data/iteration-1"
    assert folder("2") == "/data/iteration-2"
    assert folder(any_partition=True) == "/data/iteration-2"  # the latest of any
    with pytest.raises(dg.Failure, match="partitioned by iteration"):
        folder()
    assert latest_materialization(instance, once.key, "2") is not None  # unpartitioned: its one


def test_a_check_of_an_iteration_reads_that_iterations_folder_and_an_unpartitioned_ones(instance):
    dg.materialize(
        [per_iteration, reads_its_iteration, once],
        instance=instance,
        partition_key="2",
        selection=[per_iteration, reads_its_iteration],
    )
    assert seen == {"2": "/data/iteration-2", "earlier": "/data/iteration-1", "once": "/data/once"}
