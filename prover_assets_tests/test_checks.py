"""The asset checks judge the run they check: the values recorded in the checked output's
manifest (the launched run config), not those of the config the graph was built from."""

from __future__ import annotations

import copy

import pytest
import yaml

from prover_assets.definitions import build_definitions
from prover_assets_tests.conftest import demo_run_config

pytestmark = pytest.mark.slow  # the demo's base model is fine-tuned first


def check_results(result) -> dict[tuple[str, str], dict]:
    return {
        (
            e.asset_check_evaluation_data.asset_key.to_user_string(),
            e.asset_check_evaluation_data.check_name,
        ): e.asset_check_evaluation_data
        for e in result.all_events
        if e.event_type_value == "ASSET_CHECK_EVALUATION"
    }


def test_samples_per_problem_judges_the_launched_n_samples_not_the_built_one(tmp_path):
    built = demo_run_config(tmp_path / "data")
    path = tmp_path / "built.yaml"
    path.write_text(yaml.safe_dump(built))
    defs = build_definitions(path)
    launched = copy.deepcopy(built)
    spec = launched["resources"]["experiment"]["config"]["spec"]
    spec["generation"]["n_samples"] = 2  # built: 4
    spec["report"].update(k=2, ks=[1, 2])
    assert built["resources"]["experiment"]["config"]["spec"]["generation"]["n_samples"] == 4
    result = defs.resolve_job_def("baseline").execute_in_process(
        run_config=launched, raise_on_error=False
    )
    assert result.success
    checks = check_results(result)
    per_problem = checks[("generations/minif2f/baseline/c256", "samples_per_problem")]
    assert per_problem.passed, per_problem.description
    generations = tmp_path / "data/generations/minif2f/baseline/c256/generations.jsonl"
    assert len(generations.read_text().splitlines()) == 6 * 2  # 6 problems, the launched n
