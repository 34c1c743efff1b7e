"""Stages return typed results: recorded in the manifest, read back as the same model, shown in
Dagster rounded, with short hashes and paths relative to the data root."""

import hashlib
import json
from pathlib import Path

import dagster as dg
import pytest

from prover_assets.assets.metadata import result_metadata, step_materialization
from prover_assets.records import MANIFEST_NAME
from prover_assets.records.outputs import (
    ChecksumError,
    StageResult,
    Step,
    StepInputs,
    distinct_names,
    verified_inputs,
)

FULL_SHA = "ab" * 32


class Measured(StageResult):
    rate: float
    share: float
    tiny: float
    count: int
    sha: str
    where: str
    missing: float | None
    nested: dict[str, int]


def measured(data_root) -> Measured:
    return Measured(
        rate=6779.4321,
        share=0.771234,
        tiny=1.23456e-6,
        count=7,
        sha=FULL_SHA,
        where=str(data_root / "generations" / "x"),
        missing=None,
        nested={"a": 1},
    )


def test_a_result_is_recorded_in_the_manifest_and_read_back_as_the_same_model(tmp_path):
    result = measured(tmp_path)
    Step(tmp_path, "asset", Measured, StepInputs.hash({}), {}).finish(result, [])
    assert Measured.read(tmp_path) == result
    recorded = json.loads((tmp_path / MANIFEST_NAME).read_text())["counts"]
    assert recorded["rate"] == 6779.4321  # the manifest keeps the full value


def test_a_manifest_whose_counts_are_another_model_is_refused_naming_the_file(tmp_path):
    Step(tmp_path, "asset", Measured, StepInputs.hash({}), {}).finish(measured(tmp_path), [])

    class Other(StageResult):
        rows: int

    with pytest.raises(ValueError, match=rf"{MANIFEST_NAME}.*not a Other"):
        Other.read(tmp_path)


def test_metadata_rounds_shortens_hashes_and_relativises_paths(tmp_path):
    shown = result_metadata(measured(tmp_path), tmp_path)
    assert shown["rate"] == dg.MetadataValue.float(6779.4)
    assert shown["share"] == dg.MetadataValue.float(0.771)
    assert shown["tiny"] == dg.MetadataValue.float(1.23e-6)
    assert shown["count"] == 7
    assert shown["sha"] == FULL_SHA[:12]
    assert shown["where"] == "generations/x"
    assert shown["missing"] == dg.MetadataValue.null()
    assert shown["nested"] == dg.MetadataValue.json({"a": 1})


def test_the_files_table_shows_paths_under_the_data_root_relative(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "rows.jsonl").write_text("{}\n")
    step = Step(tmp_path / "out", "asset", Measured, StepInputs.hash({}), {}).finish(
        measured(tmp_path), [tmp_path / "out" / "rows.jsonl"]
    )
    (record,) = step_materialization(step, tmp_path).metadata["files"].records
    assert (record.data["role"], record.data["path"]) == ("output", "out/rows.jsonl")
    assert record.data["bytes"] == 3


def test_a_steps_data_version_is_the_sha256_of_its_manifest(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "rows.jsonl").write_text("{}\n")
    step = Step(tmp_path / "out", "asset", Measured, StepInputs.hash({}), {}).finish(
        measured(tmp_path), [tmp_path / "out" / "rows.jsonl"]
    )
    manifest = (tmp_path / "out" / "manifest.json").read_bytes()
    version = step_materialization(step, tmp_path).data_version
    assert version == dg.DataVersion(hashlib.sha256(manifest).hexdigest())


def test_the_asset_shows_what_the_step_used_as_its_manifest_records_it(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # a step that may use no GPU, on any box
    (tmp_path / "out").mkdir()
    step = Step(tmp_path / "out", "asset", Measured, StepInputs.hash({}), {}).finish(
        measured(tmp_path), []
    )
    used = json.loads((tmp_path / "out" / "manifest.json").read_text())["usage"]
    shown = step_materialization(step, tmp_path).metadata
    assert used.pop("peak_gpu_mib") is None  # no GPU: no reading, none shown
    assert "used_peak_gpu_mib" not in shown
    assert set(used) == {
        "wall_s",
        "cpu_s",
        "children_cpu_s",
        "peak_rss_mib",
        "children_peak_rss_mib",
    }
    assert {k: shown[f"used_{k}"].value for k in used} == {
        k: pytest.approx(v, rel=0.01, abs=1e-6) for k, v in used.items()
    }
    assert shown["earlier_attempts"] == 0


def test_inputs_are_hashed_once_and_the_manifest_records_their_digests(tmp_path, monkeypatch):
    source = tmp_path / "source.jsonl"
    source.write_text("{}\n")
    inputs = StepInputs.hash({"source": source})
    calls = []
    monkeypatch.setattr(
        "prover_assets.records.manifest.sha256_file", lambda path: calls.append(path) or ""
    )
    (tmp_path / "out").mkdir()
    Step(tmp_path / "out", "asset", Measured, inputs, {}).finish(measured(tmp_path), [])
    manifest = json.loads((tmp_path / "out" / MANIFEST_NAME).read_text())
    assert calls == []  # the manifest took the digest the step computed
    assert manifest["input_digests"] == {"source": inputs.digests["source"]}
    assert manifest["inputs"][0]["sha256"] == inputs.digests["source"]


def finished_with_inputs(tmp_path, contents: dict[str, bytes]):
    """A step in `out/` made from files of `contents` (name -> bytes, in that order)."""
    files = {}
    for name, data in contents.items():
        files[name] = tmp_path / f"{name}.jsonl"
        files[name].write_bytes(data)
    (tmp_path / "out").mkdir()
    Step(tmp_path / "out", "asset", Measured, StepInputs.hash(files), {}).finish(
        measured(tmp_path), []
    )
    return files


def test_the_inputs_a_step_was_made_from_are_read_back_by_name_whatever_their_order(tmp_path):
    # names in an order that sorting changes ("solved_before_10" sorts before "_2")
    contents = {"problems": b"p\n", "solved_before_2_x": b"two\n", "solved_before_10_x": b"ten\n"}
    files = finished_with_inputs(tmp_path, contents)
    read = verified_inputs(tmp_path / "out")
    assert {name: path.resolve() for name, path in read.items()} == {
        name: path.resolve() for name, path in files.items()
    }


def test_two_inputs_of_the_same_bytes_each_read_back_with_those_bytes(tmp_path):
    finished_with_inputs(tmp_path, {"a": b"same\n", "b": b"same\n", "c": b"other\n"})
    read = verified_inputs(tmp_path / "out")
    assert {name: path.read_bytes() for name, path in read.items()} == {
        "a": b"same\n",
        "b": b"same\n",
        "c": b"other\n",
    }


def test_an_input_changed_after_the_step_is_refused_naming_it(tmp_path):
    files = finished_with_inputs(tmp_path, {"problems": b"p\n"})
    files["problems"].write_bytes(b"q\n")
    with pytest.raises(ChecksumError, match=r"problems.jsonl has sha256 .* changed after"):
        verified_inputs(tmp_path / "out")


# Files, by their path under a data root, and the names they are hashed under, by hand.
NAMED = [
    # one iteration: folder and name suffice
    {
        "generations/pool/r0/generations.jsonl": "r0/generations.jsonl",
        "generations/pool/r1/generations.jsonl": "r1/generations.jsonl",
        "train_pool/train_pool.jsonl": "train_pool/train_pool.jsonl",
    },
    # an iteration's two rounds both sit in an `iteration-2` folder; never the data root's
    # own name: it may move
    {
        "generations/pool/r0/iteration-2/generations.jsonl": "r0/iteration-2/generations.jsonl",
        "generations/pool/r1/iteration-2/generations.jsonl": "r1/iteration-2/generations.jsonl",
        "train_pool/train_pool.jsonl": "train_pool/train_pool.jsonl",
    },
]


@pytest.mark.parametrize("named", NAMED)
def test_inputs_are_named_by_their_folder_and_more_folders_only_where_two_would_share_a_name(
    named,
):
    files = [Path("/data") / path for path in named]
    assert distinct_names(files) == {name: Path("/data") / path for path, name in named.items()}


def test_a_file_given_twice_as_two_inputs_is_refused():
    with pytest.raises(ValueError, match="a file is given twice"):
        distinct_names([Path("/d/r0/a.jsonl"), Path("/d/r0/a.jsonl")])


def test_the_generations_a_shards_step_was_made_from_are_its_generation_inputs():
    from prover_assets.sft.stages import recorded_generations

    made_from = {
        "r0/iteration-2/generations.jsonl": Path("/d/generations/pool/r0/iteration-2/g.jsonl"),
        "r0/iteration-2/verdicts.jsonl": Path("/d/verdicts/pool/r0/iteration-2/v.jsonl"),
        "r1/generations.jsonl": Path("/d/generations/pool/r1/g.jsonl"),
        "train_pool/train_pool.jsonl": Path("/d/train_pool/train_pool.jsonl"),
    }
    assert recorded_generations(made_from) == [
        Path("/d/generations/pool/r0/iteration-2/g.jsonl"),
        Path("/d/generations/pool/r1/g.jsonl"),
    ]
