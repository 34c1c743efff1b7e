"""Dagster asset checks: thin wrappers over the domain's validity functions."""

from __future__ import annotations

import dagster as dg

from prover_assets.records.validity import CheckOutcome

__all__ = ["to_result"]


def to_result(outcome: CheckOutcome, *, gate: bool = True) -> dg.AssetCheckResult:
    """A failed gate is ERROR (blocking downstream); a failed non-gate check only warns."""
    return dg.AssetCheckResult(
        passed=outcome.passed,
        severity=dg.AssetCheckSeverity.ERROR if gate else dg.AssetCheckSeverity.WARN,
        description=outcome.description,
        metadata={
            key: dg.MetadataValue.json(value) if isinstance(value, (list, dict)) else value
            for key, value in outcome.metadata.items()
        },
    )
