"""The asset graph loads, for the registered and the demo config, through every loader."""

import os
import subprocess
import sys

import dagster as dg
import pytest
import yaml

from prover_assets.assets.keys import generations_key, verdicts_key
from prover_assets.definitions import build_definitions
from prover_assets_tests.dagster_ui import shown_in_a_link
from prover_assets_tests.support import CONFIGS, ROOT, dagster_home


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


@pytest.mark.parametrize("config", ["p2.yaml", "demo.yaml"])
def test_every_node_shows_its_whole_key_on_the_graph(config):
    """The graph labels a node with its key's last part and shows its kinds beside it: the
    two together tell every asset of the graph apart (`minif2f` is an eval set or its audit)."""
    specs = list(build_definitions(CONFIGS / config).resolve_all_asset_specs())
    shown = {(spec.key.path[-1], frozenset(spec.kinds)) for spec in specs}
    assert len(shown) == len(specs)
    assert all(set(spec.key.path[:-1]) <= spec.kinds for spec in specs)


@pytest.mark.parametrize(
    ("label", "shown"),
    [
        ("decontamination_sets", "decontamination_sets"),  # 20 characters: whole
        # as Chromium drew them (test_ui_edges.py checks every link of the registered graph)
        ("minif2f_baseline_c16384_verdicts", "minif2f_basel…_c16384_verdicts"),
        ("mobench_full_candidate_c16384_verdicts", "mobench_full_…_c16384_verdicts"),
        ("generations_candidate_minif2f_c256_seed7", "generations_candid…_c256_seed7"),
    ],
)
def test_the_port_of_dagsters_link_label_cuts_as_the_ui_was_seen_to(label, shown):
    assert shown_in_a_link(label) == shown


@pytest.mark.parametrize("config", ["p2.yaml", "demo.yaml", "demo-iterations.yaml"])
def test_a_groups_links_to_other_groups_tell_generations_from_verdicts(config):
    """A link to another group's asset shows the key's last part alone, cut in the middle
    past 30 characters: within each group, links read apart as drawn, and a generations or
    verdicts link says which it is."""
    graph = build_definitions(CONFIGS / config).resolve_asset_graph()
    links: dict[str, set[dg.AssetKey]] = {}
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        for other in [*node.parent_keys, *node.child_keys]:
            if graph.get(other).group_name != node.group_name:
                links.setdefault(node.group_name, set()).add(other)
    assert links["sft"] and links["report"]
    for linked in links.values():
        shown = {key: shown_in_a_link(key.path[-1]) for key in linked}
        assert len(set(shown.values())) == len(shown)
        for key, label in shown.items():
            if key.path[0] in ("generations", "verdicts"):
                assert label.startswith(key.path[0] + "_")


@pytest.mark.slow
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


@pytest.mark.slow
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


def test_instance_config_shows_no_sign_up_dialog_over_the_ui(tmp_path):
    dagster_home(tmp_path)
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        assert not instance.nux_enabled


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


def test_placeholders_left_are_named_when_the_definitions_load_and_in_every_job(caplog):
    import logging

    from prover_assets.config import placeholders

    left = placeholders(yaml.safe_load((CONFIGS / "p2.yaml").read_text()))
    with caplog.at_level(logging.WARNING, logger="prover_assets.definitions"):
        definitions = build_definitions(CONFIGS / "p2.yaml")
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert f"{len(left)} placeholder values" in warning
    assert all(path in warning for path in left)
    for job in definitions.jobs:
        assert "NOT LAUNCHABLE YET" in job.description
        assert "resources.lean.config.settings.local.workspace" in job.description


def launchpad_scaffold_of(definitions: dg.Definitions, job: str) -> tuple[dict, list[str]]:
    """What the Launchpad scaffolds for `job` (its schema's defaults, as `rootDefaultYaml`
    assembles them) and what Dagster's validation says of it before launch."""
    from dagster._config import validate_config
    from dagster._core.snap.snap_to_yaml import default_values_yaml_from_type_snap

    job_def = definitions.resolve_job_def(job)
    snapshot = job_def.get_job_snapshot().config_schema_snapshot
    root = job_def.run_config_schema.config_type
    scaffold = yaml.safe_load(
        default_values_yaml_from_type_snap(snapshot, snapshot.get_config_snap(root.key))
    )
    checked = validate_config(root, scaffold)
    return scaffold, [] if checked.success else [e.message for e in checked.errors]


def test_the_launchpad_marks_each_placeholder_as_a_missing_entry_before_launch():
    from prover_assets.config import placeholders

    definitions = build_definitions(CONFIGS / "p2.yaml")
    scaffold, errors = launchpad_scaffold_of(definitions, "baseline")
    assert placeholders(scaffold) == []
    assert sorted(e.split(". ")[0] for e in errors) == [
        'Missing required config entry "data_root" at path root:resources:experiment:config:spec',
        'Missing required config entry "path" at path root:resources:experiment:config:spec:model',
        'Missing required config entry "shards" at path root:resources:experiment:config:spec:pool',
        'Missing required config entry "workspace" at path root:resources:lean:config:settings:local',
    ]
    # the rest of the registered config is scaffolded as shipped
    assert scaffold["resources"]["experiment"]["config"]["spec"]["pool"]["size"] == 2000


def test_the_preflight_scaffolds_the_placeholders_that_it_names_as_its_first_failed_check():
    from prover_assets.config import placeholders

    definitions = build_definitions(CONFIGS / "p2.yaml")
    scaffold, errors = launchpad_scaffold_of(definitions, "preflight")
    assert errors == []
    shipped = yaml.safe_load((CONFIGS / "p2.yaml").read_text())
    assert sorted(placeholders(scaffold)) == sorted(placeholders(shipped))


def test_a_launch_in_process_with_a_placeholder_fails_before_any_step_naming_it(tmp_path):
    raw = yaml.safe_load((CONFIGS / "demo.yaml").read_text())
    raw["resources"]["experiment"]["config"]["spec"]["data_root"] = str(tmp_path / "data")
    path = tmp_path / "demo.yaml"
    path.write_text(yaml.safe_dump(raw))
    definitions = build_definitions(path)
    raw["resources"]["experiment"]["config"]["spec"]["model"]["path"] = "REPLACE_ME/model"
    with pytest.raises(dg.DagsterInvalidConfigError) as refused:
        definitions.resolve_job_def("problems").execute_in_process(run_config=raw)
    (message,) = refused.value.error_messages  # the launch-time validation's ConfigError
    assert "1 placeholder values" in message
    assert "resources.experiment.config.spec.model.path" in message
    assert not (tmp_path / "data").exists()  # no step ran


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda spec: spec["generation"].update(temprature=0.7), "temprature"),
        (lambda spec: spec["generation"].update(n_samples="8"), "n_samples"),
    ],
    ids=["unknown_key", "wrong_type"],
)
def test_an_unknown_key_or_a_wrong_type_is_refused_at_launch_naming_it(tmp_path, change, named):
    raw = yaml.safe_load((CONFIGS / "demo.yaml").read_text())
    raw["resources"]["experiment"]["config"]["spec"]["data_root"] = str(tmp_path / "data")
    path = tmp_path / "demo.yaml"
    path.write_text(yaml.safe_dump(raw))
    definitions = build_definitions(path)
    change(raw["resources"]["experiment"]["config"]["spec"])
    with pytest.raises(dg.DagsterInvalidConfigError, match=named):
        definitions.resolve_job_def("problems").execute_in_process(run_config=raw)
    assert not (tmp_path / "data").exists()


def pools_by_asset(definitions) -> dict[str, str | None]:
    graph = definitions.resolve_asset_graph()
    return {
        key.to_user_string(): _step_of(graph.assets_def_for_key(key), key).pool
        for key in graph.get_all_asset_keys()
        if graph.assets_def_for_key(key).is_executable
    }


def _step_of(assets_def: dg.AssetsDefinition, key: dg.AssetKey) -> dg.OpDefinition:
    """The op that materializes `key`: the asset's own, or within a graph-backed asset (the
    overlapped schedule's pairs) the one its output comes from."""
    if not isinstance(assets_def.node_def, dg.GraphDefinition):
        return assets_def.op
    output = assets_def.get_output_name_for_asset_key(key)
    _, handle = assets_def.node_def.resolve_output_to_origin(output, None)
    return assets_def.node_def.get_node(handle).definition


def expected_pool(key: str) -> str | None:
    """The pool each asset needs, from what it runs (a hand-built table of the graph's kinds)."""
    if key.startswith("generations/") or key in ("sft_checkpoint", "exported_model"):
        return "gpu"
    if key == "preflight_report":  # its smoke round loads the model on the GPUs
        return "gpu"
    lean_steps = ("verdicts/", "statement_audit/", "reference_elaboration/")
    if key.startswith(lean_steps) or key == "train_pool":
        return "lean"
    return None


def test_the_registered_config_overlaps_gpu_and_lean_steps_in_their_own_pools():
    definitions = build_definitions(CONFIGS / "p2.yaml")
    pools = pools_by_asset(definitions)
    assert {key: pool for key, pool in pools.items() if pool} == {
        key: expected_pool(key) for key in pools if expected_pool(key)
    }
    assert "gpu" in pools.values() and "lean" in pools.values()
    executor = definitions.resolve_job_def("baseline").executor_def
    assert executor.name == "multiprocess"


def test_the_exclusive_schedule_keeps_every_heavy_step_in_one_pool_in_process():
    definitions = build_definitions(CONFIGS / "demo.yaml")
    pools = pools_by_asset(definitions)
    assert {key for key, pool in pools.items() if pool} == {
        key for key in pools if expected_pool(key) or key == "demo_base_model"
    }
    assert set(pools.values()) - {None} == {"heavy"}
    assert definitions.resolve_job_def("baseline").executor_def.name == "in_process"


def test_overlapped_caps_wait_for_the_previous_generation_not_its_verdicts():
    graph = build_definitions(CONFIGS / "p2.yaml").resolve_asset_graph()
    second_cap = graph.get(generations_key("minif2f", "baseline", 40960))
    upstream = {key.to_user_string() for key in second_cap.parent_keys}
    assert generations_key("minif2f", "baseline", 16384).to_user_string() in upstream
    assert verdicts_key("minif2f", "baseline", 16384).to_user_string() not in upstream
