"""`dagster job launch -w workspace.yaml -j baseline -c <config>` as a user runs it: with the
project's dagster.yaml (runs queue until a daemon takes them), the daemon of the session's
`dagster dev`, and the same command launched twice: the second run reuses every finished asset.
The session's preflight, which the heavy jobs need, is launched from the Launchpad
(conftest.demo_preflight_run)."""

from __future__ import annotations

import json

import dagster as dg
import pytest
import yaml

from prover_assets.definitions import build_definitions
from prover_assets_tests.processes import launch, launch_and_wait
from prover_assets_tests.support import assert_tuning_shipped

pytestmark = pytest.mark.slow  # a whole loop


@pytest.fixture(scope="module")
def user_setup(demo_dagster_dev, demo_preflight_run):
    return demo_dagster_dev


def materializations(setup, run_id: str) -> dict[str, dict]:
    with dg.DagsterInstance.from_config(str(setup.home)) as instance:
        records = instance.get_records_for_run(
            run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION
        ).records
        return {
            r.event_log_entry.dagster_event.asset_key.to_user_string(): {
                name: value.value
                for name, value in r.event_log_entry.asset_materialization.metadata.items()
            }
            for r in records
        }


def test_a_heavy_job_whose_config_has_no_preflight_is_refused_saying_what_to_run(
    user_setup, tmp_path
):
    raw = yaml.safe_load(user_setup.config.read_text())
    raw["resources"]["experiment"]["config"]["spec"]["generation"]["temperature"] = 0.7
    never_preflighted = tmp_path / "demo-t07.yaml"
    never_preflighted.write_text(yaml.safe_dump(raw))
    with dg.DagsterInstance.from_config(str(user_setup.home)) as instance:
        before = [run.run_id for run in instance.get_runs()]
        refused = launch(user_setup, "baseline", never_preflighted)
        after = [run.run_id for run in instance.get_runs()]
    assert refused.returncode != 0
    output = refused.stdout + refused.stderr
    assert "job 'baseline' refused: no preflight has run for this config" in output
    assert "make preflight" in output
    assert after == before  # no run made for it


def test_the_preflight_job_passes_with_its_report(user_setup, demo_preflight_run):
    run = demo_preflight_run  # launched from the Launchpad; the CLI launches are the baseline's
    assert run.status == dg.DagsterRunStatus.SUCCESS
    (metadata,) = materializations(user_setup, run.run_id).values()
    assert metadata["passed"] is True
    assert metadata["report"].startswith("# Preflight PASSED")
    assert metadata["figures"]["tokens_per_s"] > 0


def test_baseline_launch_then_relaunch_resumes_without_recomputing(user_setup):
    first = launch_and_wait(user_setup, "baseline")
    assert first.status == dg.DagsterRunStatus.SUCCESS
    made = materializations(user_setup, first.run_id)
    expected = {
        key.to_user_string()
        for key in build_definitions(user_setup.config)
        .resolve_job_def("baseline")
        .asset_layer.executable_asset_keys
    }
    assert set(made) == expected
    generations = user_setup.data / "generations/minif2f/baseline/c256/generations.jsonl"
    before = generations.read_bytes()

    second = launch_and_wait(user_setup, "baseline")
    assert second.status == dg.DagsterRunStatus.SUCCESS and second.run_id != first.run_id
    again = materializations(user_setup, second.run_id)
    assert set(again) == expected
    assert {key: meta["reused_complete_output"] for key, meta in again.items()} == dict.fromkeys(
        expected, True
    )
    assert generations.read_bytes() == before
    manifest = json.loads((generations.parent / "manifest.json").read_text())
    assert manifest["counts"]["rows"] == len(before.splitlines())


def test_the_mechanics_size_demo_model_is_the_shipped_tuning(user_setup):
    if not (user_setup.data / "demo_base_model" / "manifest.json").exists():  # run alone
        launch_and_wait(user_setup, "baseline")
    assert_tuning_shipped(user_setup.data)
