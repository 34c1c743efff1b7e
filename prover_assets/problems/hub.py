"""The sha256 of the pool's shards as the Hugging Face Hub records them.

A parquet shard on the Hub is a Git LFS object whose oid is the sha256 of its bytes, so the
registered config can pin shards that were never downloaded here, and a downloaded copy is
checked against the Hub's record before it is read. On a machine with Hub access:

    python -m prover_assets.problems.hub Goedel-LM/Goedel-Pset-v1 <revision> [--root DIR]

prints the `shards:` entries for configs/p2.yaml.
"""

from __future__ import annotations

import argparse
import fnmatch
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

__all__ = ["lfs_oids", "shard_entries"]

ListTree = Callable[[str, str], Iterable[Any]]


def _hub_tree(repo: str, revision: str) -> Iterable[Any]:
    from huggingface_hub import HfApi

    return HfApi().list_repo_tree(repo, revision=revision, repo_type="dataset", recursive=True)


def lfs_oids(
    repo: str, revision: str, *, pattern: str = "*.parquet", list_tree: ListTree = _hub_tree
) -> dict[str, str]:
    """{path in the repo: sha256} of the files matching `pattern` at `revision`, in path order.

    Raises if a matching file is not stored in LFS (its sha256 is then not on record) or if
    nothing matches (a wrong revision or pattern would otherwise pin nothing).
    """
    if not re.fullmatch(r"[0-9a-f]{40}", revision):
        raise ValueError(f"pin a full commit sha (40 hex digits), not {revision!r}")
    oids = {}
    for entry in list_tree(repo, revision):
        if not hasattr(entry, "blob_id") or not fnmatch.fnmatch(entry.path, pattern):
            continue  # a folder, or a file the pool does not read
        if entry.lfs is None:
            raise ValueError(f"{repo}@{revision}: {entry.path} is not an LFS file; hash it locally")
        oids[entry.path] = entry.lfs.sha256
    if not oids:
        raise ValueError(f"{repo}@{revision}: no file matches {pattern!r}")
    return dict(sorted(oids.items()))


def shard_entries(oids: dict[str, str], root: str) -> list[str]:
    """The config's `shards:` lines for a local copy of the repository under `root`."""
    return [f"- {{path: {root.rstrip('/')}/{path}, sha256: {sha}}}" for path, sha in oids.items()]


def main(argv: Sequence[str]) -> int:
    """Print the `shards:` lines of a Hub dataset revision (paths and LFS sha256) for a config
    file."""
    parser = argparse.ArgumentParser(description="Print the LFS sha256 of a dataset's shards.")
    parser.add_argument("repo")
    parser.add_argument("revision")
    parser.add_argument("--pattern", default="*.parquet")
    parser.add_argument("--root", default="REPLACE_ME/Goedel-Pset-v1")
    args = parser.parse_args(argv)
    print(
        "\n".join(
            shard_entries(lfs_oids(args.repo, args.revision, pattern=args.pattern), args.root)
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
