"""A job launched before its upstream is materialized fails at the step that reads it with one
sentence naming the asset and the job that makes it, never a FileNotFoundError."""

from __future__ import annotations

import dagster as dg
import pytest
import yaml

from prover_assets import job_names
from prover_assets.assets.graph import graph_assets
from prover_assets.assets.keys import schedule_of
from prover_assets.config import load_run_config
from prover_assets.definitions import build_definitions
from prover_assets.jobs import jobs_making, unmaterialized_message
from prover_assets_tests.support import CONFIGS, demo_run_config

# By hand, from each job's selection in jobs.py: the narrowest job first, the whole round last.
ONE_ITERATION = {
    "eval_problems/minif2f": ["problems", "baseline", "pool_round", "full_round"],
    "statement_audit/statement_audit_minif2f": ["problems", "baseline", "full_round"],
    "verdicts/minif2f/baseline/verdicts_baseline_minif2f_c256": ["baseline", "full_round"],
    "verdicts/pool/verdicts_pool_r1": ["pool_round", "full_round"],
    "sft_checkpoint": ["sft", "full_round"],
    "verdicts/minif2f/candidate/verdicts_candidate_minif2f_c256": ["candidate_eval", "full_round"],
    "eval_report": ["report", "full_round"],
    "eta": ["operations"],
}
# No `full_round` in a graph of several iterations; `iteration` makes one whole.
ITERATIONS = {
    "verdicts/minif2f/baseline/verdicts_baseline_minif2f_c256": ["baseline"],
    "exported_model_seed7": ["sft", "iteration"],
    "eval_report": ["report"],
}


@pytest.mark.parametrize(
    ("config", "expected"),
    [("demo.yaml", ONE_ITERATION), ("demo-iterations.yaml", ITERATIONS)],
)
def test_each_asset_is_made_by_the_jobs_whose_selection_holds_it(config, expected):
    spec = load_run_config(CONFIGS / config).experiment
    assets = graph_assets(spec, schedule_of("exclusive"))
    found = {
        key: jobs_making(dg.AssetKey.from_user_string(key), assets, iterations=spec.iterations > 1)
        for key in expected
    }
    assert found == expected


def test_the_message_names_the_asset_its_iteration_the_folder_and_the_two_narrowest_jobs():
    message = unmaterialized_message(
        dg.AssetKey(["verdicts", "pool", "verdicts_pool_r1"]),
        "2",
        "/data/verdicts/pool/r1/iteration-2",
        ["pool_round", "iteration", "unused"],
    )
    assert message == (
        "this step reads verdicts/pool/verdicts_pool_r1 (iteration 2), which is not materialized "
        "yet (no complete output in /data/verdicts/pool/r1/iteration-2): launch the `pool_round` or "
        "`iteration` job first (the Launchpad, or `dagster job launch -j pool_round -c <your "
        "config>`)."
    )


def test_the_report_launched_on_an_empty_data_root_names_what_it_needs(tmp_path):
    run_config = demo_run_config(tmp_path / "data")
    path = tmp_path / "demo.yaml"
    path.write_text(yaml.safe_dump(run_config))
    result = (
        build_definitions(path)
        .resolve_job_def("report")
        .execute_in_process(run_config=run_config, raise_on_error=False)
    )
    assert not result.success
    (failure,) = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    # A Failure's description is what the UI shows as the step's error, without our frames.
    said = failure.event_specific_data.user_failure_data.description
    folder = tmp_path / "data" / "eval_problems" / "minif2f"
    assert said == (
        f"this step reads eval_problems/minif2f, which is not materialized yet (no complete "
        f"output in {folder}): launch the `problems` or `baseline` job first (the Launchpad, or "
        "`dagster job launch -j problems -c <your config>`)."
    )
    assert "FileNotFoundError" not in str(failure.event_specific_data.error)


@pytest.mark.parametrize(
    ("config", "absent"), [("demo.yaml", "iteration"), ("demo-iterations.yaml", "full_round")]
)
def test_the_job_names_the_domain_uses_are_the_jobs_the_graph_builds(config, absent):
    definitions = build_definitions(CONFIGS / config)
    built = {job.name for job in definitions.resolve_all_job_defs()} - {"__ASSET_JOB"}
    named = {getattr(job_names, name) for name in job_names.__all__ if name != "HEAVY"}
    assert built == named - {absent}
    assert job_names.HEAVY - {absent} <= built
