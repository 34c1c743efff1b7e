"""The rule of gates across runs: an output's lineage is what its manifests say it was made
from, and a gate holds only with a passing evaluation of that very manifest."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from prover_assets.records.gates import (
    CheckEvaluation,
    Materialization,
    gate_findings,
    lineage,
    materialization_of,
    refusal_message,
)
from prover_assets.records.outputs import StageResult, Step, StepInputs


class Written(StageResult):
    rows: int


def output(folder: Path, inputs: dict[str, Path] | None = None) -> Path:
    """A complete output in `folder`: one data file and a manifest naming `inputs`."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "rows.jsonl").write_text(f"{folder.name}\n")
    step = Step(folder, str(folder), Written, StepInputs.hash(inputs or {}), {})
    step.finish(Written(rows=1), [folder / "rows.jsonl"])
    return folder


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_lineage_follows_the_manifests_inputs_to_every_output_they_came_from(tmp_path):
    root = tmp_path / "data"
    source = tmp_path / "sources" / "minif2f.jsonl"  # outside the data root: no asset's output
    source.parent.mkdir()
    source.write_text("{}\n")
    problems = output(root / "eval_sets" / "minif2f", {"source": source})
    generations = output(root / "generations" / "c256", {"problems": problems / "rows.jsonl"})
    verdicts = output(
        root / "verdicts" / "c256",
        {"generations": generations / "rows.jsonl", "problems": problems / "rows.jsonl"},
    )
    found = lineage(verdicts, root)
    assert [m.asset for m in found] == [
        ("verdicts", "verdicts_c256"),  # generations' and verdicts' keys end in a label
        ("generations", "generations_c256"),
        ("eval_sets", "minif2f"),
    ]
    assert found[2].manifest_sha256 == sha256(problems / "manifest.json")


def test_lineage_reached_twice_is_walked_once_and_the_rest_still_walked(tmp_path):
    root = tmp_path / "data"
    problems = output(root / "problems")
    pool = output(root / "pool")
    generations = output(
        root / "generations", {"problems": problems / "rows.jsonl", "pool": pool / "rows.jsonl"}
    )
    verdicts = output(
        root / "verdicts",
        {"generations": generations / "rows.jsonl", "problems": problems / "rows.jsonl"},
    )
    found = [m.asset for m in lineage(verdicts, root)]
    assert found == [("verdicts",), ("generations",), ("problems",), ("pool",)]


def test_lineage_finds_the_output_of_a_file_nested_in_its_folder(tmp_path):
    root = tmp_path / "data"
    checkpoint = output(root / "sft_checkpoint" / "iteration-1")
    (checkpoint / "adapter").mkdir()
    (checkpoint / "adapter" / "weights.bin").write_bytes(b"w")
    export = output(
        root / "sft_export" / "iteration-1", {"adapter": checkpoint / "adapter" / "weights.bin"}
    )
    assert [m.asset for m in lineage(export, root)] == [("sft_export",), ("sft_checkpoint",)]


@pytest.mark.parametrize(
    ("folder", "asset"),
    [
        ("pool/generations/r0", ("pool", "generations", "r0")),
        ("verdicts/pool/r1", ("verdicts", "pool", "verdicts_pool_r1")),  # a labelled key
    ],
)
def test_an_iteration_folder_is_the_assets_partition_named_by_its_key(tmp_path, folder, asset):
    root = tmp_path / "data"
    found = materialization_of(output(root / folder / "iteration-2"), root)
    assert (found.asset, found.partition) == (asset, "2")
    assert found.name == "/".join(asset) + " (iteration 2)"


def test_an_unpartitioned_output_has_no_partition(tmp_path):
    root = tmp_path / "data"
    folder = output(root / "train_pool")
    found = materialization_of(folder, root)
    assert (found.folder, found.asset, found.partition, found.name) == (
        folder,
        ("train_pool",),
        None,
        "train_pool",
    )


def test_the_data_root_itself_is_no_assets_output(tmp_path):
    output(tmp_path)
    with pytest.raises(ValueError, match="is the data root"):
        materialization_of(tmp_path, tmp_path)


OUTPUT = Materialization(Path("/d/ckpt"), ("sft_checkpoint",), None, "ab" * 32)
PASSED = CheckEvaluation("data_order", True, "run-1", "84 of 84 micro-steps ran")
FAILED = CheckEvaluation("data_order", False, "run-2", "1 repeated")


@pytest.mark.parametrize(
    ("evaluations", "failing"),
    [
        ({"data_order": PASSED, "parity": PASSED}, []),
        ({"data_order": FAILED, "parity": PASSED}, [("data_order", FAILED)]),
        ({"parity": PASSED}, [("data_order", None)]),
        ({"data_order": FAILED}, [("data_order", FAILED), ("parity", None)]),
    ],
)
def test_a_gate_holds_only_with_a_passing_evaluation_of_that_manifest(evaluations, failing):
    findings = gate_findings(OUTPUT, ["data_order", "parity"], evaluations)
    assert [(f.check, f.evaluation) for f in findings] == failing


def test_a_checks_that_no_one_declared_blocking_is_never_asked():
    assert gate_findings(OUTPUT, [], {"data_order": FAILED}) == []


def test_the_refusal_names_the_check_the_run_what_it_found_and_what_to_do():
    message = refusal_message(
        Path("/d/export"),
        gate_findings(OUTPUT, ["data_order", "parity"], {"data_order": FAILED}),
    )
    assert message == (
        "refusing to read /d/export: a gate upstream does not hold for what would be read\n"
        "  - sft_checkpoint: check `data_order` failed in run run-2: 1 repeated\n"
        "  - sft_checkpoint: check `parity` never ran on this materialization (manifest sha256 "
        "abababababab)\n"
        "Re-materialize the asset named (its blocking checks run with it; a new output clears "
        "the failure), or run its checks if they never ran; or, to go on anyway, set "
        "`resources.experiment.config.gate_override` to the reason in this run's config: the run "
        "records it and the report prints it, and no comparison it feeds is PRIMARY."
    )
