"""The preflight's checks of the environment, each broken on purpose: it fails under its own
name, saying what it measured."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from prover_assets.config import RunConfig, parse_run_config
from prover_assets.preflight import CheckStatus, lean_checks, model_checks
from prover_assets.preflight import environment as env
from prover_assets.preflight.model import timed
from prover_assets.preflight.smoke import SmokeModel, memory_plan_check
from prover_assets_tests.factories import (
    fake_workspace,
    preflight_config,
    registered_like,
    with_local_lean,
)
from prover_assets_tests.lean_double import DOUBLE
from prover_assets_tests.support import full_demo_run_config


def test_a_placeholder_left_fails_its_check_naming_the_key(tmp_path):
    raw = full_demo_run_config(tmp_path / "data")
    raw["resources"]["experiment"]["config"]["spec"]["report"]["prereg"] = "REPLACE_ME/prereg.md"
    check = env.placeholders_check(parse_run_config(raw, "test config"))
    assert check.status == CheckStatus.FAILED
    assert "resources.experiment.config.spec.report.prereg" in check.measured


def test_no_placeholder_passes(tmp_path):
    check = env.placeholders_check(preflight_config(tmp_path / "data"))
    assert (check.status, check.measured) == (CheckStatus.PASSED, "0 placeholders")


def test_a_missing_input_file_fails_the_paths_check_naming_it(tmp_path):
    raw = full_demo_run_config(tmp_path / "data")
    raw["resources"]["experiment"]["config"]["spec"]["report"]["prereg"] = str(tmp_path / "no.md")
    check = env.paths_check(parse_run_config(raw, "test config"))
    assert check.status == CheckStatus.FAILED
    assert "report.prereg" in check.measured and "no.md" in check.measured


def test_a_data_root_under_a_read_only_folder_fails_the_paths_check(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        check = env.paths_check(preflight_config(locked / "data"))
    finally:
        locked.chmod(0o700)
    if check.status == CheckStatus.PASSED:
        pytest.skip("running as root: every folder is writable")
    assert "data_root" in check.measured and "no writable folder" in check.measured


def test_a_wrong_pin_fails_the_pins_check_naming_the_pin(tmp_path):
    workspace = fake_workspace(tmp_path / "ws")
    raw = with_local_lean(
        full_demo_run_config(tmp_path / "data"), workspace, expected_pins={"mathlib_rev": "c" * 7}
    )
    check = lean_checks.pins_check(parse_run_config(raw, "test config"))
    assert check.status == CheckStatus.FAILED
    assert "mathlib_rev" in check.measured and "a" * 40 in check.measured


def test_the_expected_pins_pass_and_are_what_was_read(tmp_path):
    workspace = fake_workspace(tmp_path / "ws")
    raw = with_local_lean(
        full_demo_run_config(tmp_path / "data"), workspace, expected_pins={"mathlib_rev": "aaaa"}
    )
    check = lean_checks.pins_check(parse_run_config(raw, "test config"))
    assert check.status == CheckStatus.PASSED
    assert f"mathlib_rev {'a' * 40}" in check.measured


def test_a_repl_that_never_answers_fails_the_round_trip_within_its_timeout(tmp_path):
    workspace = fake_workspace(tmp_path / "ws")
    raw = with_local_lean(
        full_demo_run_config(tmp_path / "data"), workspace, command=["sleep", "600"]
    )
    check = lean_checks.round_trip_check(
        parse_run_config(raw, "test config"), 1.0, lean_checks.ReplMeasure()
    )
    assert check.status == CheckStatus.FAILED
    assert "timeout" in check.measured
    assert check.seconds < 30


def test_the_simulated_repl_answers_the_round_trip_and_its_import_is_measured(tmp_path):
    config = preflight_config(tmp_path / "data")
    measured = lean_checks.ReplMeasure()
    assert lean_checks.round_trip_check(config, 30.0, measured).status == CheckStatus.PASSED
    assert lean_checks.import_check(config, measured).status == CheckStatus.PASSED
    assert measured.resident_mb is not None and measured.resident_mb > 0
    assert measured.address_space_mb is not None and measured.address_space_mb > 0


def test_a_warmed_repl_over_its_memory_ceiling_fails_the_import_check(tmp_path):
    raw = full_demo_run_config(tmp_path / "data")
    raw["resources"]["lean"]["config"]["settings"]["simulated"]["memory_ceiling_mb"] = 1
    check = lean_checks.import_check(
        parse_run_config(raw, "test config"), lean_checks.ReplMeasure()
    )
    assert check.status == CheckStatus.FAILED
    assert "resident" in check.measured


def test_a_chat_template_that_renders_another_prompt_fails_the_golden_prompt(
    tmp_path, tiny_model_dir
):
    folder = tmp_path / "model"
    shutil.copytree(tiny_model_dir, folder)
    template = folder / "chat_template.jinja"
    # a system turn the baseline was not evaluated with
    system = "{{ '<|im_start|>system\nYou are a prover.<|im_end|>\n' }}"
    template.write_text(system + template.read_text())
    check = model_checks.golden_prompt_check(folder)
    assert check.status == CheckStatus.FAILED
    assert "differs at character 12" in check.measured  # after "<|im_start|>"


def test_the_tiny_models_chat_template_renders_the_golden_prompt(tiny_model_dir):
    assert model_checks.golden_prompt_check(tiny_model_dir).status == CheckStatus.PASSED


def test_the_golden_prompt_is_the_protocol_text_in_qwens_turn_markers():
    statement, golden = model_checks.golden_prompt()
    assert golden.startswith("<|im_start|>user\nComplete the following Lean 4 code:\n\n```lean4\n")
    assert golden.endswith(
        "proof structures that will guide the construction of the final formal proof.<|im_end|>\n<|im_start|>assistant\n"
    )
    assert f"```lean4\n{statement}```" in golden


def test_a_model_folder_without_weights_or_template_fails_naming_each(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "tokenizer_config.json").write_text("{}")
    check = model_checks.model_files_check(folder)
    assert check.status == CheckStatus.FAILED
    assert "missing: weights, tokenizer, chat template" in check.measured


def test_a_memory_model_that_does_not_fit_the_card_fails_naming_the_largest_term(
    tmp_path, tiny_model_dir
):
    raw = full_demo_run_config(tmp_path / "data")
    raw["resources"]["experiment"]["config"]["spec"]["training"]["gpu_memory_gib"] = 0.001
    check = memory_plan_check(parse_run_config(raw, "test config"), SmokeModel(tiny_model_dir, "t"))
    assert check.status == CheckStatus.FAILED
    assert "the largest term is" in check.measured


def test_a_disk_threshold_above_the_free_space_fails_and_below_it_passes(tmp_path):
    config = preflight_config(tmp_path / "data")
    need = sum(env.round_footprint_bytes(config, 0).values())
    free = lambda path: 2 * need  # noqa: E731
    assert env.disk_check(config, 1.5, 0, free).status == CheckStatus.PASSED
    failed = env.disk_check(config, 3.0, 0, free)
    assert failed.status == CheckStatus.FAILED
    assert "footprint" in failed.measured


def test_the_footprint_counts_every_sample_of_the_round_by_hand(tmp_path):
    config = preflight_config(tmp_path / "data")
    # the demo: 24 miniF2F problems x 4 samples at its one cap, by the baseline and one
    # candidate; 30 pool problems x 4 samples in round 0 and in its one correction round
    samples = 24 * 4 * 2 + 30 * 4 * 2
    assert config.experiment.generation.caps == [256]
    footprint = env.round_footprint_bytes(config, 1000)
    assert footprint["verdicts"] == samples * 4096
    assert footprint["generations"] == samples * 256 * 12  # completions at most the cap
    assert footprint["exports"] == 1000  # one seed, one iteration


def test_a_model_folder_whose_revision_differs_fails_naming_both(tmp_path):
    snapshot = tmp_path / ("a" * 40)
    snapshot.mkdir()
    check = model_checks.model_revision_check(snapshot, "b" * 40)
    assert check.status == CheckStatus.FAILED
    assert "a" * 40 in check.measured and "b" * 40 in check.measured


def gpus(**changes) -> dict:
    found = {
        "count": 8,
        "names": ["NVIDIA H100 80GB HBM3"],
        "memory_gib": [79.2],
        "torch": "2.9.0+cu128",
        "vllm_torch": "==2.9.0",
        "torch_cuda": "12.8",
        "driver_cuda": "12.8",
        "vllm": "0.33.0",
        "vllm_error": None,
    }
    return found | changes


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"count": 4}, "GPU 4 not visible"),
        ({"torch_cuda": "12.8", "driver_cuda": "12.4"}, "the driver supports 12.4"),
        ({"torch_cuda": None}, "torch is a CPU build"),
        ({"vllm": None, "vllm_error": "ImportError: libcudart.so.12"}, "vLLM does not import"),
        ({"torch": "2.13.0"}, "vLLM 0.33.0 is built for torch ==2.9.0, torch is 2.13.0"),
    ],
    ids=["too_few", "driver_older", "cpu_torch", "no_vllm", "other_torch"],
)
def test_a_gpu_box_that_cannot_run_the_config_fails_naming_why(tmp_path, changes, named):
    check = env.gpu_check(registered_like(tmp_path), lambda: gpus(**changes))
    assert check.status == CheckStatus.FAILED
    assert named in check.measured


def test_a_gpu_box_that_fits_the_config_passes(tmp_path):
    assert env.gpu_check(registered_like(tmp_path), gpus).status == CheckStatus.PASSED


def test_training_on_all_gpus_is_resolved_to_the_box_s_gpus_and_recorded(tmp_path):
    config = registered_like(tmp_path, gpus="all", gradient_accumulation=8, save_every=8)
    check = env.gpu_check(config, gpus)
    assert check.status == CheckStatus.PASSED
    assert check.measured.endswith("training on GPUs [0, 1, 2, 3, 4, 5, 6, 7]")
    assert check.figures["training_gpus"] == 8.0
    assert "every GPU of the box (training)" in check.threshold


def test_training_on_all_gpus_of_a_box_the_accumulation_does_not_divide_among_fails(tmp_path):
    config = registered_like(tmp_path, gpus="all", gradient_accumulation=8, save_every=8)
    check = env.gpu_check(config, lambda: gpus(count=3))
    assert check.status == CheckStatus.FAILED
    assert "gradient_accumulation 8 is not a multiple of the 3 GPUs this box has" in check.measured


def test_a_driver_newer_than_torchs_cuda_passes(tmp_path):
    newer = lambda: gpus(torch_cuda="12.4", driver_cuda="12.10")  # noqa: E731 - 12.10 > 12.4
    assert env.gpu_check(registered_like(tmp_path), newer).status == CheckStatus.PASSED


def test_host_memory_too_small_for_the_workers_fails(tmp_path):
    config = preflight_config(tmp_path / "data")
    measured = lean_checks.ReplMeasure(resident_mb=8000.0, anonymous_mb=3000.0, mapped_mb=5000.0)
    # (2 workers + the spare) x 3000 MiB own + 5000 MiB mapped once = 14000 MiB = 13.7 GiB:
    # within 90 % of a 16 GiB host (14.4), not of a 15 GiB one (13.5). Resident memory summed
    # (3 x 8000 MiB = 23.4 GiB) would have refused both.
    assert env.host_memory_check(config, measured, 15 << 30).status == CheckStatus.FAILED
    assert env.host_memory_check(config, measured, 16 << 30).status == CheckStatus.PASSED


def test_overlapped_workers_and_engines_need_host_memory_together(tmp_path):
    raw = full_demo_run_config(tmp_path / "data")
    raw["resources"]["gpu"]["config"]["settings"] = {
        "engine": "vllm",
        "device": "cuda",
        "gpus": [0, 1],
        "schedule": "overlapped",
    }
    config = parse_run_config(raw, "test config")
    measured = lean_checks.ReplMeasure(anonymous_mb=512.0, mapped_mb=512.0)
    # (2 workers + the spare) x 0.5 GiB + 0.5 GiB shared beside 2 engines x 6 GiB: 14 GiB,
    # within 90 % of 16 GiB, not of 15
    assert env.host_memory_check(config, measured, 16 << 30).status == CheckStatus.PASSED
    assert env.host_memory_check(config, measured, 15 << 30).status == CheckStatus.FAILED


def double_answering(tmp_path: Path, substring: str, data: str) -> list[str]:
    """The REPL double, answering an error to the command containing `substring`."""
    rules = tmp_path / "rules.json"
    reply = {"messages": [{"severity": "error", "pos": {"line": 1, "column": 0}, "data": data}]}
    rules.write_text(json.dumps([{"match": {"substring": substring}, "reply": reply}]))
    return [*DOUBLE, "--rules", str(rules)]


def test_a_round_trip_answered_with_an_error_fails_quoting_it(tmp_path):
    command = double_answering(tmp_path, "1 + 1 = 2", "unknown constant")
    raw = with_local_lean(
        full_demo_run_config(tmp_path / "d"), fake_workspace(tmp_path / "ws"), command=command
    )
    check = lean_checks.round_trip_check(
        parse_run_config(raw, "test config"), 30.0, lean_checks.ReplMeasure()
    )
    assert check.status == CheckStatus.FAILED
    assert "with errors" in check.measured and "unknown constant" in check.measured


def test_an_import_answered_with_an_error_fails_quoting_it(tmp_path):
    command = double_answering(tmp_path, "import Mathlib", "unknown package 'Mathlib'")
    raw = with_local_lean(
        full_demo_run_config(tmp_path / "d"), fake_workspace(tmp_path / "ws"), command=command
    )
    check = lean_checks.import_check(
        parse_run_config(raw, "test config"), lean_checks.ReplMeasure()
    )
    assert check.status == CheckStatus.FAILED
    assert "unknown package 'Mathlib'" in check.measured


def test_the_round_trip_and_the_import_of_a_healthy_repl_pass_recording_their_seconds(tmp_path):
    raw = with_local_lean(
        full_demo_run_config(tmp_path / "d"), fake_workspace(tmp_path / "ws"), command=DOUBLE
    )
    config = parse_run_config(raw, "test config")
    measured = lean_checks.ReplMeasure()
    trip = lean_checks.round_trip_check(config, 30.0, measured)
    imported = lean_checks.import_check(config, measured)
    assert (trip.status, imported.status) == (CheckStatus.PASSED, CheckStatus.PASSED)
    assert 0 < measured.round_trip_s == trip.figures["repl round trip s"] < 30
    assert config.lean.sandbox is False  # the test configs' REPLs run uncontained, and say so
    assert trip.measured.endswith("; contained by none: off in config")
    assert 0 < measured.import_s == imported.figures["header import s"] < 30


def test_the_paths_check_counts_what_exists(tmp_path):
    config = preflight_config(tmp_path / "data")
    assert env.paths_check(config).measured == "3 of 3 paths exist"
    raw = full_demo_run_config(tmp_path / "data")
    raw["resources"]["experiment"]["config"]["spec"]["report"]["prereg"] = str(tmp_path / "no.md")
    assert env.paths_check(parse_run_config(raw, "t")).measured == (
        f"2 of 3 paths exist; missing: report.prereg ({tmp_path / 'no.md'})"
    )


def test_config_paths_names_every_input_the_local_backend_and_the_model(tmp_path):
    raw = with_local_lean(full_demo_run_config(tmp_path / "d"), tmp_path / "ws")
    paths = env.config_paths(parse_run_config(raw, "t"))
    assert set(paths) == {
        "eval_sets.minif2f.file.path",
        "pool.shards[0].path",
        "report.prereg",
        "lean.workspace",
    }
    assert paths["lean.workspace"] == str(tmp_path / "ws")


def test_a_chat_template_in_the_tokenizer_config_counts_and_an_empty_one_does_not(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "model-00001-of-00002.safetensors").write_bytes(b"")
    (folder / "tokenizer.json").write_text("{}")
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ x }}"}))
    check = model_checks.model_files_check(folder)
    assert check.status == CheckStatus.PASSED
    assert check.measured == (
        "1 weight shards, tokenizer ['tokenizer.json', 'tokenizer_config.json'], chat template "
        "in tokenizer_config.json"
    )
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": ""}))
    assert model_checks.model_files_check(folder).measured.endswith("; missing: chat template")


def test_a_measurement_that_raises_is_the_checks_failure_with_the_exception(tmp_path):
    def broken():
        raise RuntimeError("no such device")

    check = timed("gpu.devices", "t", "r", broken)
    assert (check.status, check.measured) == (CheckStatus.FAILED, "RuntimeError: no such device")


def test_the_host_memory_text_states_each_term(tmp_path):
    config = preflight_config(tmp_path / "data")
    measured = lean_checks.ReplMeasure(anonymous_mb=512.0, mapped_mb=512.0)
    check = env.host_memory_check(config, measured, 16 << 30)
    assert check.measured == (
        "need 2.0 GiB (2 workers + the warm spare x 512 MiB own measured + 512 MiB mapped "
        ".oleans once; the transformers engine's model 0.0 GiB; the export's fp32 merge on the "
        "host 0.0 GiB; schedule exclusive) of 16.0 GiB"
    )
    unmeasured = env.host_memory_check(config, lean_checks.ReplMeasure(), 64 << 30)
    # the ceiling stands in, as if all of it were each worker's own
    assert "the warm spare x 8192 MiB own memory_ceiling_mb + 0 MiB mapped" in (unmeasured.measured)


def test_on_this_cpu_host_the_real_query_finds_no_gpu_for_the_registered_engine(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible here")
    check = env.gpu_check(registered_like(tmp_path))  # torch, nvidia-smi and vllm as installed
    assert check.status == CheckStatus.FAILED
    assert check.measured.startswith("0 GPUs [], [] GiB")
    assert "GPU 0 not visible" in check.measured and "torch is a CPU build" in check.measured


def p2_on_four_gpus(card_gib: float) -> RunConfig:
    """The registered config on 4 GPUs of `card_gib` each, 2 pinned Lean workers."""
    import yaml

    raw = yaml.safe_load((Path(__file__).parents[2] / "configs/p2.yaml").read_text())
    raw["resources"]["gpu"]["config"]["settings"]["gpus"] = [0, 1, 2, 3]
    raw["resources"]["experiment"]["config"]["spec"]["training"]["gpu_memory_gib"] = card_gib
    local = raw["resources"]["lean"]["config"]["settings"]["local"]
    local.pop("auto_workers")
    local["workers"] = 2
    return parse_run_config(raw, "p2 on 4 GPUs")


def test_the_exports_fp32_merge_on_the_host_counts_beside_the_lean_workers_when_larger():
    # The registered config (its model not on disk yet: Qwen3-8B's shape, 8,190,735,360
    # parameters x 4 bytes = 30.5 GiB for the export) on 4 GPUs of 32 GiB (the fp32 model and
    # its headroom, 38.1 GiB, do not fit one: merged on the host): 4 vLLM children x 6 GiB =
    # 24 GiB, so under overlapped the export is the GPU side's larger term, beside 2 pinned
    # workers + the spare x 1 GiB own + 1 GiB mapped = 4 GiB of Lean: 34.5 GiB.
    measured = lean_checks.ReplMeasure(anonymous_mb=1024.0, mapped_mb=1024.0)
    check = env.host_memory_check(p2_on_four_gpus(32.0), measured, 1 << 40)
    assert "the export's fp32 merge on the host 30.5 GiB" in check.measured
    assert check.measured.startswith("need 34.5 GiB")


def test_the_exports_fp32_merge_on_a_gpu_holds_one_weight_file_on_the_host():
    # On 80 GiB cards the merge runs on a GPU: the host holds one 2 GiB file while it is
    # written; the vLLM children's 24 GiB are the GPU side's larger term: 28.0 GiB.
    measured = lean_checks.ReplMeasure(anonymous_mb=1024.0, mapped_mb=1024.0)
    check = env.host_memory_check(p2_on_four_gpus(80.0), measured, 1 << 40)
    assert "the export's fp32 merge on a GPU 2.0 GiB" in check.measured
    assert check.measured.startswith("need 28.0 GiB")
