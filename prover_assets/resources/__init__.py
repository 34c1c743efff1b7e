"""Dagster resources: thin wrappers that validate their settings into the domain's config models.

The settings live in one place (`prover_assets.config`); each resource takes them as one
permissive mapping from the run config and validates it strictly on use.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from prover_assets.config import (
    EngineSettings,
    ExperimentSpec,
    LeanSettings,
    parse_engine_settings,
    parse_experiment_spec,
    parse_lean_settings,
    resolve_path,
    same_shape,
)

__all__ = ["ExperimentResource", "GpuResource", "LeanSettingsResource"]


class ExperimentResource(dg.ConfigurableResource):
    """What the experiment is: `resources.experiment.config.spec` (an ExperimentSpec)."""

    spec: dict

    def model(self, built: ExperimentSpec | None = None) -> ExperimentSpec:
        """The validated spec; with `built`, also checks it has the asset graph's shape."""
        spec = parse_experiment_spec(self.spec)
        if built is not None:
            same_shape(spec, built)
        return spec

    def data_root(self) -> Path:
        path = resolve_path(self.model().data_root, "resources.experiment.config.spec.data_root")
        return path.resolve()

    def asset_dir(self, key: dg.AssetKey) -> Path:
        return self.data_root().joinpath(*key.path)


class LeanSettingsResource(dg.ConfigurableResource):
    """Base of the Lean resource: `resources.lean.config.settings` (LeanSettings)."""

    settings: dict

    def model(self) -> LeanSettings:
        return parse_lean_settings(self.settings)


class GpuResource(dg.ConfigurableResource):
    """How samples are generated: `resources.gpu.config.settings` (EngineSettings)."""

    settings: dict

    def model(self) -> EngineSettings:
        return parse_engine_settings(self.settings)
