"""Model revisions: every generation records which exact weights produced it.

A hub model is named by its hub revision (40 hex digits), given in the config. A model this
project wrote (the SFT export, the demo's tiny model) is named `<kind>-<sha256 of its weight
shards>`, recorded in `prover_assets_revision.json` with each shard's sha256 and `FileStamp`,
and re-checked against the files on every read: a shard whose stamp changed is hashed again
(16 GB at 8B, with progress), the others are not. A folder
with neither is refused: its revision cannot be derived.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from prover_assets.records import publish_text, sha256_file
from prover_assets.records.hashing import FileStamp, settled_stamp, sha256_unless_unchanged

__all__ = [
    "MODEL_DIR",
    "REVISION_FILE",
    "RevisionError",
    "model_revision",
    "weights_sha256",
    "write_local_revision",
]

REVISION_FILE = "prover_assets_revision.json"
MODEL_DIR = "model"  # the Hugging Face folder inside a model asset's output folder
_HUB_REVISION = re.compile(r"^[0-9a-f]{40}$")
_WEIGHT_SUFFIXES = (".safetensors", ".bin")


class RevisionError(ValueError):
    """A model folder's revision is missing or does not match its files."""

    pass


def _shards(folder: Path) -> list[Path]:
    shards = sorted(p for p in folder.iterdir() if p.suffix in _WEIGHT_SUFFIXES and p.is_file())
    if not shards:
        raise RevisionError(f"{folder} holds no weight shards (*.safetensors, *.bin)")
    return shards


def _combined(shard_sha256: dict[str, str]) -> str:
    digest = hashlib.sha256()
    for name in sorted(shard_sha256):
        digest.update(f"{name}\t{shard_sha256[name]}\n".encode())
    return digest.hexdigest()


def weights_sha256(folder: Path, recorded: Mapping[str, Mapping[str, Any]] | None = None) -> str:
    """sha256 over the weight shards: each shard's name and sha256, in name order. A shard in
    `recorded` (name -> its sha256 and `FileStamp`) whose stamp is unchanged is not read."""
    recorded = recorded or {}
    shas = {}
    for shard in _shards(folder):
        known = recorded.get(shard.name)
        shas[shard.name] = (
            sha256_unless_unchanged(shard, known["sha256"], FileStamp.parse(known["stamp"]))
            if known is not None
            else sha256_file(shard)
        )
    return _combined(shas)


def write_local_revision(folder: Path, *, kind: str) -> str:
    """Record a revision for a locally made model folder (`<kind>-<sha256 of its weights>`),
    with each shard's sha256 and stamp, so a read re-hashes only a shard that changed."""
    shards = {}
    for shard in _shards(folder):
        stamp = settled_stamp(shard)
        shards[shard.name] = {
            "sha256": sha256_file(shard),
            "stamp": None if stamp is None else asdict(stamp),
        }
    revision = f"{kind}-{_combined({name: s['sha256'] for name, s in shards.items()})}"
    record = {"revision": revision, "kind": kind, "shards": shards}
    publish_text(folder / REVISION_FILE, json.dumps(record, indent=1) + "\n")
    return revision


def model_revision(folder: Path, declared: str | None = None) -> str:
    """The revision of the model in `folder`: the declared hub revision, or the one this
    project recorded (checked against the weights); refuses a folder with neither."""
    record = folder / REVISION_FILE
    if record.exists():
        written = json.loads(record.read_text(encoding="utf-8"))
        recorded = written["revision"]
        kind = recorded.split("-", 1)[0]
        actual = f"{kind}-{weights_sha256(folder, written.get('shards'))}"
        if actual != recorded:
            raise RevisionError(f"{folder}: the weights changed since {REVISION_FILE} was written")
        if declared is not None and declared != recorded:
            raise RevisionError(f"{folder} is {recorded}, the config declares {declared}")
        return recorded
    if declared is None:
        raise RevisionError(
            f"{folder} has no derivable revision: give the hub revision (40 hex digits) of this "
            "snapshot in the config, or use a model this project exported"
        )
    if not _HUB_REVISION.match(declared):
        raise RevisionError(f"{declared!r} is not a hub revision (40 hex digits)")
    snapshot = folder.resolve().name
    if _HUB_REVISION.match(snapshot) and snapshot != declared:
        raise RevisionError(
            f"{folder} is the hub snapshot {snapshot}, the config declares {declared}"
        )
    return declared
