"""Gates across runs: an output is read only when it, and every output it was made from, passed
its blocking checks on that very materialization.

Users launch the graph job by job, and a blocking check stops downstream steps only inside its
own run. So every check records the sha256 of the manifest it judged, and a step that reads an
upstream output walks that output's lineage (its manifest's inputs, transitively, as far as
they are outputs under the data root) and asks, for each output, the latest evaluation of each
of its blocking checks *on that manifest*. A re-materialization writes a new manifest and so
clears a failure; an output reused as complete keeps its manifest, and its failure with it.

This module holds the rule; `prover_assets.checks.gates` asks Dagster's event log.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from prover_assets.records.hashing import sha256_file
from prover_assets.records.layout import key_path
from prover_assets.records.manifest import MANIFEST_NAME, read_manifest, recorded_path

__all__ = [
    "PARTITION_PREFIX",
    "CheckEvaluation",
    "GateFinding",
    "Materialization",
    "gate_findings",
    "lineage",
    "materialization_of",
    "refusal_message",
]

PARTITION_PREFIX = "iteration-"  # a per-iteration asset's folder: <asset>/iteration-<i>


@dataclass(frozen=True)
class Materialization:
    """One complete output as it is read: its folder, the asset and iteration it belongs to,
    and the sha256 of its manifest (which names it across runs)."""

    folder: Path
    asset: tuple[str, ...]  # the asset key's path
    partition: str | None
    manifest_sha256: str

    @property
    def name(self) -> str:
        where = f" (iteration {self.partition})" if self.partition else ""
        return "/".join(self.asset) + where


def materialization_of(folder: Path, data_root: Path) -> Materialization:
    """The output in `folder` (a folder under `data_root` holding a manifest)."""
    parts = folder.resolve().relative_to(data_root.resolve()).parts
    partition = None
    if parts and parts[-1].startswith(PARTITION_PREFIX):
        partition = parts[-1].removeprefix(PARTITION_PREFIX)
        parts = parts[:-1]
    if not parts:
        raise ValueError(f"{folder} is the data root, not an asset's output")
    return Materialization(folder, key_path(parts), partition, sha256_file(folder / MANIFEST_NAME))


def _output_folder(path: Path, data_root: Path) -> Path | None:
    """The output folder holding `path` (the nearest folder with a manifest, below the data
    root); None for a file that is no asset's output (a source data set, a config)."""
    root = data_root.resolve()
    folder = path.resolve().parent
    while folder != root and root in folder.parents:
        if (folder / MANIFEST_NAME).is_file():
            return folder
        folder = folder.parent
    return None


def lineage(folder: Path, data_root: Path) -> list[Materialization]:
    """`folder`'s output and every output its manifest's inputs come from, transitively, each
    once, nearest first."""
    seen: dict[Path, Materialization] = {}
    pending = [folder.resolve()]
    while pending:
        current = pending.pop(0)
        if current in seen:
            continue
        seen[current] = materialization_of(current, data_root)
        for entry in read_manifest(current)["inputs"]:
            source = _output_folder(recorded_path(current, entry["path"]), data_root)
            if source is not None and source not in seen:
                pending.append(source)
    return list(seen.values())


@dataclass(frozen=True)
class CheckEvaluation:
    """A blocking check's latest completed evaluation of one manifest."""

    check: str
    passed: bool
    run_id: str
    description: str


@dataclass(frozen=True)
class GateFinding:
    """A blocking check that does not hold for an output: it failed, or never judged it."""

    output: Materialization
    check: str
    evaluation: CheckEvaluation | None  # None: the check never ran on this manifest

    def describe(self) -> str:
        if self.evaluation is None:
            return (
                f"{self.output.name}: check `{self.check}` never ran on this materialization "
                f"(manifest sha256 {self.output.manifest_sha256[:12]})"
            )
        return (
            f"{self.output.name}: check `{self.check}` failed in run {self.evaluation.run_id}: "
            f"{self.evaluation.description}"
        )


def gate_findings(
    output: Materialization,
    blocking: Sequence[str],
    evaluations: Mapping[str, CheckEvaluation | None],
) -> list[GateFinding]:
    """The blocking checks of `output` that do not hold: each without a passing evaluation of
    its manifest (`evaluations`: check name -> the latest one on that manifest)."""
    return [
        GateFinding(output, check, evaluations.get(check))
        for check in blocking
        if (found := evaluations.get(check)) is None or not found.passed
    ]


def refusal_message(read: Path, findings: Sequence[GateFinding]) -> str:
    """What a step says when it refuses to read `read`: each gate that does not hold, then
    what to do."""
    lines = "\n".join(f"  - {finding.describe()}" for finding in findings)
    return (
        f"refusing to read {read}: a gate upstream does not hold for what would be read\n{lines}\n"
        "Re-materialize the asset named (its blocking checks run with it; a new output clears "
        "the failure), or run its checks if they never ran; or, to go on anyway, set "
        "`resources.experiment.config.gate_override` to the reason in this run's config: the "
        "run records it and the report prints it, and no comparison it feeds is PRIMARY."
    )
