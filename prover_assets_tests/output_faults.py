"""Faults of a finished step's output as a real fault leaves them: its files changed and its
manifest rewritten to match (so that only a check can tell), for the tests of gates across runs
(test_demo_gates.py, test_launchpad.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from prover_assets.records.manifest import file_entry, read_manifest, write_manifest

__all__ = ["Rows", "recount", "repeated_micro_step", "rewrite", "rows"]

Rows = list[dict]


def rewrite(folder: Path, name: str, change: Callable[[bytes], bytes]) -> None:
    """Change the output file `name` of the step in `folder`, and its manifest's entry for it
    (sha256, size, stamp) to match, as a step that wrote those bytes would have."""
    path = folder / name
    path.write_bytes(change(path.read_bytes()))
    manifest = read_manifest(folder)
    manifest["outputs"] = [
        file_entry(path, folder=folder, output=True) if entry["path"] == name else entry
        for entry in manifest["outputs"]
    ]
    write_manifest(folder, manifest)


def rows(change: Callable[[Rows], None]) -> Callable[[bytes], bytes]:
    """A change of a JSON-lines file, row by row."""

    def apply(data: bytes) -> bytes:
        parsed = [json.loads(line) for line in data.decode().splitlines()]
        change(parsed)
        return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in parsed).encode()

    return apply


def recount(folder: Path, change: Callable[[dict], None]) -> None:
    """Change the counts a step recorded in its manifest (its files untouched)."""
    manifest = read_manifest(folder)
    change(manifest["counts"])
    write_manifest(folder, manifest)


def repeated_micro_step(parsed: Rows) -> None:
    parsed.insert(1, dict(parsed[0]))
