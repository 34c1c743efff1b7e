"""Every asset check of the graph a spec builds, and which of them are gates."""

from __future__ import annotations

import functools

import dagster as dg

from prover_assets.checks.loop import loop_checks
from prover_assets.checks.problems import problem_checks
from prover_assets.checks.sft import sft_checks
from prover_assets.config import ExperimentSpec

__all__ = ["all_checks", "blocking_checks_by_asset"]


def all_checks(spec: ExperimentSpec) -> list[dg.AssetChecksDefinition]:
    """The checks of the problem, generation, verdict and SFT assets (none runs Lean: the
    schedule's pools are the assets')."""
    return [*problem_checks(spec), *loop_checks(spec), *sft_checks(spec)]


def blocking_checks_by_asset(spec: ExperimentSpec) -> dict[dg.AssetKey, tuple[str, ...]]:
    """Each asset's blocking checks by name, sorted: the gates a reader of its output asks."""
    return dict(_blocking(spec.model_dump_json()))


@functools.cache
def _blocking(spec_json: str) -> tuple[tuple[dg.AssetKey, tuple[str, ...]], ...]:
    checks = all_checks(ExperimentSpec.model_validate_json(spec_json))
    names: dict[dg.AssetKey, set[str]] = {}
    for definition in checks:
        for spec in definition.check_specs:
            if spec.blocking:
                names.setdefault(spec.asset_key, set()).add(spec.name)
    return tuple((key, tuple(sorted(found))) for key, found in names.items())
