"""The asset graph loads, for the registered and the demo config, through every loader."""

import os
import subprocess
import sys

import dagster as dg
import pytest

from prover_assets.definitions import build_definitions
from prover_assets_tests.conftest import CONFIGS, ROOT, dagster_home


@pytest.mark.parametrize("config", ["p2.yaml", "demo.yaml"])
def test_definitions_load(config):
    defs = build_definitions(CONFIGS / config)
    dg.Definitions.validate_loadable(defs)


def test_registered_graph_has_one_asset_per_eval_set():
    keys = build_definitions(CONFIGS / "p2.yaml").resolve_asset_graph().get_all_asset_keys()
    assert {
        dg.AssetKey(["eval_problems", "minif2f"]),
        dg.AssetKey(["eval_problems", "mobench"]),
    } <= keys


def test_workspace_validates_with_the_dagster_cli():
    env = {**os.environ, "PROVER_ASSETS_CONFIG": str(CONFIGS / "demo.yaml")}
    result = subprocess.run(
        [
            os.path.join(os.path.dirname(sys.executable), "dagster"),
            "definitions",
            "validate",
            "-w",
            "workspace.yaml",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_loading_definitions_imports_no_torch_or_vllm():
    code = (
        "import sys; import prover_assets.definitions; "
        "print(sorted(m for m in ('torch', 'vllm', 'transformers') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.stdout.strip() == "[]", result.stderr


def test_instance_config_gives_every_pool_one_slot_per_op_and_monitors_runs(tmp_path):
    dagster_home(tmp_path)
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        pools = instance.get_concurrency_config().pool_config
        assert pools.default_pool_limit == 1
        assert pools.pool_granularity.value == "op"
        assert instance.run_monitoring_enabled
        assert instance.run_monitoring_settings["free_slots_after_run_end_seconds"] == 10


@pytest.mark.parametrize("config", ["p2.yaml", "demo.yaml"])
def test_every_asset_and_check_says_what_it_means(config):
    graph = build_definitions(CONFIGS / config).resolve_asset_graph()
    undescribed = [key for key in graph.get_all_asset_keys() if not graph.get(key).description]
    undescribed += [
        key for key in graph.asset_check_keys if not graph.get_check_spec(key).description
    ]
    assert undescribed == []


def test_readme_documents_every_job_and_check():
    readme = (ROOT / "README.md").read_text()
    defs = build_definitions(CONFIGS / "p2.yaml")
    checks = {key.name for key in defs.resolve_asset_graph().asset_check_keys}
    jobs = {job.name for job in defs.jobs}
    assert {name for name in checks | jobs if f"`{name}`" not in readme} == set()
