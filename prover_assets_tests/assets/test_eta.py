"""The ETA of a full round: hand-computed hours, pooled measurements, priors, and the asset."""

from pathlib import Path

import dagster as dg
import pytest

from prover_assets.assets.keys import generations_key
from prover_assets.assets.metadata import OUTPUT_DIR, step_wall_s
from prover_assets.config import RunConfig, load_run_config
from prover_assets.definitions import build_definitions
from prover_assets.generation.runner import CorrectionCounts, GenerationBatchResult, SamplePlan
from prover_assets.operations.eta import INPUTS, RoundPlan, eta_table, fixed_steps, measured_inputs
from prover_assets.preflight import CheckStatus, PreflightCheck, PreflightReport
from prover_assets.preflight.gate import preflight_identity, write_report
from prover_assets.records.outputs import Step, StepInputs
from prover_assets.sft.builder import SftCounts
from prover_assets.sft.stages import SftShardsResult, TrainingResult
from prover_assets.verify.elaboration import ElaborationCounts
from prover_assets.verify.runner import VerificationResult
from prover_assets.verify.stages import TrainPoolResult

PLAN = RoundPlan(
    eval_problems={"minif2f": 10},
    eval_caps={"minif2f": (100,)},
    pool_problems=20,
    pool_cap=100,
    n_samples=2,
    correction_rounds=1,
    samples_per_parent=1,
    max_rows_per_problem=4,
    sft_epochs=1,
)
ALL_MEASURED = {
    "tokens_per_s": 10.0,
    "mean_completion_tokens": 50.0,
    "verify_s_per_code_sample": 2.0,
    "share_with_code": 0.5,
    "unsolved_share": 0.5,
    "sft_tokens_per_s": 100.0,
    "sft_rows_per_problem": 2.0,
    "sft_row_tokens": 300.0,
    "generation startup s": 5.0,
    "verification startup s": 3.0,
    "eval sets s": 1.0,
    "decontamination s": 2.0,
    "pool candidates s": 3.0,
    "train pool s": 4.0,
    "SFT shards s": 5.0,
    "export s": 6.0,
    "report s": 7.0,
}


def test_all_inputs_measured_gives_the_hand_computed_hours():
    table = eta_table(PLAN, ALL_MEASURED)
    seconds = {step["step"]: step["central"] * 3600 for step in table["steps"]}
    # 20 eval samples x 50 tokens / 10 tok/s + 5 s start-up; 20 x 0.5 with code x 2 s + 3 s;
    # the pool has 40 samples, 20 children (half unsolved); SFT: 20 problems x 2 rows x 300
    # tokens / 100 tok/s; the fixed steps as measured (no demo tuning: not a demo).
    assert seconds == pytest.approx(
        {
            "eval sets": 1,
            "decontamination": 2,
            "pool candidates": 3,
            "train pool": 4,
            "SFT shards": 5,
            "export": 6,
            "report": 7,
            "baseline minif2f c100: generate": 105,
            "baseline minif2f c100: verify": 23,
            "pool round 0: generate": 205,
            "pool round 0: verify": 43,
            "pool correction round 1: generate": 105,
            "pool correction round 1: verify": 23,
            "SFT training": 120,
            "candidate minif2f c100: generate": 105,
            "candidate minif2f c100: verify": 23,
        }
    )
    hours = (720 + 4 * 8 + 28) / 3600
    assert table["total_hours"] == pytest.approx({"low": hours, "central": hours, "high": hours})
    assert {i["source"] for i in table["inputs"].values()} == {"measured"}


def test_completion_tokens_are_clipped_at_the_cap():
    plan = RoundPlan(**{**PLAN.__dict__, "eval_caps": {"minif2f": (30,)}})
    steps = {s["step"]: s for s in eta_table(plan, ALL_MEASURED)["steps"]}
    assert steps["baseline minif2f c30: generate"]["central"] * 3600 == pytest.approx(
        20 * 30 / 10 + 5
    )


def test_unmeasured_inputs_are_priors_with_low_below_high_at_every_step():
    table = eta_table(PLAN, {})
    # every one a prior, some as the plan can use them ("prior (at most the largest cap, 100)")
    assert {i["source"].split(" (")[0] for i in table["inputs"].values()} == {"prior"}
    for step in table["steps"]:
        assert step["low"] < step["central"] < step["high"], step


def test_one_measured_input_has_no_spread_while_the_rest_keep_theirs():
    table = eta_table(PLAN, {"tokens_per_s": 10.0})
    rate = table["inputs"]["tokens_per_s"]
    assert (rate["low"], rate["central"], rate["high"], rate["source"]) == (10, 10, 10, "measured")
    assert table["inputs"]["mean_completion_tokens"]["source"].startswith("prior")


def generation_result(generated_now: int, mean_tokens: float | None, rate: float, no_code: int):
    return GenerationBatchResult(
        total=generated_now,
        already_present=0,
        generated_now=generated_now,
        no_room=0,
        context_clipped=0,
        hit_cap=0,
        hit_cap_share=None,
        no_code=no_code,
        reinsertion_errors=0,
        torn_dropped=0,
        completion_tokens={},
        mean_completion_tokens=mean_tokens,
        tokens_per_s=rate,
        rows=generated_now,
        plan=SamplePlan(problems=1, samples_per_problem=generated_now, samples=generated_now),
    )


def verification_result(code_bearing_now: int, wall_s: float) -> VerificationResult:
    return VerificationResult(
        total=code_bearing_now,
        already_verified=0,
        verified_now=code_bearing_now,
        accepted_now=0,
        code_bearing_now=code_bearing_now,
        wall_s=wall_s,
        stale_reverified=0,
        infrastructure_reverified=0,
        torn_dropped=0,
        stages={},
        reasons={},
        verify_s={},
    )


def test_measurements_pool_work_over_time_and_ignore_reused_outputs():
    generations = [
        generation_result(10, 100.0, 50.0, 2),
        generation_result(30, 200.0, 100.0, 3),
        generation_result(0, None, 0.0, 0),
    ]
    verdicts = [
        verification_result(5, 10.0),
        verification_result(15, 30.0),
        verification_result(0, 0.1),
    ]
    shards = SftCounts(
        candidates=6, written=6, drops={}, problems_with_rows=3, tokens=600, kinds={}
    )
    measured = measured_inputs(
        generations,
        verdicts,
        correction_plan=CorrectionCounts(
            solved_problems=1, unsolved_problems=3, parents=3, no_repl_errors=0
        ),
        train_pool=TrainPoolResult(
            elaboration=ElaborationCounts(
                elaborated=3, error=0, timeout=0, infrastructure=0, checked=3, unchecked=0
            ),
            pool=3,
            candidates=3,
            target=3,
        ),
        sft_shards=SftShardsResult(counts=shards, read_back="ok", shards=1),
        sft_checkpoint=TrainingResult(
            status="done",
            global_step=1,
            max_steps=1,
            resumed_from_step=0,
            removed_partial_checkpoints=[],
            trained_micro_steps_this_run=1,
            tokens_per_s_this_run=1234.0,
            micro_steps=1,
            packing_efficiency=1.0,
            rows=6,
            epochs=1,
            bf16=False,
            wall_s_this_run=1.0,
        ),
    )
    # 1,000 + 6,000 tokens over 20 s + 60 s; 40 samples of which 5 without code.
    assert measured == pytest.approx(
        {
            "tokens_per_s": 7000 / 80,
            "mean_completion_tokens": 7000 / 40,
            "share_with_code": 35 / 40,
            "verify_s_per_code_sample": 40 / 20,
            "unsolved_share": 0.75,
            "sft_rows_per_problem": 2.0,
            "sft_row_tokens": 100.0,
            "sft_tokens_per_s": 1234.0,
        }
    )


def test_nothing_materialized_measures_nothing():
    assert measured_inputs([], []) == {}


@pytest.fixture
def demo_defs(demo_config_file):
    return build_definitions(demo_config_file)


@pytest.mark.slow
def test_eta_asset_reads_the_result_in_a_materialization_s_manifest(demo_defs, tmp_path):
    folder = tmp_path / "generations"
    folder.mkdir()
    Step(folder, str(folder), GenerationBatchResult, StepInputs.hash({}), {}).finish(
        generation_result(24, 120.0, 60.0, 6), []
    )
    job = demo_defs.resolve_job_def("operations")
    with dg.DagsterInstance.ephemeral() as instance:
        before = job.execute_in_process(instance=instance)
        instance.report_runless_asset_event(
            dg.AssetMaterialization(
                asset_key=generations_key("minif2f", "baseline", 256),
                metadata={OUTPUT_DIR: dg.MetadataValue.path(str(folder))},
            )
        )
        after = job.execute_in_process(instance=instance)
    first, second = (
        run.asset_materializations_for_node("eta")[0].metadata for run in (before, after)
    )
    assert first["inputs_measured"].value == f"0 of {len(INPUTS)}"
    assert second["inputs_measured"].value == f"3 of {len(INPUTS)}"
    table = second["table"].value
    assert table["inputs"]["share_with_code"]["central"] == pytest.approx(18 / 24)


def test_a_step_s_start_up_is_its_wall_time_beyond_the_work_its_rates_account_for():
    measured = measured_inputs(
        [],
        [],
        # 10 samples x 100 tokens at 50 tokens/s: 20 s of work in a 30 s step
        generation_walls=[(generation_result(10, 100.0, 50.0, 2), 30.0)],
        # 10 s of verifying in a 14 s step; a step that checked no code measures nothing
        verification_walls=[
            (verification_result(5, 10.0), 14.0),
            (verification_result(0, 0.0), 99.0),
        ],
        step_seconds={"export s": 7.0},
    )
    assert measured == pytest.approx(
        {"generation startup s": 10.0, "verification startup s": 4.0, "export s": 7.0}
    )


def test_only_a_demo_round_counts_the_demo_s_format_tuning():
    assert "demo format tuning s" not in fixed_steps(PLAN)
    demo = RoundPlan(**{**PLAN.__dict__, "demo": True})
    assert "demo format tuning s" in fixed_steps(demo)
    steps = [s["step"] for s in eta_table(demo, {})["steps"]]
    assert "demo format tuning" in steps and "export" in steps and "report" in steps


def test_a_step_s_wall_time_is_measured_unless_it_reused_its_output():
    @dg.asset
    def worked():
        return dg.MaterializeResult(metadata={"reused_complete_output": False})

    @dg.asset
    def reused():
        return dg.MaterializeResult(metadata={"reused_complete_output": True})

    with dg.DagsterInstance.ephemeral() as instance:
        dg.materialize([worked, reused], instance=instance)
        wall = step_wall_s(instance, worked.key)
        assert wall is not None and 0 < wall < 60
        assert step_wall_s(instance, reused.key) is None
        assert step_wall_s(instance, dg.AssetKey("never")) is None


def test_iterations_and_seeds_repeat_their_steps_and_nothing_else():
    one = {s["step"]: s["central"] * 3600 for s in eta_table(PLAN, ALL_MEASURED)["steps"]}
    plan = RoundPlan(**{**PLAN.__dict__, "iterations": 2, "seeds": 3})
    table = eta_table(plan, ALL_MEASURED)
    seconds = {s["step"]: s["central"] * 3600 for s in table["steps"]}
    # once: the problems, the baseline, the report; per iteration: the pool rounds and the
    # shards; per iteration and seed: SFT training, the export, the candidate's evaluation
    for once in ("eval sets", "train pool", "report", "baseline minif2f c100: generate"):
        assert seconds[once] == pytest.approx(one[once])
    assert seconds["SFT shards"] == pytest.approx(2 * 5)
    assert seconds["export"] == pytest.approx(2 * 3 * 6)
    for i in (1, 2):
        assert seconds[f"iteration {i}: pool round 0: generate"] == pytest.approx(205)
        assert seconds[f"iteration {i}: SFT training (3 seeds)"] == pytest.approx(3 * 120)
        for seed in (1, 2, 3):
            assert seconds[f"iteration {i}: candidate (seed {seed}) minif2f c100: verify"] == (
                pytest.approx(23)
            )
    # fixed 1+2+3+4 + 2x5 + 6x6 + 7 = 63; the baseline 128; per iteration the pool 376, training
    # 3 x 120, the candidates 3 x 128
    total_s = 63 + 128 + 2 * (376 + 360 + 384)
    assert table["total_hours"]["central"] == pytest.approx(total_s / 3600)


def test_the_registered_config_s_memory_plan_fits_before_the_snapshot_is_on_disk():
    from prover_assets.assets.eta import _memory_metadata
    from prover_assets.config import load_run_config

    spec = load_run_config(Path(__file__).parents[2] / "configs" / "p2.yaml").experiment
    memory = _memory_metadata(spec)
    assert memory["training_memory_model_config"].startswith("Qwen3-8B's shape")
    assert memory["training_memory_peak"].startswith("peak ")  # not a refusal
    terms = {row.data["term"]: row.data["GiB"] for row in memory["training_memory"].records}
    assert terms["base weights"] == pytest.approx(8_190_735_360 * 2 / 2**30, abs=0.01)
    assert terms["peak"] < 0.9 * 80


def test_the_memory_plan_reads_the_snapshot_s_config_once_it_is_on_disk(tmp_path, tiny_model_dir):
    from prover_assets.assets.eta import _memory_metadata
    from prover_assets.config import load_run_config

    spec = load_run_config(Path(__file__).parents[2] / "configs" / "p2.yaml").experiment
    spec = spec.model_copy(
        update={"model": spec.model.model_copy(update={"path": str(tiny_model_dir)})}
    )
    memory = _memory_metadata(spec)
    assert memory["training_memory_model_config"] == str(tiny_model_dir / "config.json")
    terms = {row.data["term"]: row.data["GiB"] for row in memory["training_memory"].records}
    assert terms["base weights"] < 0.01


def test_a_preflight_figure_replaces_a_prior_and_a_measurement_replaces_it():
    table = eta_table(
        PLAN, {"sft_tokens_per_s": 5.0}, {"tokens_per_s": 10.0, "sft_tokens_per_s": 7.0}
    )
    rate = table["inputs"]["tokens_per_s"]
    assert (rate["low"], rate["central"], rate["high"], rate["source"]) == (10, 10, 10, "preflight")
    assert table["inputs"]["sft_tokens_per_s"]["central"] == 5.0
    assert table["inputs"]["sft_tokens_per_s"]["source"] == "measured"
    assert table["inputs"]["mean_completion_tokens"]["source"].startswith("prior")


def passing_preflight(config: RunConfig, tokens_per_s: float, **identity_changes) -> None:
    """A passing preflight report of `config` (its identity changed by `identity_changes`)
    whose smoke round measured `tokens_per_s`, kept where the gate looks."""
    smoke = PreflightCheck(
        name="smoke.generation",
        status=CheckStatus.PASSED,
        measured="m",
        threshold="t",
        remedy="r",
        seconds=1.0,
        figures={"tokens_per_s": tokens_per_s},
    )
    identity = preflight_identity(config).model_copy(update=identity_changes)
    report = PreflightReport(
        identity=identity,
        config_source="test",
        checks=[smoke],
        wall_s=1.0,
        finished_at="2026-12-04T00:00:00+00:00"
        if not identity_changes
        else "2026-12-05T00:00:00+00:00",
        simulated=True,
        work_folder=None,
    )
    write_report(config, report)


def test_the_eta_asset_takes_its_own_configs_preflight_rates_labelled_as_such(
    demo_defs, demo_config_file
):
    config = load_run_config(demo_config_file)
    passing_preflight(config, 1234.0)
    passing_preflight(config, 99.0, code_commit="0" * 40)  # newer, of other code: not read
    job = demo_defs.resolve_job_def("operations")
    with dg.DagsterInstance.ephemeral() as instance:
        run = job.execute_in_process(instance=instance)
    metadata = run.asset_materializations_for_node("eta")[0].metadata
    assert metadata["inputs_from_preflight"].value == 1
    rate = metadata["table"].value["inputs"]["tokens_per_s"]
    assert (rate["central"], rate["source"]) == (1234.0, "preflight")


def test_with_no_preflight_of_its_own_config_the_eta_takes_no_preflight_rate(
    demo_defs, demo_config_file
):
    passing_preflight(load_run_config(demo_config_file), 99.0, code_commit="0" * 40)
    job = demo_defs.resolve_job_def("operations")
    with dg.DagsterInstance.ephemeral() as instance:
        run = job.execute_in_process(instance=instance)
    metadata = run.asset_materializations_for_node("eta")[0].metadata
    assert metadata["inputs_from_preflight"].value == 0


def test_the_priors_of_another_box_are_scaled_to_the_plans_engines_and_workers():
    # Prior: 3.1 s of wall per code sample at 8 workers (central), 3000 tokens/s on one engine.
    plan = RoundPlan(**{**PLAN.__dict__, "lean_workers": 16, "engines": 4, "training_ranks": 8})
    inputs = eta_table(plan, {})["inputs"]
    assert inputs["sft_tokens_per_s"]["central"] == pytest.approx(4000.0 * 8)
    assert inputs["sft_tokens_per_s"]["source"] == "prior (one GPU, scaled to 8)"
    assert inputs["verify_s_per_code_sample"]["central"] == pytest.approx(3.1 * 8 / 16)
    assert inputs["verify_s_per_code_sample"]["source"] == "prior (8 workers, scaled to 16)"
    assert inputs["tokens_per_s"]["central"] == pytest.approx(3000.0 * 4)
    assert inputs["tokens_per_s"]["source"] == "prior (one engine, scaled to 4)"


def test_the_completion_length_prior_is_at_most_the_plans_largest_cap():
    # Prior: 4,000 / 8,000 / 12,000 tokens. PLAN's caps are 100: all three at most 100.
    inputs = eta_table(PLAN, {})["inputs"]
    completion = inputs["mean_completion_tokens"]
    assert (completion["low"], completion["central"], completion["high"]) == (100, 100, 100)
    assert completion["source"] == "prior (at most the largest cap, 100)"
    # the largest cap, 40,960, holds all three: the prior as it is
    plan = RoundPlan(**{**PLAN.__dict__, "eval_caps": {"minif2f": (40960,)}, "pool_cap": 6000})
    wide = eta_table(plan, {})["inputs"]["mean_completion_tokens"]
    assert (wide["low"], wide["central"], wide["high"]) == (4000, 8000, 12000)
    assert wide["source"] == "prior"


def test_measured_rates_are_the_configured_boxs_own_and_never_scaled():
    plan = RoundPlan(**{**PLAN.__dict__, "lean_workers": 16, "engines": 4, "training_ranks": 8})
    inputs = eta_table(plan, ALL_MEASURED)["inputs"]
    assert inputs["sft_tokens_per_s"]["central"] == 100.0
    assert inputs["verify_s_per_code_sample"]["central"] == 2.0
    assert inputs["tokens_per_s"]["central"] == 10.0


def test_each_sampling_steps_balance_names_its_bound_and_the_workers_that_even_it():
    from prover_assets.operations.eta import step_balances

    # From the hand-computed table above: generation 105 s / 205 s / 105 s, verification
    # 23 s / 43 s / 23 s at 8 workers; 8 x 43 / 205 = 1.68 -> 2 workers would balance round 0.
    balances = {b.step: b for b in step_balances(eta_table(PLAN, ALL_MEASURED), 8)}
    assert list(balances) == [
        "baseline minif2f c100",
        "pool round 0",
        "pool correction round 1",
        "candidate minif2f c100",
    ]
    pool = balances["pool round 0"]
    assert (pool.bound_by, pool.balancing_workers) == ("GPU generation", 2)
    assert pool.factor == pytest.approx(205 / 43)
    slow_lean = step_balances(
        {"steps": [{"step": "s: generate", "central": 1.0}, {"step": "s: verify", "central": 2.5}]},
        8,
    )[0]
    assert (slow_lean.bound_by, slow_lean.factor, slow_lean.balancing_workers) == (
        "Lean verification",
        2.5,
        20,
    )
