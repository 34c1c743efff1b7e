"""Run configs read from their files: the shipped ones carry the registered numbers and the
demo's, and a bad file is an error naming its key path or line."""

from pathlib import Path

import pytest
import yaml

from prover_assets.config import (
    ConfigError,
    load_run_config,
    require_filled,
    resolve_path,
)
from prover_assets.records import sha256_file

CONFIGS = Path(__file__).parents[2] / "configs"


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


def test_the_registered_config_keeps_s2_at_135_and_adds_mobench_whole_as_a_further_secondary():
    spec = load_run_config(CONFIGS / "p2.yaml").experiment
    assert (spec.eval_sets["mobench"].preambles, spec.eval_sets["mobench_full"].preambles) == (
        False,
        True,
    )
    assert spec.eval_sets["mobench"].endpoint.startswith("S2, registered secondary")
    assert spec.eval_sets["mobench_full"].endpoint.startswith("further secondary, not registered")


def test_the_demo_plants_an_effect_and_its_null_control_plants_none():
    demo = load_run_config(CONFIGS / "demo.yaml")
    null = load_run_config(CONFIGS / "demo-null.yaml")
    assert demo.lean.rule == "planted_tactic"
    assert (null.lean.rule, null.lean.accept_share) == ("seeded_theorems", 0.3)
    # the same loop otherwise: only the verifier's rule differs
    own = {"name": True, "data_root": True, "sft": {"exclude_solved_all"}}
    assert null.experiment.model_dump(exclude=own) == demo.experiment.model_dump(exclude=own)
    assert not null.experiment.sft.exclude_solved_all


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
