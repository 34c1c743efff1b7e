"""Pinning pool shards by the Hub's LFS records, with a stubbed repository listing."""

import hashlib

import pytest
from huggingface_hub.hf_api import RepoFile, RepoFolder

from prover_assets.problems.hub import lfs_oids, shard_entries

REVISION = "79fc4fbe87b4c694a941bc63ad92dc38d39d41db"


def lfs_file(path: str, content: bytes) -> RepoFile:
    digest = hashlib.sha256(content).hexdigest()
    return RepoFile(
        path=path,
        size=len(content),
        oid="0" * 40,
        lfs={"oid": digest, "size": len(content), "pointerSize": 134},
    )


def stub(*entries):
    calls = []

    def list_tree(repo, revision):
        calls.append((repo, revision))
        return list(entries)

    return list_tree, calls


def test_lfs_oids_are_the_sha256_of_each_parquet_shard_in_path_order():
    tree, calls = stub(
        lfs_file("data/train-00001-of-00002.parquet", b"second"),
        RepoFolder(path="data", oid="1" * 40),
        RepoFile(path="README.md", size=3, oid="2" * 40),
        lfs_file("data/train-00000-of-00002.parquet", b"first"),
    )
    oids = lfs_oids("Goedel-LM/Goedel-Pset-v1", REVISION, list_tree=tree)
    assert oids == {
        "data/train-00000-of-00002.parquet": hashlib.sha256(b"first").hexdigest(),
        "data/train-00001-of-00002.parquet": hashlib.sha256(b"second").hexdigest(),
    }
    assert list(oids) == sorted(oids)
    assert calls == [("Goedel-LM/Goedel-Pset-v1", REVISION)]


def test_a_shard_outside_lfs_is_refused():
    tree, _ = stub(RepoFile(path="data/small.parquet", size=3, oid="3" * 40))
    with pytest.raises(ValueError, match="not an LFS file"):
        lfs_oids("r/d", REVISION, list_tree=tree)


def test_a_listing_without_shards_is_refused():
    tree, _ = stub(RepoFile(path="README.md", size=3, oid="2" * 40))
    with pytest.raises(ValueError, match="no file matches"):
        lfs_oids("r/d", REVISION, list_tree=tree)


def test_a_branch_name_is_not_a_pin():
    tree, calls = stub()
    with pytest.raises(ValueError, match="40 hex digits"):
        lfs_oids("r/d", "main", list_tree=tree)
    assert calls == []


def test_shard_entries_are_config_lines_under_the_local_root():
    lines = shard_entries({"data/a.parquet": "ab" * 32}, "/data/Goedel-Pset-v1/")
    assert lines == [f"- {{path: /data/Goedel-Pset-v1/data/a.parquet, sha256: {'ab' * 32}}}"]
