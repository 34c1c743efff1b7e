"""Whole-file outputs that are trusted only when complete and current.

An output folder is complete when its manifest exists (it is written last) and every output
file still has the sha256 the manifest recorded (re-hashed only when its size, mtime or inode
changed: `FileStamp`). It is current when its inputs and config are
the ones the caller would use now. A complete but stale output is never silently replaced.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Self, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from prover_assets.records.hashing import FileStamp, sha256_file, sha256_unless_unchanged
from prover_assets.records.manifest import (
    MANIFEST_NAME,
    build_manifest,
    now_utc,
    read_manifest,
    recorded_path,
    write_manifest,
)
from prover_assets.records.store import publish_text
from prover_assets.records.usage import (
    EARLIER_ATTEMPTS_KEY,
    USAGE_KEY,
    AttemptJournal,
    GpuMemoryPeak,
    UsageMark,
    earlier_attempts,
    usage_since,
)

__all__ = [
    "JOURNAL_EVERY_S",
    "STREAM_FILE",
    "ChecksumError",
    "EmptyOutputError",
    "StageResult",
    "StaleOutputError",
    "Step",
    "StepInputs",
    "StepResult",
    "begin_stream",
    "current_manifest",
    "distinct_names",
    "require_rows",
    "supersede",
    "verified_inputs",
    "verified_outputs",
]

log = logging.getLogger(__name__)

STREAM_FILE = "stream.json"


class StageResult(BaseModel):
    """What a stage counted and measured, typed; each stage subclasses it. The manifest records
    it under `counts`, and checks, the `eta` asset and the report read it back with `of`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @classmethod
    def of(cls, manifest: Mapping[str, Any], where: str | Path = "the manifest") -> Self:
        """The result recorded in `manifest`; raises naming `where` if it is not this model."""
        try:
            return cls.model_validate(manifest["counts"])
        except (KeyError, ValidationError) as exc:
            raise ValueError(f"{where}: its counts are not a {cls.__name__}: {exc}") from exc

    @classmethod
    def read(cls, folder: Path) -> Self:
        """The result in `folder`'s manifest."""
        return cls.of(read_manifest(folder), folder / MANIFEST_NAME)


R = TypeVar("R", bound=StageResult)


@dataclass
class StepResult(Generic[R]):
    """What a step produced: where, its manifest, whether an existing output was reused."""

    folder: Path
    manifest: dict[str, Any]
    reused: bool  # the output was already complete and current
    result: R


@dataclass(frozen=True)
class StepInputs:
    """A step's input files by name and their sha256, each file hashed once."""

    files: dict[str, Path]
    digests: dict[str, str]

    @classmethod
    def hash(cls, files: Mapping[str, Path], known: Mapping[str, str] | None = None) -> StepInputs:
        """Hash `files` (name -> path); `known` (name -> sha256) spares files already hashed."""
        known = dict(known or {})
        return cls(
            dict(files), {name: known.get(name) or sha256_file(p) for name, p in files.items()}
        )


def distinct_names(files: Sequence[Path]) -> dict[str, Path]:
    """Each of `files` by a name that tells it from the others, for `StepInputs.hash`: its
    folder and name (`r0/generations.jsonl`), or as many folders more as it takes where
    another file shares them (an iteration's rounds: `r0/iteration-2/generations.jsonl`). A
    name never reaches further up than that: the data root's own name is in none, so a moved
    data root keeps its outputs current."""
    if len(set(files)) != len(files):
        raise ValueError(f"a file is given twice: {sorted(map(str, files))}")

    def suffix(path: Path, depth: int) -> str:
        return "/".join(path.parts[-depth:])

    names = {}
    for path in files:
        depth = 2
        while any(suffix(other, depth) == suffix(path, depth) for other in files if other != path):
            depth += 1
        names[suffix(path, depth)] = path
    return names


# How often a streamed step's attempt records its usage so far (a kill loses at most this much).
JOURNAL_EVERY_S = 10.0


@dataclass(frozen=True)
class Step(Generic[R]):
    """The skeleton every whole-output step shares: its inputs (hashed once), the config that
    with them decides whether an existing output is current, and the manifest it writes last."""

    folder: Path
    asset: str
    result_type: type[R]
    inputs: StepInputs
    config: Mapping[str, Any]
    started_at: str = field(default_factory=now_utc)
    # Measured from here to the manifest: the machine this attempt used (records/usage.py).
    usage_mark: UsageMark = field(default_factory=UsageMark.now)
    gpu_memory: GpuMemoryPeak = field(default_factory=GpuMemoryPeak)
    attempt: str = field(default_factory=lambda: f"{time.time_ns()}-{os.getpid()}")

    def reused(self) -> StepResult[R] | None:
        """The step's complete and current output (see `current_manifest`); None if none."""
        manifest = current_manifest(self.folder, inputs=self.inputs.digests, config=self.config)
        if manifest is None:
            return None
        log.info("%s is complete and current; reusing it", self.folder)
        result = self.result_type.of(manifest, self.folder / MANIFEST_NAME)
        return StepResult(self.folder, manifest, reused=True, result=result)

    def begin_stream(self) -> None:
        """Pin the step's config as the identity of the resumable stream in its folder."""
        begin_stream(self.folder, self.config)

    @contextlib.contextmanager
    def journaled(self, every_s: float | None = None) -> Iterator[None]:
        """Keep this attempt's record in the step's usage journal while the body runs (every
        `every_s` seconds, `JOURNAL_EVERY_S` by default, and how it ended): a killed attempt's
        usage outlives it."""
        journal = AttemptJournal(
            self.folder, self.attempt, self.usage_mark, gpu_memory=self.gpu_memory
        )
        with journal.kept(every_s or JOURNAL_EVERY_S):
            yield

    def manifest(
        self,
        result: R,
        outputs: Sequence[Path],
        extra: Mapping[str, Any] | None = None,
        *,
        written_in: Path | None = None,
    ) -> dict[str, Any]:
        """The manifest of this step's output: files, config, result, code, pins; its paths
        named from `written_in` (the step's folder, or a staging sibling of it)."""
        by_path = {str(self.inputs.files[n]): d for n, d in self.inputs.digests.items()}
        return build_manifest(
            folder=written_in or self.folder,
            asset=self.asset,
            inputs=list(self.inputs.files.values()),
            outputs=outputs,
            config=self.config,
            counts=result.model_dump(mode="json"),
            started_at=self.started_at,
            extra={
                "input_digests": self.inputs.digests,
                USAGE_KEY: usage_since(
                    self.usage_mark, peak_gpu_mib=self.gpu_memory.read()
                ).model_dump(),
                EARLIER_ATTEMPTS_KEY: [
                    a.model_dump() for a in earlier_attempts(self.folder, self.attempt)
                ],
                **(extra or {}),
            },
            input_sha256=by_path,
        )

    def finish(
        self, result: R, outputs: Sequence[Path], extra: Mapping[str, Any] | None = None
    ) -> StepResult[R]:
        """Write the manifest last, in the step's folder: from then on the output is complete."""
        manifest = self.manifest(result, outputs, extra)
        write_manifest(self.folder, manifest)
        return StepResult(self.folder, manifest, reused=False, result=result)

    def publish(
        self,
        staging: Path,
        result: R,
        outputs: Sequence[Path],
        extra: Mapping[str, Any] | None = None,
    ) -> StepResult[R]:
        """Write the manifest into `staging` (a `publish_folder`), its paths already the ones
        they will have in the step's folder once published."""
        # Named from the staging folder, a sibling of the step's: the same relative paths.
        manifest = self.manifest(result, outputs, extra, written_in=staging)
        write_manifest(staging, manifest)
        return StepResult(self.folder, manifest, reused=False, result=result)


class StaleOutputError(RuntimeError):
    """An existing output was made from other inputs or another config than this run's."""


class EmptyOutputError(ValueError):
    """A step would produce zero rows where rows are expected."""


def require_rows(
    count: int,
    what: str,
    *,
    allow_empty: bool = False,
    dropped: Mapping[str, int] | None = None,
) -> None:
    """Refuse an empty result unless the config says that empty is expected; the refusal says
    where the rows went (`dropped`: reason -> rows)."""
    if count == 0 and not allow_empty:
        went = ", ".join(f"{reason} {n}" for reason, n in (dropped or {}).items())
        raise EmptyOutputError(
            f"{what} has 0 rows: nothing downstream could be judged on it"
            + (f" (every row was dropped: {went})" if went else "")
            + ". Check the input and filters; if empty is expected, set allow_empty: true for it "
            "in the config."
        )


class ChecksumError(RuntimeError):
    """A file no longer has the sha256 its producer's manifest recorded (or is not listed)."""


def _output_path(entry: Mapping[str, Any], manifest: Path) -> Path:
    """The output file an entry of `manifest` names: inside the manifest's folder, or refused
    naming both (an absolute path written before manifests named outputs relative to
    themselves, in a data root that has since moved)."""
    folder = manifest.parent
    path = recorded_path(folder, entry["path"]).resolve()
    if not path.is_relative_to(folder.resolve()):
        raise ChecksumError(
            f"{manifest} records the output {entry['path']}, outside its folder {folder}: its data "
            "root was moved or copied since this step ran. Re-materialize the asset (move the "
            "folder aside first), or use the data root where it was made."
        )
    return path


def _check_entry(entry: Mapping[str, Any], manifest: Path) -> str:
    """The entry's output file has its recorded sha256 (re-hashed only when its stamp
    changed)."""
    return _check_file(_output_path(entry, manifest), entry, manifest)


def _check_file(path: Path, entry: Mapping[str, Any], manifest: Path) -> str:
    """`path`, the file `entry` of `manifest` names, has the entry's sha256."""
    expected = entry["sha256"]
    try:
        actual = sha256_unless_unchanged(path, expected, FileStamp.parse(entry.get("stamp")))
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
    entries = {_output_path(e, manifest_path): e for e in read_manifest(folder)["outputs"]}
    wanted = list(entries) if names is None else [(folder / n).resolve() for n in names]
    checked = {}
    for path in wanted:
        if path not in entries:
            raise ChecksumError(f"{path} is not an output that {manifest_path} records")
        checked[path] = _check_entry(entries[path], manifest_path)
    return checked


def verified_inputs(folder: Path) -> dict[str, Path]:
    """The inputs the completed step in `folder` was made from, by the name its step gave each
    (`StepInputs`), each re-hashed against its manifest: what a check judges the output
    against, whatever the config says now (raises `ChecksumError` naming a file that changed
    since, or a manifest whose two records of its inputs disagree)."""
    manifest_path = folder / MANIFEST_NAME
    manifest = read_manifest(folder)
    digests: dict[str, str] = manifest.get("input_digests", {})
    # A name is joined to its file by sha256 (the manifest's names are sorted, its list of
    # files is not): two inputs of the same bytes give the same judgment whichever is read.
    by_digest = {entry["sha256"]: entry for entry in manifest["inputs"]}
    if unlisted := sorted(name for name, digest in digests.items() if digest not in by_digest):
        raise ChecksumError(f"{manifest_path}: its inputs {unlisted} are named but not listed")
    return {
        name: _checked_input(
            recorded_path(folder, by_digest[digest]["path"]), by_digest[digest], manifest_path
        )
        for name, digest in digests.items()
    }


def _checked_input(path: Path, entry: Mapping[str, Any], manifest: Path) -> Path:
    _check_file(path, entry, manifest)
    return path


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
            _check_entry(entry, folder / MANIFEST_NAME)
        except ChecksumError as exc:
            raise StaleOutputError(str(exc)) from exc
    return manifest


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
