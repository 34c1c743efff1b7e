"""Provenance: every artifact's manifest names its inputs and outputs by sha256, the config, the
code revision and the library pins. Written last, so its presence means the step completed."""

from __future__ import annotations

import functools
import importlib.metadata
import json
import os
import platform
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prover_assets.records.hashing import settled_stamp, sha256_file
from prover_assets.records.store import publish_text

__all__ = [
    "DATA_ROOT_MARKER",
    "MANIFEST_NAME",
    "GitRevision",
    "build_manifest",
    "data_root_of",
    "file_entry",
    "git_revision",
    "library_pins",
    "mark_data_root",
    "now_utc",
    "package_versions",
    "portable_path",
    "read_manifest",
    "recorded_path",
    "write_manifest",
]

MANIFEST_NAME = "manifest.json"
# The file that makes a folder a data root: manifests under it name what lies inside it
# relative to themselves, so that the whole root can be copied, moved or mounted elsewhere.
DATA_ROOT_MARKER = ".prover-data-root"
_PINNED_LIBRARIES = (
    "prover-assets",
    "dagster",
    "torch",
    "transformers",
    "peft",
    "accelerate",
    "tokenizers",
    "vllm",
    "pyarrow",
    "pandas",
    "numpy",
    "pydantic",
)
_REQUIRED_KEYS = frozenset(
    {"asset", "inputs", "outputs", "config", "counts", "code", "pins", "started_at", "finished_at"}
)


@dataclass(frozen=True)
class GitRevision:
    """The code revision an artifact was made with (or why it is unknown)."""

    commit: str | None
    dirty: bool | None
    reason: str | None  # why commit is unknown; never a made-up commit


def now_utc() -> str:
    """The current time in UTC, to the second, in ISO 8601."""
    return datetime.now(UTC).isoformat(timespec="seconds")


@functools.cache
def git_revision(source_dir: str | None = None) -> GitRevision:
    """The git commit of the code that runs, and whether the tree had uncommitted changes."""
    folder = source_dir or str(Path(__file__).resolve().parent)
    try:
        commit = subprocess.run(
            ["git", "-C", folder, "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        status = subprocess.run(
            ["git", "-C", folder, "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except FileNotFoundError:
        return GitRevision(None, None, "git is not installed")
    except subprocess.CalledProcessError as exc:
        return GitRevision(None, None, f"not a git checkout with commits ({exc.stderr.strip()})")
    except subprocess.TimeoutExpired:
        return GitRevision(None, None, "git timed out")
    return GitRevision(commit, bool(status.strip()), None)


@functools.cache
def library_pins() -> dict[str, str | None]:
    """The installed versions of the libraries an artifact depends on."""
    return {"python": platform.python_version(), **package_versions(_PINNED_LIBRARIES)}


def package_versions(names: Iterable[str]) -> dict[str, str | None]:
    """The installed version of each distribution named, None where it is not installed."""
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def mark_data_root(root: Path) -> Path:
    """Make `root` (created if need be) a data root; returns it."""
    marker = root / DATA_ROOT_MARKER
    if not marker.exists():
        publish_text(
            marker, "prover-assets data root: manifests below name files relative to themselves\n"
        )
    return root


def data_root_of(folder: Path) -> Path | None:
    """The data root `folder` lies in (itself or the nearest marked ancestor); None if none."""
    folder = folder.resolve()
    return next((f for f in (folder, *folder.parents) if (f / DATA_ROOT_MARKER).is_file()), None)


def portable_path(path: str | Path, folder: Path) -> str:
    """How a manifest in `folder` names `path`: relative to `folder` when both lie in one data
    root (the root can move), else absolute (a source data set, a config, a hub model)."""
    path = Path(path).resolve()
    root = data_root_of(folder)
    if root is None or not path.is_relative_to(root):
        return str(path)
    return os.path.relpath(path, folder.resolve())


def recorded_path(folder: Path, recorded: str) -> Path:
    """The file a manifest in `folder` names by `recorded` (relative to `folder`, or absolute)."""
    return folder / recorded


def file_entry(
    path: str | Path, sha256: str | None = None, *, folder: Path, output: bool = False
) -> dict[str, Any]:
    """A file's path, sha256, size and stamp (`FileStamp`: a reader re-hashes it only when the
    stamp changed); `sha256` when the caller has just computed it. An `output` (a file of the
    step's own folder) is named relative to `folder` wherever it is; anything else as
    `portable_path` names it."""
    path = Path(path)
    stamp = settled_stamp(path)
    inside = output and path.resolve().is_relative_to(folder.resolve())
    return {
        "path": os.path.relpath(path.resolve(), folder.resolve())
        if inside
        else portable_path(path, folder),
        "sha256": sha256 or sha256_file(path),
        "bytes": path.stat().st_size,
        "stamp": None if stamp is None else asdict(stamp),
    }


def build_manifest(
    *,
    folder: Path,
    asset: str,
    inputs: Iterable[str | Path],
    outputs: Iterable[str | Path],
    config: Mapping[str, Any],
    counts: Mapping[str, Any],
    started_at: str,
    extra: Mapping[str, Any] | None = None,
    input_sha256: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The manifest to be written into `folder` (paths named from there: `portable_path`);
    `input_sha256` (path -> sha256) spares hashing large inputs a second time."""
    known = dict(input_sha256 or {})
    return {
        "asset": asset,
        "inputs": [file_entry(p, known.get(str(p)), folder=folder) for p in inputs],
        "outputs": [file_entry(p, folder=folder, output=True) for p in outputs],
        "config": dict(config),
        "counts": dict(counts),
        "code": asdict(git_revision()),
        "pins": library_pins(),
        "started_at": started_at,
        "finished_at": now_utc(),
        **(dict(extra) if extra else {}),
    }


def write_manifest(folder: str | Path, manifest: Mapping[str, Any]) -> Path:
    """Write a step's manifest atomically (last: its presence means the step completed)."""
    path = Path(folder) / MANIFEST_NAME
    publish_text(path, json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    return path


def read_manifest(folder: str | Path) -> dict[str, Any]:
    """The manifest of the step whose output is `folder`; raises if it is missing or malformed."""
    path = Path(folder) / MANIFEST_NAME
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}:{exc.lineno}: malformed manifest: {exc.msg}") from exc
    missing = _REQUIRED_KEYS - set(manifest)
    if missing:
        raise ValueError(f"{path}: manifest lacks {sorted(missing)}")
    return manifest
