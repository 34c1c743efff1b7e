"""Run configs: the registered P2 numbers, the demo, and clear errors for bad files."""

from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from prover_assets.config import (
    ConfigError,
    SimulatedLeanSettings,
    TrainingSpec,
    load_run_config,
    parse_experiment_spec,
    require_filled,
    resolve_path,
)
from prover_assets.records import sha256_file

CONFIGS = Path(__file__).parents[1] / "configs"


def test_registered_config_carries_the_design_numbers():
    config = load_run_config(CONFIGS / "p2.yaml")
    spec = config.experiment
    assert spec.kind == "registered"
    assert spec.model.revision == "dfd02e6271a58375dfbf3ece0175277cf6b6a89a"
    assert (spec.generation.temperature, spec.generation.top_p, spec.generation.top_k) == (
        1.0,
        0.95,
        None,
    )
    assert spec.generation.n_samples == 8
    assert spec.generation.caps == [16384, 40960]
    assert spec.caps_of("mobench") == [16384]
    assert (spec.pool.seed, spec.pool.candidates, spec.pool.size) == (20261012, 5000, 2000)
    assert spec.pool.revision == "79fc4fbe87b4c694a941bc63ad92dc38d39d41db"
    assert len(spec.pool.shards) == 4
    assert (spec.sft.max_per_problem, spec.sft.exclude_solved_all, spec.sft.max_seq_len) == (
        4,
        True,
        18432,
    )
    training = spec.training
    assert (
        training.lora_r,
        training.lora_alpha,
        training.epochs,
        training.save_every,
        training.keep_checkpoints,
        training.pad_token_id,
    ) == (64, 128, 2, 40, 2, 151643)
    assert (spec.report.alpha, spec.report.k, spec.report.primary_cap) == (0.05, 8, 16384)
    assert config.lean.budget_s == 180.0
    assert config.lean.expected_pins == {
        "lean_version": "v4.9.0-rc1",
        "mathlib_rev": "d1d1e4b7",
        "repl_rev": "7df77c0a",
    }


def test_shipped_eval_files_match_the_configured_sha256():
    for name in ("p2.yaml", "demo.yaml"):
        spec = load_run_config(CONFIGS / name).experiment
        for eval_set in spec.eval_sets.values():
            path = resolve_path(eval_set.file.path, "eval file")
            assert sha256_file(path) == eval_set.file.sha256


def test_demo_config_uses_the_simulated_verifier_on_cpu():
    config = load_run_config(CONFIGS / "demo.yaml")
    assert config.experiment.kind == "demo"
    assert config.lean.backend == "simulated"
    assert config.gpu.engine == "transformers"


def write_variant(tmp_path, mutate) -> Path:
    raw = yaml.safe_load((CONFIGS / "p2.yaml").read_text())
    mutate(raw)
    path = tmp_path / "variant.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_unknown_key_is_an_error_naming_its_path(tmp_path):
    path = write_variant(
        tmp_path,
        lambda raw: raw["resources"]["experiment"]["config"]["spec"]["generation"].update(
            temprature=0.7
        ),
    )
    with pytest.raises(
        ConfigError,
        match=r"(?s)variant\.yaml.*resources\.experiment\.config\.spec\.generation\.temprature: Extra inputs",
    ):
        load_run_config(path)


def test_wrong_type_is_an_error_naming_its_path(tmp_path):
    path = write_variant(
        tmp_path,
        lambda raw: raw["resources"]["experiment"]["config"]["spec"]["generation"].update(
            n_samples="8"
        ),
    )
    with pytest.raises(
        ConfigError, match=r"spec\.generation\.n_samples: Input should be a valid integer"
    ):
        load_run_config(path)


def test_duplicate_yaml_key_is_an_error_with_its_line(tmp_path):
    path = tmp_path / "dup.yaml"
    path.write_text("resources:\n  lean: {}\n  lean: {}\n")
    with pytest.raises(ConfigError, match=r"dup\.yaml: line 3: duplicate key 'lean'"):
        load_run_config(path)


def test_simulated_verifier_is_refused_outside_the_demo(tmp_path):
    def to_simulated(raw):
        raw["resources"]["lean"]["config"]["settings"] = {
            "simulated": {"rule": "seeded_share", "accept_share": 0.5, "seed": 1}
        }

    with pytest.raises(ConfigError, match="simulated Lean backend is for the demo only"):
        load_run_config(write_variant(tmp_path, to_simulated))


def test_unknown_top_level_key_is_refused(tmp_path):
    path = write_variant(tmp_path, lambda raw: raw.update(extra={}))
    with pytest.raises(ConfigError, match="top-level keys"):
        load_run_config(path)


def test_placeholders_load_but_refuse_to_be_used():
    spec = load_run_config(CONFIGS / "p2.yaml").experiment
    with pytest.raises(ConfigError, match="data_root is still the placeholder"):
        require_filled(spec.data_root, "data_root")


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("generation", "caps"), [256, 256], "repeat a cap"),
        (("data_root",), "", "data_root is empty"),
        (("report", "ks"), [1, 99], r"report.ks \[99\] exceed"),
        (("name",), " ", "name is empty"),
        (("report", "power_gains_points"), [], "power_gains_points: List should have at least 1"),
        (
            ("report", "power_discordant_fractions"),
            [],
            "power_discordant_fractions: List should have at least 1",
        ),
        (
            ("model", "max_model_len"),
            255,
            "model.max_model_len 255 is below the largest generation.caps 256: no sample could",
        ),
        (("sft", "max_seq_len"), 256, "sft.max_seq_len 256 does not exceed sft.cap 256: a row"),
        (
            ("generation", "commit_every"),
            121,  # the demo's pool round: 30 problems x 4 samples
            r"generation.commit_every 121 exceeds the pool round's 120 samples \(pool.size 30 x "
            r"generation.n_samples 4\): no batch would commit before it ends; set it at most 120",
        ),
    ],
)
def test_config_refuses_what_would_fail_later(path, value, message):
    spec = load_run_config(CONFIGS / "demo.yaml").experiment.model_dump(mode="json")
    target = spec
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    with pytest.raises(ConfigError, match=message):
        parse_experiment_spec(spec)


def test_a_commit_of_the_whole_pool_round_is_accepted():
    spec = load_run_config(CONFIGS / "demo.yaml").experiment.model_dump(mode="json")
    spec["generation"]["commit_every"] = 120  # 30 problems x 4 samples
    assert parse_experiment_spec(spec).generation.commit_every == 120


def test_a_hub_model_in_a_demo_is_refused_naming_the_source_it_gave():
    spec = load_run_config(CONFIGS / "demo.yaml").experiment.model_dump(mode="json")
    spec["model"].update(source="hub", path="Qwen/Qwen3-0.6B", revision="a" * 40)
    with pytest.raises(ConfigError) as refused:
        parse_experiment_spec(spec)
    assert (
        "model.source hub in a demo: the demo samples its own tiny model (model.source: "
        "demo_tiny); a hub model is a registered experiment's (kind: registered)"
    ) in str(refused.value)


def test_the_tiny_model_in_a_registered_experiment_is_refused_naming_its_kind():
    spec = load_run_config(CONFIGS / "p2.yaml").experiment.model_dump(mode="json")
    spec["model"]["source"] = "demo_tiny"
    with pytest.raises(ConfigError, match=r"model\.source demo_tiny in a registered experiment"):
        parse_experiment_spec(spec)


def test_a_mobench_eval_set_must_say_whether_preambles_enter_and_minif2f_cannot():
    from prover_assets.config import EvalSetSpec

    file = {"path": "x.jsonl", "sha256": "0" * 64}
    with pytest.raises(ValidationError, match="needs `preambles: false`"):
        EvalSetSpec(format="mobench", file=file)
    with pytest.raises(ValidationError, match="applies to mobench only"):
        EvalSetSpec(format="minif2f", file=file, preambles=True)
    assert EvalSetSpec(format="mobench", file=file, preambles=False).preambles is False


def test_the_registered_config_keeps_s2_at_135_and_adds_mobench_whole_as_a_further_secondary():
    spec = load_run_config(CONFIGS / "p2.yaml").experiment
    assert (spec.eval_sets["mobench"].preambles, spec.eval_sets["mobench_full"].preambles) == (
        False,
        True,
    )
    assert spec.eval_sets["mobench"].endpoint.startswith("S2, registered secondary")
    assert spec.eval_sets["mobench_full"].endpoint.startswith("further secondary, not registered")


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"rule": "planted_tactic", "accept_share": 0.4, "seed": 1}, "meaningless for"),
        ({"rule": "seeded_share", "seed": 1}, "required by rules seeded_theorems and seeded_share"),
        ({"rule": "seeded_theorems", "seed": 1}, "required by rules"),
        ({"rule": "every_third", "seed": 1}, "rule"),
    ],
)
def test_a_simulated_rule_takes_exactly_its_own_settings(settings, message):
    with pytest.raises(ValidationError, match=message):
        SimulatedLeanSettings(**settings)


def test_the_demo_plants_an_effect_and_its_null_control_plants_none():
    demo = load_run_config(CONFIGS / "demo.yaml")
    null = load_run_config(CONFIGS / "demo-null.yaml")
    assert demo.lean.rule == "planted_tactic"
    assert (null.lean.rule, null.lean.accept_share) == ("seeded_theorems", 0.3)
    # the same loop otherwise: only the verifier's rule differs
    own = {"name": True, "data_root": True, "sft": {"exclude_solved_all"}}
    assert null.experiment.model_dump(exclude=own) == demo.experiment.model_dump(exclude=own)
    assert not null.experiment.sft.exclude_solved_all


def test_training_seeds_list_the_registered_seed_first_and_must_include_it():
    spec = load_run_config(CONFIGS / "demo-iterations.yaml").experiment
    assert spec.training.all_seeds() == [20261012, 7]
    assert spec.training.for_seed(7).seed == 7
    with pytest.raises(ValueError, match="not one of training's seeds"):
        spec.training.for_seed(8)
    raw = spec.model_dump(mode="json")
    raw["training"]["seeds"] = [7, 8]
    with pytest.raises(ConfigError, match=r"must include training\.seed 20261012"):
        parse_experiment_spec(raw)
    raw["training"]["seeds"] = [20261012, 7, 7]
    with pytest.raises(ConfigError, match="repeats a seed"):
        parse_experiment_spec(raw)


def test_the_registered_config_is_one_iteration_of_one_training_seed():
    spec = load_run_config(CONFIGS / "p2.yaml").experiment
    assert spec.iterations == 1
    assert spec.training.all_seeds() == [spec.training.seed]


def test_the_registered_config_generates_on_all_eight_gpus_one_engine_each():
    gpu = load_run_config(CONFIGS / "p2.yaml").gpu
    assert (gpu.gpus, gpu.tensor_parallel_size, gpu.pipeline_parallel_size) == (
        list(range(8)),
        1,
        1,
    )


def test_the_registered_config_trains_on_every_gpu_of_the_box():
    training = load_run_config(CONFIGS / "p2.yaml").experiment.training
    assert training.gpus == "all"
    assert training.resolved_gpus(8) == list(range(8))
    assert (training.ranks("cuda", 8), training.ranks("cpu")) == (8, 1)


def training_spec(**changes) -> TrainingSpec:
    """The demo's training section with `changes`."""
    shipped = load_run_config(CONFIGS / "demo.yaml").experiment.training.model_dump()
    return TrainingSpec(**(shipped | changes))


def test_training_gpus_listed_are_used_as_listed_whatever_the_box_has():
    training = training_spec(gpus=[2, 5], gradient_accumulation=4)
    assert training.resolved_gpus(8) == [2, 5] and training.ranks("cuda") == 2


@pytest.mark.parametrize(
    ("visible", "message"),
    [
        (0, "training.gpus is `all`, but this box has no visible GPU"),
        (3, "gradient_accumulation 8 is not a multiple of the 3 GPUs this box has"),
    ],
)
def test_all_gpus_are_refused_on_a_box_without_one_or_that_the_accumulation_does_not_divide(
    visible, message
):
    with pytest.raises(ValueError, match=message):
        training_spec(gpus="all", gradient_accumulation=8).resolved_gpus(visible)


@pytest.mark.parametrize("gpus", ["some", [], [0, 0]])
def test_training_gpus_are_a_list_of_distinct_gpus_or_all(gpus):
    with pytest.raises(ValidationError):
        training_spec(gpus=gpus, gradient_accumulation=8)


def test_dagster_s_run_config_takes_all_and_a_list_for_training_gpus():
    """The Launchpad's schema holds `training.gpus` as any value (Dagster has no union of a
    list and a word); the domain model judges it."""
    import dagster as dg

    from prover_assets.resources.typed_config import dagster_config

    config_class = dagster_config(TrainingSpec)

    @dg.asset
    def takes(config: config_class):  # type: ignore[valid-type]
        return config.gpus

    shipped = training_spec().model_dump(mode="json", exclude_none=True)
    for value in ("all", [0, 3]):
        run_config = {"ops": {"takes": {"config": shipped | {"gpus": value}}}}
        result = dg.materialize([takes], run_config=run_config)
        assert result.output_for_node("takes") == value


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"gpus": [0, 1, 1, 2]}, r"gpus \[0, 1, 1, 2\] names a GPU twice"),
        (
            {"gpus": [0, 1, 2], "tensor_parallel_size": 2},
            r"gpus \[0, 1, 2\] do not split into engines of 2 GPUs",
        ),
        ({"gpus": []}, r"gpus \[\] do not split into engines of 1 GPUs"),
    ],
)
def test_gpus_that_cannot_be_cut_into_engines_are_refused(settings, message):
    from prover_assets.config import EngineSettings

    with pytest.raises(ValidationError, match=message):
        EngineSettings(engine="vllm", **settings)
