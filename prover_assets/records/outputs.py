"""Whole-file outputs that are trusted only when complete and current.

An output folder is complete when its manifest exists (it is written last) and every output
file still has the sha256 the manifest recorded. It is current when its inputs and config are
the ones the caller would use now. A complete but stale output is never silently replaced.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from prover_assets.records.hashing import sha256_file
from prover_assets.records.manifest import MANIFEST_NAME, read_manifest

__all__ = ["StaleOutputError", "current_manifest", "input_digests"]


class StaleOutputError(RuntimeError):
    """An existing output was made from other inputs or another config than this run's."""


def input_digests(inputs: Mapping[str, Path]) -> dict[str, str]:
    return {name: sha256_file(path) for name, path in inputs.items()}


def current_manifest(
    folder: Path, *, inputs: Mapping[str, str], config: Mapping[str, Any]
) -> dict[str, Any] | None:
    """The manifest of a complete output made from exactly `inputs` (name -> sha256) and
    `config`; None when there is no complete output yet. Raises `StaleOutputError` when a
    complete output exists but was made from something else, or its files were changed."""
    if not (folder / MANIFEST_NAME).exists():
        return None
    manifest = read_manifest(folder)
    recorded = manifest.get("input_digests", {})
    if recorded != dict(inputs) or manifest["config"] != dict(config):
        changed = sorted(
            name for name in set(recorded) | set(inputs) if recorded.get(name) != inputs.get(name)
        )
        what = f"inputs {changed}" if changed else "config"
        raise StaleOutputError(
            f"{folder} was made from other {what} than this run's. Outputs are never "
            "overwritten: move the folder aside (or ask for a recompute) and run again."
        )
    for entry in manifest["outputs"]:
        path = Path(entry["path"])
        if not path.exists() or sha256_file(path) != entry["sha256"]:
            raise StaleOutputError(f"{path} no longer matches the sha256 in {folder}/manifest.json")
    return manifest
