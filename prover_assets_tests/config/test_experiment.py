"""The experiment spec refuses, when it is read, what would only fail later; training's seeds
and GPUs."""

from pathlib import Path

import pytest
from pydantic import ValidationError

from prover_assets.config import (
    ConfigError,
    EvalSetSpec,
    TrainingSpec,
    load_run_config,
    parse_experiment_spec,
)
from prover_assets_tests.factories import training_spec

CONFIGS = Path(__file__).parents[2] / "configs"


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

    file = {"path": "x.jsonl", "sha256": "0" * 64}
    with pytest.raises(ValidationError, match="needs `preambles: false`"):
        EvalSetSpec(format="mobench", file=file)
    with pytest.raises(ValidationError, match="applies to mobench only"):
        EvalSetSpec(format="minif2f", file=file, preambles=True)
    assert EvalSetSpec(format="mobench", file=file, preambles=False).preambles is False


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
    ("top_k", "carried"),
    [(None, 0), (20, 20)],
    ids=["no_cut", "cut"],
)
def test_the_generation_section_s_sampling_is_its_three_fields_and_the_rest_neutral(top_k, carried):
    raw = load_run_config(CONFIGS / "demo.yaml").experiment.model_dump(mode="json")
    raw["generation"].update(temperature=0.6, top_p=0.9, top_k=top_k)
    assert parse_experiment_spec(raw).generation.sampling.carried() == {
        "temperature": 0.6,
        "top_p": 0.9,
        "top_k": carried,
        "min_p": 0.0,
        "repetition_penalty": 1.0,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
    }
