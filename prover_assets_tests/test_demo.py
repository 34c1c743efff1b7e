"""The smoke loop: the demo config (the positive control) end to end, job by job as a user
launches them, with SFT training stopped (SIGTERM) half-way and resumed; then every seam checked
on the real files, each seam check shown to fail when its seam is broken on purpose, and the
planted effect detected. The null control is test_demo_null.py."""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import shutil
import time
from pathlib import Path

import dagster as dg
import numpy as np
import pytest
import yaml

from prover_assets.assets.keys import SFT_CHECKPOINT, SFT_SHARDS, generations_key, verdicts_key
from prover_assets.assets.metadata import OUTPUT_DIR, latest_materialization
from prover_assets.definitions import build_definitions
from prover_assets.generation.revision import MODEL_DIR, model_revision
from prover_assets.records import MANIFEST_NAME
from prover_assets.records.gates import materialization_of
from prover_assets.records.manifest import read_manifest, recorded_path
from prover_assets.report.runs import RunFiles
from prover_assets.report.validity import TrainingFiles, ValiditySettings, judge_comparison
from prover_assets.verify.history import COST_HISTORY_DIR, read_costs
from prover_assets.verify.runner import VerificationResult
from prover_assets_tests import seams
from prover_assets_tests.demo_round import run_job
from prover_assets_tests.support import (
    assert_tuning_shipped,
    full_demo_run_config,
)

# The whole demo loop, its format tuning included when it is the session's first: a bound of its
# own on a hung loop, not an expectation of speed (two test processes share 2 cores).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(2700)]

EPOCHS = full_demo_run_config(Path("unused"))["resources"]["experiment"]["config"]["spec"][
    "training"
]["epochs"]
TOLERANCE = 1e-4  # fp32 logprobs of a merged LoRA vs the adapter applied on the fly


def pool_rounds(root: Path) -> list[tuple[Path, Path]]:
    return [
        (
            root / f"generations/pool/r{r}/generations.jsonl",
            root / f"verdicts/pool/r{r}/verdicts.jsonl",
        )
        for r in (0, 1)
    ]


def eval_runs(root: Path) -> list[tuple[Path, Path]]:
    return [
        (
            root / f"generations/minif2f/{s}/c256/generations.jsonl",
            root / f"verdicts/minif2f/{s}/c256/verdicts.jsonl",
        )
        for s in ("baseline", "candidate")
    ]


def test_every_job_succeeds_with_every_check_passing(finished_round):
    for name, (result, failed_checks) in finished_round["outcomes"].items():
        if name == "sft stopped":
            continue
        assert result.success, name
        assert failed_checks == [], (name, [(e.asset_key, e.check_name) for e in failed_checks])


def upstream_read(folder: Path, root: Path, models: dict[str, str]) -> set[str]:
    """The assets the step of `folder` read, as its manifest says: those whose outputs it names
    as inputs (by the folders they lie in under the data root), and the model assets whose
    revision (`models`: revision -> asset) it records having loaded, a model being named by
    the sha256 of its weights, not hashed again as a file input by every step that loads it."""
    manifest = read_manifest(folder)
    assets = set()
    for entry in manifest["inputs"]:
        path = recorded_path(folder, entry["path"]).resolve()
        if root.resolve() not in path.parents:
            continue  # a source outside the data root (a data set, a config)
        while not (path / MANIFEST_NAME).is_file():
            path = path.parent
        assets.add("/".join(materialization_of(path, root).asset))
    loaded = {manifest["config"].get(name) for name in ("model_rev", "base_model_rev")}
    return assets | {models[revision] for revision in loaded if revision in models}


def test_each_assets_declared_upstream_is_what_its_manifest_says_it_read(finished_round):
    """Every dependency the graph draws is one the step read, and every read one is drawn:
    `deps` and the reads cannot drift apart unseen (the EOS ids `sft_shards` takes from the
    base model's tokenizer are recorded by value: its one model dependency taken as drawn)."""
    root = finished_round["root"]
    graph = build_definitions(finished_round["config"]).resolve_asset_graph()
    models = {
        model_revision(root / name / MODEL_DIR): name
        for name in ("demo_base_model", "exported_model")
    }
    differing, compared = {}, set()
    with dg.DagsterInstance.from_config(str(finished_round["home"])) as instance:
        for key in graph.materializable_asset_keys:
            event = latest_materialization(instance, key)
            metadata = event.asset_materialization.metadata if event else {}
            if OUTPUT_DIR not in metadata:
                continue  # no output folder (the ETA, the preflight's report, made per run)
            folder = Path(metadata[OUTPUT_DIR].value)
            declared = {parent.to_user_string() for parent in graph.get(key).parent_keys}
            read = upstream_read(folder, root, models)
            if key == SFT_SHARDS:
                read |= {"demo_base_model"} & declared
            if read != declared:
                differing[key.to_user_string()] = {
                    "read": sorted(read),
                    "declared": sorted(declared),
                }
            compared.add(key.to_user_string())
    assert differing == {}
    assert len(compared) == 19 and "eval_report" in compared


def test_a_copied_data_root_resumes_with_every_output_reused_and_every_check_passing(
    finished_round, tmp_path
):
    moved = tmp_path / "moved" / "mini"
    shutil.copytree(finished_round["root"], moved, symlinks=True)  # as `cp -a` copies it
    raw = json.loads(json.dumps(finished_round["raw"]))
    raw["resources"]["experiment"]["config"]["spec"]["data_root"] = str(moved)
    config = tmp_path / "moved.yaml"
    config.write_text(yaml.safe_dump(raw))
    defs = build_definitions(config)
    with dg.DagsterInstance.from_config(str(finished_round["home"])) as instance:
        for name in ("baseline", "pool_round", "sft", "candidate_eval", "report"):
            result, failed_checks = run_job(defs, name, instance)
            assert result.success, name
            assert failed_checks == [], (name, [c.check_name for c in failed_checks])
            for event in result.get_asset_materialization_events():
                metadata = event.step_materialization_data.materialization.metadata
                where = metadata["output_dir"].value if "output_dir" in metadata else None
                assert where is None or Path(where).is_relative_to(moved), (name, where)
                if "reused_complete_output" in metadata:
                    assert metadata["reused_complete_output"].value is True, (name, where)


def test_the_demo_model_is_the_shipped_tuning(finished_round):
    assert_tuning_shipped(finished_round["root"])


def test_the_stopped_training_step_failed_as_stopped_not_as_an_error(finished_round):
    result, _ = finished_round["outcomes"]["sft stopped"]
    assert not result.success
    summary = finished_round["stopped_summary"]
    assert summary["status"] == "stopped"
    assert 0 < summary["global_step"] < summary["max_steps"]
    failures = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    assert [e.step_key for e in failures] == ["sft_checkpoint"]
    assert "saved and stopped" in failures[0].event_specific_data.error.message


def test_generation_keys_equal_verification_keys_and_code_hashes_match(finished_round):
    root = finished_round["root"]
    checked = [
        seams.check_generations_match_verdicts(*pair)
        for pair in pool_rounds(root) + eval_runs(root)
    ]
    assert min(checked) > 0


def test_the_candidates_lean_work_was_ordered_by_the_baselines_measured_history(finished_round):
    root = finished_round["root"]
    baseline, candidate = (
        VerificationResult.read(verdicts.parent) for _, verdicts in eval_runs(root)
    )
    assert baseline.ordered_by_history == 0  # the first Lean runs on these statements
    assert candidate.ordered_by_history > 0
    assert read_costs(root / COST_HISTORY_DIR)


def test_no_truncated_sample_is_accepted(finished_round):
    root = finished_round["root"]
    accepted = [
        seams.check_no_truncated_sample_accepted(*pair)
        for pair in pool_rounds(root) + eval_runs(root)
    ]
    assert sum(accepted) > 0  # the seam was exercised


def test_every_sft_row_fed_to_the_trainer_is_an_accepted_sample_with_the_right_mask(finished_round):
    root = finished_round["root"]
    fed = seams.check_sft_rows_are_accepted_samples(
        root / "sft_shards", root / "sft_checkpoint" / "data_order.jsonl", pool_rounds(root)
    )
    rows = seams.jsonl(root / "sft_shards" / "rows.jsonl")
    assert fed == len(rows) * EPOCHS


def test_training_order_survives_the_stop_and_resume(finished_round):
    root = finished_round["root"]
    summary = json.loads((root / "sft_checkpoint" / "summary.json").read_text())
    assert summary["resumed_from_step"] > 0  # it really resumed
    seams.check_training_order(
        root / "sft_checkpoint" / "data_order.jsonl",
        micro_steps=summary["micro_steps"],
        rows=len(seams.jsonl(root / "sft_shards" / "rows.jsonl")),
        epochs=EPOCHS,
    )


def first_row_ids(root: Path) -> list[int]:
    sample = seams.jsonl(root / "generations/pool/r0/generations.jsonl")[0]
    return sample["prompt_ids"] + sample["completion_ids"]


def test_the_export_reproduces_the_adapters_logprobs(finished_round):
    root = finished_round["root"]
    difference = seams.check_export_reproduces_adapter(
        root / "demo_base_model/model",
        root / "sft_checkpoint/adapter",
        root / "exported_model/model",
        first_row_ids(root),
        tolerance=TOLERANCE,
    )
    assert difference <= TOLERANCE


def test_the_candidate_was_sampled_from_the_export(finished_round):
    root = finished_round["root"]
    revision = seams.check_candidate_is_the_export(
        root / "generations/minif2f/candidate/c256/generations.jsonl", root / "exported_model/model"
    )
    assert revision == json.loads((root / "exported_model/parity.json").read_text())["revision"]


def test_the_report_is_secondary_and_simulated(finished_round):
    seams.check_report_is_secondary_and_simulated(seams.report_folder(finished_round["root"]))


def test_the_planted_effect_is_detected_by_the_registered_test(finished_round):
    folder = seams.report_folder(finished_round["root"])
    (comparison,) = json.loads((folder / "summary.json").read_text())["comparisons"]
    table = comparison["table"]
    assert comparison["p_value"] < 0.05
    assert table["candidate_only"] > table["baseline_only"]
    assert comparison["decision"] == "success"
    text = (folder / "report.md").read_text()
    assert "planted by construction" in text
    assert "**Decision (applied by code): success.**" in text


def test_the_report_says_what_each_run_cost_as_its_steps_measured_it(finished_round):
    folder = seams.report_folder(finished_round["root"])
    costs = json.loads((folder / "summary.json").read_text())["costs"]
    assert [(c["system"], c["eval_set"], c["cap"]) for c in costs] == [
        ("baseline", "minif2f", 256),
        ("candidate", "minif2f", 256),
    ]
    for cost in costs:
        # measured on this machine: the tiny model's generation took CPU; the simulated
        # verifier starts no REPL, so no Lean CPU
        assert cost["generation"]["cpu_s"] > 0 and cost["generation"]["wall_s"] > 0
        assert cost["verification"]["children_cpu_s"] == pytest.approx(0, abs=0.5)
    text = (folder / "report.md").read_text()
    assert "## Cost of each run (secondary)" in text and "round_time.png" in text
    steps = json.loads((folder / "summary.json").read_text())["round_costs"]
    assert [s["step"] for s in steps][2:] == [
        *[f"pool round 0: {what}" for what in ("generate", "verify")],
        *[f"pool correction round 1: {what}" for what in ("generate", "verify")],
        "SFT shards",
        "SFT training",
        "export",
        "candidate minif2f c256: generate",
        "candidate minif2f c256: verify",
    ]
    assert all(s["usage"]["wall_s"] > 0 for s in steps)  # every step of the round measured
    assert all(s["gpus"] == 0 for s in steps)  # on this machine, every step ran on the host
    # the training stopped half-way (SIGTERM) is the one step with an earlier attempt: failed,
    # as its run did, with the CPU its trainer had spent
    earlier = {s["step"]: s["earlier"] for s in steps if s["earlier"]}
    assert list(earlier) == ["SFT training"]
    (stopped,) = earlier["SFT training"]
    assert stopped["ended"] == "failed" and stopped["usage"]["children_cpu_s"] > 0


def test_each_heavy_steps_materialization_says_what_it_used(finished_round):
    with dg.DagsterInstance.from_config(str(finished_round["home"])) as instance:

        def used(key: dg.AssetKey) -> dict:
            event = instance.get_latest_materialization_event(key)
            return {
                k: getattr(v, "value", v) for k, v in event.asset_materialization.metadata.items()
            }

        generated = used(generations_key("minif2f", "baseline", 256))
        judged = used(verdicts_key("minif2f", "baseline", 256))
        trained = used(SFT_CHECKPOINT)
    stream = finished_round["root"] / "generations/minif2f/baseline/c256/generations.jsonl"
    rows = [json.loads(line) for line in stream.read_text().splitlines()]
    assert generated["tokens_generated"] == sum(len(r["completion_ids"]) for r in rows)
    assert generated["tokens_prompted"] == sum(len(r["prompt_ids"]) for r in rows)
    # the tiny model sampled on the host: no GPU held, none of its time
    assert (generated["used_gpus"], generated["used_gpu_s"]) == (0, 0.0)
    assert generated["used_wall_s"] > 0
    verdicts = finished_round["root"] / "verdicts/minif2f/baseline/c256/verdicts.jsonl"
    verdict_rows = [json.loads(line) for line in verdicts.read_text().splitlines()]
    copied = sum(r["cached_from"] is not None for r in verdict_rows)
    assert judged["verdicts_cached"] == copied
    assert judged["lean_runs"] == len(verdict_rows) - copied  # no timeout, no retry on the demo
    shards = json.loads((finished_round["root"] / "sft_shards/manifest.json").read_text())
    assert trained["tokens_trained"] == shards["counts"]["counts"]["tokens"] * EPOCHS


def demo_run_files(root: Path, system: str) -> RunFiles:
    return RunFiles(
        system,
        "minif2f",
        256,
        root / "eval_problems/minif2f/problems.jsonl",
        root / f"generations/minif2f/{system}/c256/generations.jsonl",
        root / f"verdicts/minif2f/{system}/c256/verdicts.jsonl",
    )


def demo_training_files(root: Path, checkpoint: Path | None = None) -> TrainingFiles:
    return TrainingFiles(
        shards=root / "sft_shards",
        pool_generations=tuple(generations for generations, _ in pool_rounds(root)),
        pool=root / "train_pool/train_pool.jsonl",
        decontamination_sets=root / "decontamination_sets/decontamination_sets.json",
        checkpoint=checkpoint or root / "sft_checkpoint",
        export=root / "exported_model",
    )


def test_the_reports_validity_table_holds_every_condition_with_the_files_it_judged(
    finished_round,
):
    summary = json.loads((seams.report_folder(finished_round["root"]) / "summary.json").read_text())
    (pair,) = summary["validity"]
    names = {c["name"] for c in pair["conditions"]}
    assert {"data_order", "logprob_parity", "read_back_exact", "no_eval_leak"} <= names
    assert pair["held"], [c for c in pair["conditions"] if not c["held"]]
    order = next(c for c in pair["conditions"] if c["name"] == "data_order")
    data_order = finished_round["root"] / "sft_checkpoint/data_order.jsonl"
    assert order["files"][0]["sha256"] == hashlib.sha256(data_order.read_bytes()).hexdigest()


# Each seam broken on purpose, on a copy of the real files.


@pytest.fixture
def copy_of(finished_round, tmp_path):
    def copy(relative: str) -> Path:
        target = tmp_path / relative
        source = finished_round["root"] / relative
        if source.is_dir():
            shutil.copytree(source, target)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, target)
        return target

    return copy


def rewrite(path: Path, change) -> None:
    rows = seams.jsonl(path)
    change(rows)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def first_where(rows, predicate) -> dict:
    return next(r for r in rows if predicate(r))


def test_a_missing_verdict_breaks_the_key_seam(copy_of):
    generations = copy_of("generations/pool/r0/generations.jsonl")
    verdicts = copy_of("verdicts/pool/r0/verdicts.jsonl")
    rewrite(verdicts, lambda rows: rows.pop())
    with pytest.raises(seams.SeamBroken, match="without a verdict"):
        seams.check_generations_match_verdicts(generations, verdicts)


def test_a_verdict_of_other_code_breaks_the_hash_seam(copy_of):
    generations = copy_of("generations/pool/r0/generations.jsonl")
    verdicts = copy_of("verdicts/pool/r0/verdicts.jsonl")
    rewrite(verdicts, lambda rows: rows[-1].update(code_sha256="0" * 64))
    with pytest.raises(seams.SeamBroken, match="hashes to"):
        seams.check_generations_match_verdicts(generations, verdicts)


def test_an_accepted_length_capped_sample_breaks_the_truncation_seam(copy_of):
    generations = copy_of("generations/pool/r0/generations.jsonl")
    verdicts = copy_of("verdicts/pool/r0/verdicts.jsonl")
    accepted = seams.sample_key(first_where(seams.jsonl(verdicts), lambda v: v["accepted"]))
    rewrite(
        generations,
        lambda rows: first_where(rows, lambda g: seams.sample_key(g) == accepted).update(
            finish_reason="length"
        ),
    )
    with pytest.raises(seams.SeamBroken, match="truncated"):
        seams.check_no_truncated_sample_accepted(generations, verdicts)


def sft_inputs(copy_of) -> tuple[Path, Path, list[tuple[Path, Path]]]:
    shards = copy_of("sft_shards")
    order = copy_of("sft_checkpoint/data_order.jsonl")
    rounds = [
        (
            copy_of(f"generations/pool/r{r}/generations.jsonl"),
            copy_of(f"verdicts/pool/r{r}/verdicts.jsonl"),
        )
        for r in (0, 1)
    ]
    return shards, order, rounds


def test_a_changed_token_breaks_the_sft_row_seam(copy_of):
    shards, order, rounds = sft_inputs(copy_of)
    tokens = np.fromfile(shards / "tokens-00000.bin", dtype="<u4")
    tokens[-1] = (tokens[-1] + 1) % 1000
    tokens.tofile(shards / "tokens-00000.bin")
    with pytest.raises(seams.SeamBroken, match="tokens differ"):
        seams.check_sft_rows_are_accepted_samples(shards, order, rounds)


def test_a_shifted_loss_mask_breaks_the_sft_row_seam(copy_of):
    shards, order, rounds = sft_inputs(copy_of)
    rewrite(
        shards / "rows.jsonl", lambda rows: rows[0].update(prompt_len=rows[0]["prompt_len"] - 1)
    )
    with pytest.raises(seams.SeamBroken, match="context of"):
        seams.check_sft_rows_are_accepted_samples(shards, order, rounds)


def test_a_row_from_a_rejected_sample_breaks_the_sft_row_seam(copy_of):
    shards, order, rounds = sft_inputs(copy_of)
    row = seams.jsonl(shards / "rows.jsonl")[0]
    rewrite(
        rounds[0][1],
        lambda verdicts: first_where(
            verdicts, lambda v: seams.sample_key(v) == seams.sample_key(row)
        ).update(accepted=False, stage="compile_error"),
    )
    with pytest.raises(seams.SeamBroken, match="not an accepted pool sample"):
        seams.check_sft_rows_are_accepted_samples(shards, order, rounds)


def test_a_repeated_micro_step_breaks_the_order_seam(copy_of, finished_round):
    order = copy_of("sft_checkpoint/data_order.jsonl")
    rewrite(order, lambda rows: rows.insert(3, dict(rows[2])))
    summary = json.loads((finished_round["root"] / "sft_checkpoint/summary.json").read_text())
    with pytest.raises(seams.SeamBroken, match="once each"):
        seams.check_training_order(
            order, micro_steps=summary["micro_steps"], rows=summary["rows"], epochs=EPOCHS
        )


def test_a_repeated_micro_step_fails_the_reports_data_order_condition(copy_of, finished_round):
    root = finished_round["root"]
    checkpoint = copy_of("sft_checkpoint")
    rewrite(checkpoint / "data_order.jsonl", lambda rows: rows.insert(3, dict(rows[2])))
    settings = ValiditySettings(samples_per_problem=4, max_infrastructure_share=0.01)
    conditions = judge_comparison(
        demo_run_files(root, "baseline"),
        demo_run_files(root, "candidate"),
        demo_training_files(root, checkpoint),
        settings,
    )
    assert [c.name for c in conditions if not c.held] == ["data_order"]


def test_a_row_trained_more_than_epochs_times_breaks_the_order_seam(copy_of, finished_round):
    order = copy_of("sft_checkpoint/data_order.jsonl")
    rewrite(order, lambda rows: rows[0].update(rows=[*rows[0]["rows"], rows[0]["rows"][0]]))
    summary = json.loads((finished_round["root"] / "sft_checkpoint/summary.json").read_text())
    with pytest.raises(seams.SeamBroken, match="exactly"):
        seams.check_training_order(
            order, micro_steps=summary["micro_steps"], rows=summary["rows"], epochs=EPOCHS
        )


def perturbed_export(copy_of) -> Path:
    from safetensors.numpy import load_file, save_file

    model = copy_of("exported_model/model")
    (weights,) = model.glob("*.safetensors")
    tensors = load_file(weights)
    name = next(n for n in sorted(tensors) if n.endswith("q_proj.weight"))
    tensors[name] = tensors[name] + np.float32(0.05)
    save_file(tensors, weights, metadata={"format": "pt"})
    return model


def test_export_weights_that_differ_from_the_adapter_break_the_parity_seam(copy_of, finished_round):
    root = finished_round["root"]
    model = perturbed_export(copy_of)
    with pytest.raises(seams.SeamBroken, match="differ from base"):
        seams.check_export_reproduces_adapter(
            root / "demo_base_model/model",
            root / "sft_checkpoint/adapter",
            model,
            first_row_ids(root),
            tolerance=TOLERANCE,
        )


def test_a_candidate_sampled_from_other_weights_breaks_the_revision_seam(copy_of):
    candidate = copy_of("generations/minif2f/candidate/c256/generations.jsonl")
    model = perturbed_export(copy_of)
    with pytest.raises(seams.SeamBroken, match="exported weights are"):
        seams.check_candidate_is_the_export(candidate, model)


def test_a_report_without_the_simulated_banner_breaks_the_report_seam(copy_of, finished_round):
    folder = copy_of(
        str(seams.report_folder(finished_round["root"]).relative_to(finished_round["root"]))
    )
    text = (folder / "report.md").read_text()
    (folder / "report.md").write_text(text.replace("# SIMULATED - NOT EVIDENCE", "# Report", 1))
    with pytest.raises(seams.SeamBroken, match="does not open with SIMULATED"):
        seams.check_report_is_secondary_and_simulated(folder)


def test_a_primary_comparison_in_a_simulated_report_breaks_the_report_seam(copy_of, finished_round):
    folder = copy_of(
        str(seams.report_folder(finished_round["root"]).relative_to(finished_round["root"]))
    )
    summary = json.loads((folder / "summary.json").read_text())
    summary["comparisons"][0]["primary"] = True
    (folder / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(seams.SeamBroken, match="PRIMARY"):
        seams.check_report_is_secondary_and_simulated(folder)


def test_two_runs_of_the_report_job_two_seconds_apart_both_succeed_with_one_report(
    finished_round, tmp_path
):
    """Issue 30: the second of two such runs failed with OutputExistsError on the report its
    twin had just published from the same inputs. Last in the module: it adds two report runs
    to the round's instance."""
    import subprocess

    from prover_assets_tests.processes import BIN
    from prover_assets_tests.seams import report_folder

    root = tmp_path / "twins"
    shutil.copytree(finished_round["root"], root, symlinks=True)
    shutil.rmtree(root / "eval_report")
    raw = json.loads(json.dumps(finished_round["raw"]))
    raw["resources"]["experiment"]["config"]["spec"]["data_root"] = str(root)
    config = tmp_path / "twins.yaml"
    config.write_text(yaml.safe_dump(raw))
    # the round's own instance: the checks it recorded on these outputs are what the gates read
    home = finished_round["home"]
    env = {**os.environ, "DAGSTER_HOME": str(home), "PROVER_ASSETS_CONFIG": str(config)}
    started = datetime.datetime.now(datetime.UTC)
    command = [BIN / "dagster", "job", "execute", "-m", "prover_assets.definitions", "-j", "report"]
    runs = []
    for _ in range(2):
        runs.append(
            subprocess.Popen(
                [str(part) for part in [*command, "-c", config]],
                cwd=Path(__file__).parents[1],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
        time.sleep(2)
    outputs = [run.communicate(timeout=900)[0] for run in runs]
    assert [run.returncode for run in runs] == [0, 0], [out[-3000:] for out in outputs]
    with dg.DagsterInstance.from_config(str(home)) as instance:
        records = instance.get_run_records(dg.RunsFilter(job_name="report", created_after=started))
    assert sorted(r.dagster_run.status.value for r in records) == ["SUCCESS", "SUCCESS"]
    assert len(list((root / "eval_report").glob("report-*"))) == 1
    assert report_folder(root).is_dir()
