"""The asset checks judge the run they check: the values recorded in the checked output's
manifest (the launched run config), not those of the config the graph was built from."""

from __future__ import annotations

import copy
import json

import dagster as dg
import pytest
import yaml

from prover_assets.assets.keys import SFT_CHECKPOINT
from prover_assets.assets.metadata import OUTPUT_DIR
from prover_assets.checks.sft import sft_checks
from prover_assets.config import TrainingSpec, load_run_config
from prover_assets.definitions import build_definitions
from prover_assets.records.outputs import Step, StepInputs
from prover_assets.sft.stages import TrainingResult
from prover_assets.sft.trainer import DATA_ORDER_FILE
from prover_assets_tests.support import CONFIGS, demo_run_config


def check_results(result) -> dict[tuple[str, str], dict]:
    return {
        (
            e.asset_check_evaluation_data.asset_key.to_user_string(),
            e.asset_check_evaluation_data.check_name,
        ): e.asset_check_evaluation_data
        for e in result.all_events
        if e.event_type_value == "ASSET_CHECK_EVALUATION"
    }


@pytest.mark.slow  # the demo's base model is fine-tuned first
def test_samples_per_problem_judges_the_launched_n_samples_not_the_built_one(tmp_path):
    built = demo_run_config(tmp_path / "data")
    path = tmp_path / "built.yaml"
    path.write_text(yaml.safe_dump(built))
    defs = build_definitions(path)
    launched = copy.deepcopy(built)
    spec = launched["resources"]["experiment"]["config"]["spec"]
    spec["generation"]["n_samples"] = 2  # built: 4
    spec["report"].update(k=2, ks=[1, 2])
    launched["resources"]["experiment"]["config"]["preflight_override"] = "a test of the checks"
    assert built["resources"]["experiment"]["config"]["spec"]["generation"]["n_samples"] == 4
    result = defs.resolve_job_def("baseline").execute_in_process(
        run_config=launched, raise_on_error=False
    )
    assert result.success
    checks = check_results(result)
    per_problem = checks[
        ("generations/minif2f/baseline/generations_baseline_minif2f_c256", "samples_per_problem")
    ]
    assert per_problem.passed, per_problem.description
    generations = tmp_path / "data/generations/minif2f/baseline/c256/generations.jsonl"
    assert len(generations.read_text().splitlines()) == 6 * 2  # 6 problems, the launched n


def checkpoint_made_by_a_run_with(
    folder, training: TrainingSpec, *, passes: int
) -> dg.AssetsDefinition:
    """An `sft_checkpoint` materialization whose run trained 2 rows for `passes` passes, with
    the run's `training` config in its manifest, as the real step records it."""

    @dg.asset(key=SFT_CHECKPOINT)
    def checkpoint() -> dg.MaterializeResult:
        folder.mkdir(parents=True, exist_ok=True)
        order = [{"micro_step": i, "rows": [i % 2]} for i in range(2 * passes)]
        (folder / DATA_ORDER_FILE).write_text("".join(json.dumps(e) + "\n" for e in order))
        config = {"training": training.model_dump(mode="json")}
        step = Step(folder, str(folder), TrainingResult, StepInputs.hash({}), config)
        result = TrainingResult(
            status="done",
            global_step=2 * passes,
            max_steps=2 * passes,
            resumed_from_step=0,
            removed_partial_checkpoints=[],
            trained_micro_steps_this_run=2 * passes,
            tokens_per_s_this_run=None,
            micro_steps=2 * passes,
            packing_efficiency=1.0,
            rows=2,
            epochs=training.epochs,
            bf16=False,
            wall_s_this_run=1.0,
        )
        step.finish(result, [folder / DATA_ORDER_FILE])
        return dg.MaterializeResult(metadata={OUTPUT_DIR: str(folder)})

    return checkpoint


@pytest.mark.parametrize(("launched_epochs", "passed"), [(2, True), (1, False)])
def test_data_order_judges_the_launched_epochs_not_the_built_ones(
    tmp_path, launched_epochs, passed
):
    built = load_run_config(CONFIGS / "demo.yaml").experiment
    built = built.model_copy(update={"training": built.training.model_copy(update={"epochs": 1})})
    (data_order,) = [c for c in sft_checks(built) if "data_order" in str(c.check_keys)]
    launched = built.training.model_copy(
        update={"epochs": launched_epochs, "gradient_accumulation": 1}
    )
    asset = checkpoint_made_by_a_run_with(tmp_path / "ckpt", launched, passes=2)
    result = dg.materialize([asset, data_order], raise_on_error=False)
    (evaluation,) = check_results(result).values()
    assert evaluation.passed is passed, evaluation.description
