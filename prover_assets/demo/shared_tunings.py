"""Format-tuned demo models shared across data roots: `make demo`, `make demo-null` and
`make demo-iterations` (and the tests' loops) tune the tiny model once per statements and
settings instead of once per data root.

An entry is a folder named by the sha256 of the tuning's inputs (the statement files' sha256)
and settings, its recipe among them (`tiny_model.tuning_recipe`: an entry of other code is another
entry); it holds the model's files and `tuning.json` (the tuning's result and each file's
sha256). An entry is published whole (`publish_folder`) and its files are checked against
`tuning.json` before they are copied, so a torn or edited entry is refused, never used. One
process tunes a given entry at a time (an exclusive `flock` beside it); the others wait and copy.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from prover_assets.demo.tiny_model import FormatTuningResult
from prover_assets.records.hashing import sha256_file, sha256_text
from prover_assets.records.store import publish_folder

__all__ = [
    "ENTRY_FILE",
    "SharedTuningError",
    "TuningEntry",
    "copy_tuning",
    "holding_entry",
    "publish_tuning",
    "read_tuning",
    "tuning_key",
]

ENTRY_FILE = "tuning.json"


class SharedTuningError(RuntimeError):
    """A shared entry that does not hold what its `tuning.json` says it holds."""


class TuningEntry(BaseModel):
    """An entry's `tuning.json`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str
    inputs: dict[str, str]  # statement file name -> sha256
    settings: dict[str, Any]
    result: FormatTuningResult
    files: dict[str, str]  # model file name -> sha256


def tuning_key(inputs: Mapping[str, str], settings: Mapping[str, Any]) -> str:
    """The entry's name: the sha256 of its inputs' digests and its settings, in canonical JSON."""
    return sha256_text(
        json.dumps({"inputs": dict(inputs), "settings": dict(settings)}, sort_keys=True)
    )


@contextlib.contextmanager
def holding_entry(shared: Path, key: str) -> Iterator[Path]:
    """The entry's folder, while this process alone may create it."""
    shared.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(shared / f".{key}.lock", os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)  # the kernel drops it if this process dies
        yield shared / key
    finally:
        os.close(descriptor)


def read_tuning(entry: Path) -> TuningEntry:
    """The entry's record, validated; a missing or malformed one raises naming the file."""
    path = entry / ENTRY_FILE
    try:
        return TuningEntry.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValidationError) as exc:
        raise SharedTuningError(f"{path}: not a shared tuning entry: {exc}") from exc


def copy_tuning(entry: Path, model_dir: Path) -> FormatTuningResult | None:
    """Copy the entry's model files into `model_dir` (each checked against its sha256) and
    return its tuning's result; None when there is no entry yet."""
    if not entry.exists():
        return None
    recorded = read_tuning(entry)
    if recorded.key != entry.name:
        raise SharedTuningError(f"{entry}: its {ENTRY_FILE} names entry {recorded.key}")
    model_dir.mkdir(parents=True, exist_ok=True)
    for name, sha256 in sorted(recorded.files.items()):
        source = entry / "model" / name
        if not source.is_file() or sha256_file(source) != sha256:
            raise SharedTuningError(
                f"{source}: missing or not the file {ENTRY_FILE} records (sha256 {sha256}); "
                f"remove {entry} and run again"
            )
        shutil.copyfile(source, model_dir / name)
    return recorded.result


def publish_tuning(
    entry: Path,
    model_dir: Path,
    *,
    inputs: Mapping[str, str],
    settings: Mapping[str, Any],
    result: FormatTuningResult,
) -> None:
    """Publish a copy of the tuned model in `model_dir` as the entry (whole, or not at all)."""
    files = sorted(p for p in model_dir.iterdir() if p.is_file())
    with publish_folder(entry) as staging:
        (staging / "model").mkdir()
        for path in files:
            shutil.copyfile(path, staging / "model" / path.name)
        recorded = TuningEntry(
            key=entry.name,
            inputs=dict(inputs),
            settings=dict(settings),
            result=result,
            files={p.name: sha256_file(p) for p in files},
        )
        (staging / ENTRY_FILE).write_text(recorded.model_dump_json(indent=2) + "\n")
