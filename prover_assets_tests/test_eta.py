"""The ETA of a full round: hand-computed hours, pooled measurements, priors, and the asset."""

import dagster as dg
import pytest

from prover_assets.assets.keys import generations_key
from prover_assets.definitions import build_definitions
from prover_assets.report.eta import INPUTS, RoundPlan, eta_table, measured_inputs

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
}


def test_all_inputs_measured_gives_the_hand_computed_hours():
    table = eta_table(PLAN, ALL_MEASURED)
    seconds = {step["step"]: step["central"] * 3600 for step in table["steps"]}
    # 20 eval samples x 50 tokens / 10 tok/s; 20 x 0.5 with code x 2 s; the pool has 40
    # samples, 20 children (half unsolved); SFT: 20 problems x 2 rows x 300 tokens / 100 tok/s.
    assert seconds == pytest.approx(
        {
            "baseline minif2f c100: generate": 100,
            "baseline minif2f c100: verify": 20,
            "pool round 0: generate": 200,
            "pool round 0: verify": 40,
            "pool correction round 1: generate": 100,
            "pool correction round 1: verify": 20,
            "SFT training": 120,
            "candidate minif2f c100: generate": 100,
            "candidate minif2f c100: verify": 20,
        }
    )
    assert table["total_hours"] == pytest.approx({"low": 0.2, "central": 0.2, "high": 0.2})
    assert {i["source"] for i in table["inputs"].values()} == {"measured"}


def test_completion_tokens_are_clipped_at_the_cap():
    plan = RoundPlan(**{**PLAN.__dict__, "eval_caps": {"minif2f": (30,)}})
    steps = {s["step"]: s for s in eta_table(plan, ALL_MEASURED)["steps"]}
    assert steps["baseline minif2f c30: generate"]["central"] * 3600 == pytest.approx(20 * 30 / 10)


def test_unmeasured_inputs_are_priors_with_low_below_high_at_every_step():
    table = eta_table(PLAN, {})
    assert {i["source"] for i in table["inputs"].values()} == {"prior"}
    for step in table["steps"]:
        assert step["low"] < step["central"] < step["high"], step


def test_one_measured_input_has_no_spread_while_the_rest_keep_theirs():
    table = eta_table(PLAN, {"tokens_per_s": 10.0})
    rate = table["inputs"]["tokens_per_s"]
    assert (rate["low"], rate["central"], rate["high"], rate["source"]) == (10, 10, 10, "measured")
    assert table["inputs"]["mean_completion_tokens"]["source"] == "prior"


def test_measurements_pool_work_over_time_and_ignore_reused_outputs():
    generations = [
        {"generated_now": 10, "mean_completion_tokens": 100.0, "tokens_per_s": 50.0, "no_code": 2},
        {"generated_now": 30, "mean_completion_tokens": 200.0, "tokens_per_s": 100.0, "no_code": 3},
        {"generated_now": 0, "mean_completion_tokens": 0.0, "tokens_per_s": 0.0, "no_code": 0},
    ]
    verdicts = [
        {"code_bearing_now": 5, "wall_s": 10.0},
        {"code_bearing_now": 15, "wall_s": 30.0},
        {"code_bearing_now": 0, "wall_s": 0.1},
    ]
    measured = measured_inputs(
        generations,
        verdicts,
        correction_plan={"unsolved_problems": 3, "solved_problems": 1},
        train_pool={"pool": 3},
        sft_shards={"rows": 6, "tokens": 600},
        sft_checkpoint={"tokens_per_s": 1234.0},
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


def test_eta_asset_turns_a_recorded_materialization_into_measurements(demo_defs):
    job = demo_defs.resolve_job_def("operations")
    with dg.DagsterInstance.ephemeral() as instance:
        before = job.execute_in_process(instance=instance)
        instance.report_runless_asset_event(
            dg.AssetMaterialization(
                asset_key=generations_key("minif2f", "baseline", 256),
                metadata={
                    "generated_now": 24,
                    "mean_completion_tokens": 120.0,
                    "tokens_per_s": 60.0,
                    "no_code": 6,
                },
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
