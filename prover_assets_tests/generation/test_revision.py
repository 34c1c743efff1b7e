"""Model revisions: declared hub revisions, recorded local ones, and refusals."""

import hashlib
import json
from pathlib import Path

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


def count_hashing(monkeypatch) -> list[str]:
    """The files read to be hashed from now on (by the revision and by the stamp check)."""
    from prover_assets.generation import revision
    from prover_assets.records import hashing

    read: list[str] = []
    real = hashing.sha256_file

    def counted(path):
        read.append(Path(path).name)
        return real(path)

    monkeypatch.setattr(revision, "sha256_file", counted)
    monkeypatch.setattr(hashing, "sha256_file", counted)
    return read


def two_shards(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model-00001.safetensors").write_bytes(b"first shard")
    (folder / "model-00002.safetensors").write_bytes(b"second shard")
    return folder


def test_reading_a_recorded_revision_again_hashes_no_unchanged_shard(tmp_path, monkeypatch):
    folder = two_shards(tmp_path)
    revision = write_local_revision(folder, kind="sft")
    read = count_hashing(monkeypatch)
    assert model_revision(folder) == revision
    assert model_revision(folder) == revision
    assert read == []


def test_a_shard_changed_in_place_at_its_size_is_hashed_again_and_refused(tmp_path, monkeypatch):
    folder = two_shards(tmp_path)
    write_local_revision(folder, kind="sft")
    read = count_hashing(monkeypatch)
    with open(folder / "model-00002.safetensors", "r+b") as handle:
        handle.write(b"S")  # same size, same inode: only the mtime tells
    with pytest.raises(RevisionError, match="weights changed"):
        model_revision(folder)
    assert read == ["model-00002.safetensors"]


def test_a_copied_folder_is_hashed_again_once_per_read_and_keeps_its_revision(
    tmp_path, monkeypatch
):
    import shutil

    folder = two_shards(tmp_path / "original")
    revision = write_local_revision(folder, kind="sft")
    copy = Path(shutil.copytree(folder, tmp_path / "copy"))  # other inodes
    read = count_hashing(monkeypatch)
    assert model_revision(copy) == revision
    assert sorted(read) == ["model-00001.safetensors", "model-00002.safetensors"]


def test_a_file_whose_mtime_is_ahead_of_the_clock_gets_no_stamp_and_is_always_hashed(tmp_path):
    import os
    import time

    from prover_assets.records.hashing import settled_stamp

    path = tmp_path / "ahead.bin"
    path.write_bytes(b"x")
    ahead = time.time_ns() + 60 * 10**9
    os.utime(path, ns=(ahead, ahead))
    assert settled_stamp(path, wait_s=0.05) is None
