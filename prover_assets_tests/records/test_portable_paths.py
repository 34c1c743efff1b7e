"""A data root moves whole: manifests under a marked root name what lies in it relative to
themselves and what lies outside it (source data) absolutely, so a copy reads back whole."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from prover_assets.records.gates import lineage
from prover_assets.records.manifest import (
    DATA_ROOT_MARKER,
    data_root_of,
    mark_data_root,
    portable_path,
    read_manifest,
)
from prover_assets.records.outputs import (
    ChecksumError,
    StageResult,
    Step,
    StepInputs,
    current_manifest,
    verified_outputs,
)
from prover_assets.records.store import publish_folder


class Written(StageResult):
    rows: int


def finished(folder: Path, inputs: dict[str, Path]) -> Step[Written]:
    """A step in `folder` made from `inputs`, with one output file, its manifest written."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "rows.jsonl").write_text(f"{folder.name}\n")
    step = Step(folder, "x", Written, StepInputs.hash(inputs), {"k": 1})
    step.finish(Written(rows=1), [folder / "rows.jsonl"])
    return step


@pytest.fixture
def made(tmp_path) -> tuple[Path, Path]:
    """A marked data root with two steps (the second made from the first's output and from a
    source file outside the root), and that source."""
    source = tmp_path / "sources" / "minif2f.jsonl"
    source.parent.mkdir()
    source.write_text("source\n")
    root = mark_data_root(tmp_path / "old" / "data")
    finished(root / "problems", {"source": source})
    finished(root / "generations" / "c256", {"problems": root / "problems" / "rows.jsonl"})
    return root, source


def test_inside_the_root_a_manifest_names_files_from_its_folder_and_sources_absolutely(made):
    root, source = made
    manifest = read_manifest(root / "generations" / "c256")
    assert [e["path"] for e in manifest["outputs"]] == ["rows.jsonl"]
    assert [e["path"] for e in manifest["inputs"]] == ["../../problems/rows.jsonl"]
    assert [e["path"] for e in read_manifest(root / "problems")["inputs"]] == [str(source)]


def test_a_copied_root_reads_back_whole_and_its_steps_are_current(made, tmp_path):
    root, source = made
    copy = tmp_path / "new" / "elsewhere" / "mini"
    shutil.copytree(root, copy)
    shutil.rmtree(root)  # nothing may still be read from where it was made
    generations = copy / "generations" / "c256"
    assert list(verified_outputs(generations)) == [generations / "rows.jsonl"]
    rerun = Step(
        generations,
        "x",
        Written,
        StepInputs.hash({"problems": copy / "problems" / "rows.jsonl"}),
        {"k": 1},
    )
    reused = rerun.reused()
    assert reused is not None and reused.reused
    assert current_manifest(
        copy / "problems", inputs=StepInputs.hash({"source": source}).digests, config={"k": 1}
    )
    assert [m.folder for m in lineage(generations, copy)] == [
        generations.resolve(),
        (copy / "problems").resolve(),
    ]


def test_an_output_named_outside_its_folder_is_refused_naming_both(made, tmp_path):
    root, _ = made
    folder = root / "problems"
    manifest = json.loads((folder / "manifest.json").read_text())
    elsewhere = tmp_path / "old-place" / "problems" / "rows.jsonl"
    manifest["outputs"][0]["path"] = str(elsewhere)  # as written before paths were portable
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ChecksumError) as refused:
        verified_outputs(folder)
    assert str(refused.value).startswith(
        f"{folder / 'manifest.json'} records the output {elsewhere}, outside its folder {folder}: "
        "its data root was moved or copied since this step ran."
    )


def test_without_a_marked_root_inputs_are_absolute_and_outputs_still_the_folders_own(tmp_path):
    folder = tmp_path / "step"
    finished(folder, {"source": _write(tmp_path / "in.txt")})
    manifest = read_manifest(folder)
    assert manifest["inputs"][0]["path"] == str((tmp_path / "in.txt").resolve())
    assert manifest["outputs"][0]["path"] == "rows.jsonl"
    assert verified_outputs(folder)


def test_the_data_root_is_the_nearest_marked_folder_and_marking_twice_keeps_one_marker(tmp_path):
    outer = mark_data_root(tmp_path / "outer")
    inner = mark_data_root(mark_data_root(outer / "inner"))
    assert data_root_of(inner / "a" / "b") == inner.resolve()
    assert data_root_of(outer / "a") == outer.resolve()
    assert data_root_of(tmp_path) is None
    assert sorted(p.name for p in inner.iterdir()) == [DATA_ROOT_MARKER]


def test_a_staging_sibling_names_paths_as_the_folder_it_becomes(made):
    root, _ = made
    target = root / "sft_shards" / "c256"
    problems = root / "problems" / "rows.jsonl"
    step = Step(target, "x", Written, StepInputs.hash({"problems": problems}), {})
    with publish_folder(target) as staging:
        (staging / "rows.jsonl").write_text("r\n")
        step.publish(staging, Written(rows=1), [staging / "rows.jsonl"])
    manifest = read_manifest(target)
    assert [e["path"] for e in manifest["outputs"]] == ["rows.jsonl"]
    assert manifest["inputs"][0]["path"] == portable_path(problems, target)
    assert verified_outputs(target)


def _write(path: Path) -> Path:
    path.write_text("x\n")
    return path
