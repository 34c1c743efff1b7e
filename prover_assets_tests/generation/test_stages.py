"""A generation step refuses what it cannot append to honestly: an empty batch, a stream that
holds samples outside its plan."""

from pathlib import Path

import pytest
import yaml

from prover_assets.config import parse_experiment_spec
from prover_assets.generation.runner import round0_specs
from prover_assets.generation.stages import (
    GENERATIONS_FILE,
    Samples,
    hub_model,
    materialize_generations,
)
from prover_assets.records import Appender, Generation, SamplingSettings
from prover_assets.records.outputs import EmptyOutputError
from prover_assets.records.store import RecordError
from prover_assets_tests.factories import make_generation, make_opening, make_problem
from prover_assets_tests.support import CONFIGS

SAMPLING = SamplingSettings(temperature=1.0, top_p=0.95, top_k=0)


def no_engine(opening):
    pytest.fail("the step opened an engine for a batch it should have refused")


def materialize(folder, samples):
    return materialize_generations(
        folder,
        samples,
        opening=make_opening(model_path=folder / "model", model_rev="rev", sampling=SAMPLING),
        open_engine=no_engine,
        load_tokenizer=lambda _: None,
    )


def test_an_empty_batch_is_refused_unless_the_config_expects_it(tmp_path):
    with pytest.raises(EmptyOutputError, match="generation batch"):
        materialize(tmp_path / "gen", Samples([], {}, samples_per_problem=1))
    result = materialize(
        tmp_path / "expected", Samples([], {}, samples_per_problem=1, allow_empty=True)
    )
    assert result.result.rows == 0


def test_a_stream_holding_a_sample_outside_the_plan_is_refused_before_anything_is_appended(
    tmp_path,
):
    folder = tmp_path / "gen"
    folder.mkdir()
    planned = round0_specs([make_problem("p1")], 2, 64)
    with Appender(folder / GENERATIONS_FILE, Generation) as appender:
        appender.append_many([make_generation("p1", 0), make_generation("elsewhere", 0)])
    before = (folder / GENERATIONS_FILE).read_bytes()
    with pytest.raises(RecordError, match=r"generations.jsonl:2: sample \('elsewhere'"):
        materialize(folder, Samples(planned, {}, samples_per_problem=1))
    assert (folder / GENERATIONS_FILE).read_bytes() == before


def test_a_later_iterations_round_0_leaves_out_every_problem_an_earlier_round_solved(tmp_path):
    from prover_assets.generation.stages import round0_problems, round0_samples, solved_problems
    from prover_assets.records import publish_records
    from prover_assets_tests.factories import make_verification

    problems = [make_problem(pid) for pid in ("p1", "p2", "p3", "p4")]
    publish_records(tmp_path / "problems.jsonl", problems)
    rounds = []
    # round 0 solves p1 (one of two samples); its correction round solves p3; p2 fails in both
    for name, accepted in (
        ("r0", {("p1", 0): False, ("p1", 1): True, ("p2", 0): False}),
        ("r1", {("p2", 2): False, ("p3", 2): True}),
    ):
        generations = [make_generation(pid, idx) for pid, idx in accepted]
        verdicts = [
            make_verification(g, accepted=accepted[(g.problem_id, g.sample_idx)])
            for g in generations
        ]
        publish_records(tmp_path / f"{name}_gen.jsonl", generations)
        publish_records(tmp_path / f"{name}_ver.jsonl", verdicts)
        rounds.append((tmp_path / f"{name}_gen.jsonl", tmp_path / f"{name}_ver.jsonl"))
    assert solved_problems(rounds) == {"p1", "p3"}
    kept = round0_problems(tmp_path / "problems.jsonl", rounds)
    assert [p.problem_id for p in kept] == ["p2", "p4"]
    samples = round0_samples(tmp_path / "problems.jsonl", 2, 64, solved_before=rounds)
    assert (samples.plan.problems, samples.plan.samples) == (2, 4)
    assert samples.inputs["solved_before_1_verdicts"] == rounds[1][1]  # hashed as an input
    everything = round0_samples(tmp_path / "problems.jsonl", 2, 64)
    assert (everything.plan.problems, set(everything.inputs)) == (4, {"problems"})


def test_the_rounds_a_round_0_left_out_are_read_back_from_its_inputs_in_their_order(tmp_path):
    from prover_assets.generation.stages import recorded_solved_before, round0_samples
    from prover_assets.records import publish_records

    publish_records(tmp_path / "problems.jsonl", [make_problem("p1")])
    # 11 earlier rounds: their names sort out of order ("solved_before_10_..." before "_2_")
    rounds = [(tmp_path / f"g{i}.jsonl", tmp_path / f"v{i}.jsonl") for i in range(11)]
    for generations, verdicts in rounds:
        publish_records(generations, [])
        publish_records(verdicts, [])
    samples = round0_samples(tmp_path / "problems.jsonl", 1, 64, solved_before=rounds)
    assert recorded_solved_before(samples.inputs) == rounds
    assert recorded_solved_before({"problems": tmp_path / "problems.jsonl"}) == []


def test_an_eval_sets_reference_elaboration_is_an_input_of_its_batch_and_samples_nothing(
    tmp_path,
):
    from prover_assets.generation.stages import recorded_solved_before, round0_samples
    from prover_assets.records import publish_records

    publish_records(tmp_path / "problems.jsonl", [make_problem("p1"), make_problem("p2")])
    references = tmp_path / "reference_elaboration.jsonl"
    samples = round0_samples(tmp_path / "problems.jsonl", 2, 64, references=references)
    assert samples.inputs == {
        "problems": tmp_path / "problems.jsonl",
        "reference_elaboration": references,
    }
    assert (samples.plan.problems, samples.plan.samples) == (2, 4)
    assert recorded_solved_before(samples.inputs) == []


def registered_spec(model_path: Path, revision: str):
    """The registered experiment's spec with its model at `model_path`, `revision` declared."""
    raw = yaml.safe_load((CONFIGS / "p2.yaml").read_text())
    spec = raw["resources"]["experiment"]["config"]["spec"]
    spec["model"].update(path=str(model_path), revision=revision)
    return parse_experiment_spec(spec)


def test_the_hub_model_is_the_snapshot_folder_with_its_declared_revision(tmp_path):
    revision = "a" * 40
    snapshot = tmp_path / "snapshots" / revision
    snapshot.mkdir(parents=True)
    assert hub_model(registered_spec(snapshot, revision)) == (snapshot, revision)


def test_a_hub_model_path_that_is_no_folder_says_to_download_it(tmp_path):
    missing = tmp_path / "nowhere"
    with pytest.raises(FileNotFoundError, match="is not a folder: download the snapshot there"):
        hub_model(registered_spec(missing, "a" * 40))
