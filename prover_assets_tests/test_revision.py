"""Model revisions: declared hub revisions, recorded local ones, and refusals."""

import hashlib
import json

import pytest

from prover_assets.generation.revision import (
    REVISION_FILE,
    RevisionError,
    model_revision,
    weights_sha256,
    write_local_revision,
)

HUB = "dfd02e6271a58375dfbf3ece0175277cf6b6a89a"


def folder_with_weights(tmp_path, data=b"weights"):
    (tmp_path / "model.safetensors").write_bytes(data)
    return tmp_path


def test_weights_sha256_hashes_each_shard_name_and_content(tmp_path):
    folder = folder_with_weights(tmp_path)
    expected = hashlib.sha256(
        f"model.safetensors\t{hashlib.sha256(b'weights').hexdigest()}\n".encode()
    )
    assert weights_sha256(folder) == expected.hexdigest()


def test_local_export_revision_is_recorded_and_checked(tmp_path):
    folder = folder_with_weights(tmp_path)
    revision = write_local_revision(folder, kind="sft")
    assert revision == "sft-" + weights_sha256(folder)
    assert model_revision(folder) == revision
    (folder / "model.safetensors").write_bytes(b"tampered")
    with pytest.raises(RevisionError, match="weights changed"):
        model_revision(folder)


def test_hub_snapshot_needs_a_declared_revision(tmp_path):
    folder = folder_with_weights(tmp_path)
    with pytest.raises(RevisionError, match="no derivable revision"):
        model_revision(folder)
    assert model_revision(folder, HUB) == HUB
    with pytest.raises(RevisionError, match="not a hub revision"):
        model_revision(folder, "main")


def test_snapshot_folder_named_by_another_revision_is_refused(tmp_path):
    folder = tmp_path / ("a" * 40)
    folder.mkdir()
    folder_with_weights(folder)
    with pytest.raises(RevisionError, match="is the hub snapshot"):
        model_revision(folder, HUB)


def test_declared_revision_must_match_a_recorded_one(tmp_path):
    folder = folder_with_weights(tmp_path)
    write_local_revision(folder, kind="sft")
    with pytest.raises(RevisionError, match="the config declares"):
        model_revision(folder, HUB)
    assert json.loads((folder / REVISION_FILE).read_text())["kind"] == "sft"
