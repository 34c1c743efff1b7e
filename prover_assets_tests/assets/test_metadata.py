"""Reading what a materialization recorded: of the right iteration for a partitioned asset;
what a step's materialization says it used: GPUs, GPU-seconds, tokens, runs of Lean."""

import dagster as dg
import pytest

from prover_assets.assets.keys import iteration_partitions
from prover_assets.assets.metadata import (
    OUTPUT_DIR,
    generation_work_metadata,
    latest_materialization,
    output_dir,
    step_materialization,
    verdict_work_metadata,
)
from prover_assets.records import CachedFrom
from prover_assets.records.manifest import read_manifest
from prover_assets.records.outputs import StepResult
from prover_assets.records.store import publish_records
from prover_assets.verify.runner import VerificationResult
from prover_assets.verify.stages import StatementAuditResult
from prover_assets_tests.factories import (
    finish_step_folder,
    make_generation,
    make_verification,
    timeout_recheck,
)

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


@dg.asset(key=["generations", "pool", "r0"])
def before_labelling() -> dg.MaterializeResult:
    return dg.MaterializeResult(metadata={OUTPUT_DIR: "/data/generations/pool/r0"})


@dg.asset(key=["generations", "pool", "generations_pool_r0"])
def labelled() -> dg.MaterializeResult:
    return dg.MaterializeResult(metadata={OUTPUT_DIR: "/data/generations/pool/r0 again"})


def test_a_key_materialized_only_before_labelling_is_read_under_its_old_key():
    def folder(instance):
        event = latest_materialization(instance, labelled.key)
        return event.asset_materialization.metadata[OUTPUT_DIR].value

    with dg.instance_for_test() as instance:
        assert latest_materialization(instance, labelled.key) is None
        dg.materialize([before_labelling], instance=instance)
        assert folder(instance) == "/data/generations/pool/r0"
        dg.materialize([labelled], instance=instance)
        assert folder(instance) == "/data/generations/pool/r0 again"  # its own, once it has one


def step_folder(tmp_path, extra: dict) -> StepResult:
    """A finished step (a result of no interest here) whose manifest records `extra`."""
    publish_records(tmp_path / "out.jsonl", [])
    finish_step_folder(tmp_path, "out.jsonl", extra=extra)
    result = StatementAuditResult(problems=0, checks=0, statuses={}, found={}, simulated=True)
    return StepResult(tmp_path, read_manifest(tmp_path), reused=False, result=result)


USAGE = {"wall_s": 100.0, "cpu_s": 3.0, "children_cpu_s": 0.5, "peak_gpu_mib": 61440.0}


def test_a_gpu_steps_metadata_says_the_gpus_it_held_its_gpu_seconds_and_its_peak(tmp_path):
    vllm = {"engine": "vllm", "gpu_slices": [[0, 1], [2, 3]]}  # two engines of 2 GPUs
    metadata = step_materialization(
        step_folder(tmp_path, {"usage": USAGE, "engine": vllm}), tmp_path
    ).metadata
    assert metadata["used_gpus"] == 4
    assert metadata["used_gpu_s"].value == 400.0  # 100 s of wall on 4 GPUs
    assert metadata["used_peak_gpu_mib"].value == 61440.0


def test_a_step_whose_manifest_names_no_gpus_reports_no_gpu_time(tmp_path):
    # a verdict step: its work is Lean's, on the host
    metadata = step_materialization(step_folder(tmp_path, {"usage": USAGE}), tmp_path).metadata
    assert "used_gpus" not in metadata and "used_gpu_s" not in metadata


def test_a_generation_streams_tokens_and_samples_cut_at_the_cap_are_its_metadata(tmp_path):
    stream = tmp_path / "generations.jsonl"
    publish_records(
        stream,
        [
            make_generation("p1", 0, cap_tokens=64, completion_ids=list(range(10))),
            make_generation(
                "p1", 1, cap_tokens=64, completion_ids=list(range(64)), finish_reason="length"
            ),
            make_generation("p2", 0, cap_tokens=64, completion_ids=list(range(20))),
        ],
    )
    # 3 prompts of 3 tokens; 10 + 64 + 20 tokens generated; one cut at the cap
    assert generation_work_metadata(stream) == {
        "tokens_prompted": 9,
        "tokens_generated": 94,
        "samples_hit_cap": 1,
    }


def test_a_verdict_streams_lean_runs_count_the_rechecks_and_retries_not_the_copies(tmp_path):
    generations = [make_generation("p1", i) for i in range(4)]
    copied = CachedFrom(key="a" * 64, problem_id="p9", sample_idx=0, round=0, cap_tokens=64)
    rechecked = timeout_recheck()
    stream = tmp_path / "verdicts.jsonl"
    publish_records(
        stream,
        [
            make_verification(generations[0], cached_from=copied),
            make_verification(generations[1], diagnostics=rechecked),
            make_verification(generations[2], cached_from=copied, diagnostics=rechecked),
            make_verification(generations[3]),
        ],
    )
    result = VerificationResult.model_validate({**VERIFIED, "infrastructure_reverified": 2})
    # 4 verdicts, 2 copied (one of a rechecked verdict: no run here), 1 timeout run again,
    # 2 infrastructure verdicts judged again: 4 - 2 + 1 + 2
    assert verdict_work_metadata(stream, result) == {
        "lean_runs": 5,
        "verdicts_cached": 2,
        "timeouts_rerun": 1,
    }


VERIFIED = {
    "total": 4,
    "already_verified": 0,
    "verified_now": 4,
    "accepted_now": 4,
    "code_bearing_now": 4,
    "wall_s": 5.0,
    "stale_reverified": 0,
    "torn_dropped": 0,
    "stages": {"accepted": 4},
    "reasons": {},
    "verify_s": {"median": 1.0, "p90": 1.0, "max": 1.0},
}
