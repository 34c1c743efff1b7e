"""Whole-file outputs that are trusted only when complete and current.

An output folder is complete when its manifest exists (it is written last) and every output
file still has the sha256 the manifest recorded. It is current when its inputs and config are
the ones the caller would use now. A complete but stale output is never silently replaced.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prover_assets.records.hashing import sha256_file
from prover_assets.records.manifest import (
    MANIFEST_NAME,
    build_manifest,
    read_manifest,
    write_manifest,
)
from prover_assets.records.store import publish_text

__all__ = [
    "STREAM_FILE",
    "ChecksumError",
    "EmptyOutputError",
    "StaleOutputError",
    "StepResult",
    "begin_stream",
    "current_manifest",
    "finish_output",
    "require_rows",
    "reused_output",
    "supersede",
    "verified_outputs",
]

STREAM_FILE = "stream.json"


@dataclass
class StepResult:
    """What a step produced: where, its manifest, whether an existing output was reused."""

    folder: Path
    manifest: dict[str, Any]
    reused: bool  # the output was already complete and current
    counts: dict[str, Any] = field(default_factory=dict)


class StaleOutputError(RuntimeError):
    """An existing output was made from other inputs or another config than this run's."""


class EmptyOutputError(ValueError):
    """A step would produce zero rows where rows are expected."""


def require_rows(count: int, what: str, *, allow_empty: bool = False) -> None:
    """Refuse an empty result unless the config says that empty is expected."""
    if count == 0 and not allow_empty:
        raise EmptyOutputError(
            f"{what} has 0 rows: nothing downstream could be judged on it. Check the input and "
            "filters; if empty is expected, set allow_empty: true for it in the config."
        )


class ChecksumError(RuntimeError):
    """A file no longer has the sha256 its producer's manifest recorded (or is not listed)."""


def _check_entry(path: Path, expected: str, manifest: Path) -> str:
    try:
        actual = sha256_file(path)
    except FileNotFoundError:
        raise ChecksumError(f"{path} is missing; {manifest} lists it") from None
    if actual != expected:
        raise ChecksumError(
            f"{path} has sha256 {actual[:12]}..., not the {expected[:12]}... that {manifest} "
            "recorded: the file changed after its step completed. Re-materialize that asset "
            "(move its folder aside first) and run again."
        )
    return actual


def verified_outputs(folder: Path, names: list[str] | None = None) -> dict[Path, str]:
    """Re-hash a completed step's output files (all, or those `names` in `folder`) against its
    manifest; returns path -> sha256, or raises `ChecksumError` naming the file."""
    manifest_path = folder / MANIFEST_NAME
    entries = {Path(e["path"]).resolve(): e["sha256"] for e in read_manifest(folder)["outputs"]}
    wanted = list(entries) if names is None else [(folder / n).resolve() for n in names]
    checked = {}
    for path in wanted:
        if path not in entries:
            raise ChecksumError(f"{path} is not an output that {manifest_path} records")
        checked[path] = _check_entry(path, entries[path], manifest_path)
    return checked


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
        try:
            _check_entry(Path(entry["path"]), entry["sha256"], folder / MANIFEST_NAME)
        except ChecksumError as exc:
            raise StaleOutputError(str(exc)) from exc
    return manifest


def reused_output(
    folder: Path, *, inputs: Mapping[str, str], config: Mapping[str, Any]
) -> StepResult | None:
    """The step's complete and current output, reused (see `current_manifest`); None if none."""
    manifest = current_manifest(folder, inputs=inputs, config=config)
    if manifest is None:
        return None
    return StepResult(folder, manifest, reused=True, counts=manifest["counts"])


def finish_output(folder: Path, **manifest_fields: Any) -> StepResult:
    """Write the manifest (`build_manifest`'s fields) last: from then on the output is complete."""
    manifest = build_manifest(**manifest_fields)
    write_manifest(folder, manifest)
    return StepResult(folder, manifest, reused=False, counts=manifest["counts"])


def begin_stream(folder: Path, identity: Mapping[str, Any]) -> None:
    """Pin what a resumable stream is made of (model, sampling, verifier, inputs) when it starts.

    A stream resumed later must be the same stream: appending samples of another model or
    verdicts of another verifier to it would silently mix two experiments in one file.
    """
    path = folder / STREAM_FILE
    wanted = json.loads(json.dumps(dict(identity), sort_keys=True))
    if path.exists():
        recorded = json.loads(path.read_text(encoding="utf-8"))
        if recorded != wanted:
            changed = sorted(
                k for k in set(recorded) | set(wanted) if recorded.get(k) != wanted.get(k)
            )
            raise StaleOutputError(
                f"{folder} holds a stream made with other {changed} than this run's. Outputs are "
                "never overwritten: move the folder aside (or ask for a recompute) and run again."
            )
        return
    folder.mkdir(parents=True, exist_ok=True)
    publish_text(path, json.dumps(wanted, indent=1, sort_keys=True) + "\n")


def supersede(folder: Path) -> Path | None:
    """Move an output aside (never delete it) so that it can be recomputed; returns where."""
    if not folder.exists():
        return None
    target = folder.with_name(f"{folder.name}.superseded-{time.strftime('%Y%m%dT%H%M%S')}")
    folder.rename(target)
    return target
