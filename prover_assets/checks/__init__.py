"""Dagster asset checks: thin wrappers over the domain's validity functions."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import dagster as dg

from prover_assets.assets.metadata import output_dir
from prover_assets.checks.gates import JUDGED_MANIFEST
from prover_assets.records import MANIFEST_NAME, read_manifest
from prover_assets.records.hashing import sha256_file
from prover_assets.records.outputs import (
    ChecksumError,
    StageResult,
    verified_inputs,
    verified_outputs,
)
from prover_assets.records.validity import CheckOutcome

R = TypeVar("R", bound=StageResult)

# The checks of per-iteration assets carry the iteration partitions, so that the UI shows each
# iteration's check results; Dagster 1.13 calls partitioned checks a preview and warns once per
# check, which would bury the definitions' own warnings.
warnings.filterwarnings(
    "ignore", message="Specifying a partitions_def on an AssetCheckSpec", category=dg.PreviewWarning
)

__all__ = [
    "complete_file",
    "complete_folder",
    "gate",
    "made_from",
    "manifest_of",
    "result_of",
    "to_result",
]


def _verified(
    context: dg.AssetCheckExecutionContext,
    key: dg.AssetKey,
    names: list[str] | None,
    partition: str | None = None,
) -> Path:
    folder = Path(output_dir(context, key, partition))
    with _failing_as(key):
        verified_outputs(folder, names)
    return folder


@contextlib.contextmanager
def _failing_as(key: dg.AssetKey) -> Iterator[None]:
    """A file of `key`'s output (or one it was made from) that changed or is gone fails the
    check, naming the asset."""
    try:
        yield
    except (ChecksumError, OSError, ValueError) as exc:
        raise dg.Failure(f"{key.to_user_string()}: {exc}") from exc


def made_from(context: dg.AssetCheckExecutionContext, key: dg.AssetKey) -> dict[str, Path]:
    """The inputs `key`'s latest materialization was made from, by the name its step gave each,
    re-hashed (`records.outputs.verified_inputs`): a check judges what the output was made
    from, never what the config says now."""
    with _failing_as(key):
        return verified_inputs(Path(output_dir(context, key)))


def complete_folder(context: dg.AssetCheckExecutionContext, key: dg.AssetKey) -> Path:
    """The folder of `key`'s latest materialization, every output re-hashed against its
    manifest: a check never judges a file that changed after its step completed."""
    return _verified(context, key, None)


def complete_file(
    context: dg.AssetCheckExecutionContext,
    key: dg.AssetKey,
    name: str,
    partition: str | None = None,
) -> Path:
    """One output file of `key`'s latest materialization (of the check's iteration, or of
    `partition`), re-hashed against its manifest."""
    return _verified(context, key, [name], partition) / name


def manifest_of(context: dg.AssetCheckExecutionContext, key: dg.AssetKey) -> dict[str, Any]:
    """The manifest of `key`'s latest materialization: its counts and the run's config."""
    return read_manifest(Path(output_dir(context, key)))


def result_of(context: dg.AssetCheckExecutionContext, key: dg.AssetKey, model: type[R]) -> R:
    """The stage result recorded in the manifest of `key`'s latest materialization."""
    folder = Path(output_dir(context, key))
    try:
        return model.read(folder)
    except (OSError, ValueError) as exc:
        raise dg.Failure(f"{key.to_user_string()}: {exc}") from exc


def to_result(
    context: dg.AssetCheckExecutionContext, outcome: CheckOutcome, *, gate: bool = True
) -> dg.AssetCheckResult:
    """A failed gate is ERROR (blocking downstream); a failed non-gate check only warns. The
    result names the manifest it judged, so that a later run's step that reads this output
    finds this verdict on it (`prover_assets.checks.gates`)."""
    judged = Path(output_dir(context, context.check_specs[0].asset_key)) / MANIFEST_NAME
    return dg.AssetCheckResult(
        passed=outcome.passed,
        severity=dg.AssetCheckSeverity.ERROR if gate else dg.AssetCheckSeverity.WARN,
        description=outcome.description,
        metadata={
            key: dg.MetadataValue.json(value) if isinstance(value, (list, dict)) else value
            for key, value in outcome.metadata.items()
        }
        | {JUDGED_MANIFEST: sha256_file(judged)},
    )


def gate(
    asset: dg.AssetKey,
    name: str,
    description: str,
    *,
    partitions: dg.PartitionsDefinition | None = None,
    reads: Sequence[dg.AssetKey] = (),
    blocking: bool = True,
) -> Callable[[Callable[..., dg.AssetCheckResult]], dg.AssetChecksDefinition]:
    """The decorator of check `name` of `asset`: blocking (a gate: a failure stops what reads
    the asset, in this run and later ones) unless told otherwise; `reads`: the other assets it
    reads, which it runs after."""
    return dg.asset_check(
        asset=asset,
        name=name,
        blocking=blocking,
        partitions_def=partitions,
        additional_deps=list(reads) or None,
        description=description,
    )
