"""The overlapped schedule's pairs: a generation and its verdicts as one asset of two steps,
each writing its own folder, run at once by Dagster's multiprocess executor."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest
import yaml
from dagster._core.definitions.reconstruct import ReconstructableRepository

from prover_assets.assets.keys import generations_key, verdicts_key
from prover_assets.assets.overlapped import GENERATE, VERIFY, generation_outcome, pair_name
from prover_assets.definitions import build_definitions
from prover_assets.records import read_manifest, sha256_file
from prover_assets.verify.stages import GenerationOutcome
from prover_assets_tests.support import dagster_home, demo_run_config

DEFINITIONS = """
from pathlib import Path
from prover_assets.definitions import build_definitions
defs = build_definitions(Path({config!r}))
"""


def overlapped_config(tmp_path: Path) -> Path:
    raw = demo_run_config(tmp_path / "data")
    raw["resources"]["gpu"]["config"]["settings"]["schedule"] = "overlapped"
    path = tmp_path / "demo.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def step_times(instance: dg.DagsterInstance, run_id: str) -> dict[tuple[str, str], float]:
    """(step key, event type) -> when, for each step's start and end."""
    kinds = {dg.DagsterEventType.STEP_START, dg.DagsterEventType.STEP_SUCCESS}
    return {
        (
            record.event_log_entry.step_key,
            record.event_log_entry.dagster_event_type.value,
        ): record.event_log_entry.timestamp
        for record in instance.get_records_for_run(run_id, of_type=kinds).records
    }


def test_each_pair_is_one_asset_whose_verdicts_are_read_from_their_generation():
    definitions = build_definitions(Path("configs/p2.yaml"))
    graph = definitions.resolve_asset_graph()
    generation = generations_key("minif2f", "baseline", 16384)
    verdicts = verdicts_key("minif2f", "baseline", 16384)
    pair = graph.assets_def_for_key(generation)
    assert pair is graph.assets_def_for_key(verdicts)
    assert pair.node_def.name == pair_name(generation)
    assert graph.get(verdicts).parent_keys == {
        generation,
        dg.AssetKey(["eval_problems", "minif2f"]),
    }
    # The verdicts' step waits for what the generation's waits for: never for a generation
    # that cannot start.
    inputs = {name for node in pair.node_def.nodes for name in node.definition.input_dict}
    verify_step = pair.node_def.node_named(f"{pair_name(generation)}__{VERIFY}").definition
    generate_step = pair.node_def.node_named(f"{pair_name(generation)}__{GENERATE}").definition
    assert set(generate_step.input_dict) <= set(verify_step.input_dict) == inputs


@pytest.mark.slow
def test_the_pairs_steps_run_at_once_and_the_verdicts_follow_the_generation(tmp_path):
    config = overlapped_config(tmp_path)
    definitions_file = tmp_path / "definitions.py"
    definitions_file.write_text(DEFINITIONS.format(config=str(config)))
    home = dagster_home(tmp_path / "dagster_home")
    repository = ReconstructableRepository.for_file(str(definitions_file), "defs")
    with dg.DagsterInstance.from_config(str(home)) as instance:
        preflight = build_definitions(config).resolve_job_def("preflight")
        assert preflight.execute_in_process(instance=instance, raise_on_error=False).success
        job = repository.get_reconstructable_job("baseline")
        with dg.execute_job(job, instance=instance, raise_on_error=False) as result:
            assert result.success, [e.message for e in result.all_events if e.is_failure]
            run_id = result.run_id
        times = step_times(instance, run_id)
        generation = generations_key("minif2f", "baseline", 256)
        pair = pair_name(generation)
        generate, verify = f"{pair}.{pair}__{GENERATE}", f"{pair}.{pair}__{VERIFY}"
        assert times[(verify, "STEP_START")] < times[(generate, "STEP_SUCCESS")]
        assert generation_outcome(instance, run_id, generate) is GenerationOutcome.COMPLETE
        assert generation_outcome(instance, run_id, "no.such.step") is GenerationOutcome.RUNNING
    folder = tmp_path / "data" / "verdicts" / "minif2f" / "baseline" / "c256"
    verdicts = read_manifest(folder)
    assert verdicts["verified_beside_generation"] is not None
    # The verdicts were made from the generation whole, as its step wrote it.
    written = tmp_path / "data" / "generations" / "minif2f" / "baseline" / "c256"
    assert verdicts["input_digests"]["generations"] == sha256_file(written / "generations.jsonl")


def test_a_step_retried_is_still_running_and_one_failed_for_good_has_failed():
    attempts: list[int] = []

    @dg.op(retry_policy=dg.RetryPolicy(max_retries=1))
    def flaky(context) -> None:  # unannotated: this module postpones annotations
        attempts.append(context.retry_number)
        # Asked between its attempts, the step is still running: up for retry is no end.
        if context.retry_number == 1:
            seen.append(generation_outcome(context.instance, context.run_id, "flaky"))
        raise dg.Failure("the engine died")

    seen: list[GenerationOutcome] = []

    @dg.op
    def fine() -> None:
        pass

    @dg.job
    def both():
        flaky()
        fine()

    instance = dg.DagsterInstance.ephemeral()
    result = both.execute_in_process(instance=instance, raise_on_error=False)
    assert attempts == [0, 1] and seen == [GenerationOutcome.RUNNING]
    assert generation_outcome(instance, result.run_id, "flaky") is GenerationOutcome.FAILED
    assert generation_outcome(instance, result.run_id, "fine") is GenerationOutcome.COMPLETE


def test_a_pair_op_reports_its_bodys_materialization_as_its_outputs():
    from prover_assets.assets.overlapped import _as_output, _step_op

    @_step_op("made", [], "default", "a body as the pair's steps have")
    def made(context):  # unannotated: this module postpones annotations
        return _as_output(
            dg.MaterializeResult(metadata={"samples": 3}, data_version=dg.DataVersion("v1"))
        )

    graph = dg.GraphDefinition(
        name="one",
        node_defs=[made],
        output_mappings=[dg.OutputMapping("out", "made", "result")],
    )
    asset = dg.AssetsDefinition.from_graph(graph, keys_by_output_name={"out": dg.AssetKey("x")})
    result = dg.materialize([asset], instance=dg.DagsterInstance.ephemeral())
    (materialization,) = result.asset_materializations_for_node("one")
    assert materialization.metadata["samples"] == dg.IntMetadataValue(3)
    assert materialization.tags["dagster/data_version"] == "v1"
