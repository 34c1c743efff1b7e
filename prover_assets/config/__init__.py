"""The run configuration: one YAML file, read into typed, validated objects.

A config file is also a valid Dagster run config (`dagster job launch -c configs/p2.yaml`):

    resources:
      experiment: {config: {spec: {...}}}     # ExperimentSpec: what the experiment is
      lean:       {config: {settings: {local: {...}}}} # LeanSettings, one model per backend
      gpu:        {config: {settings: {...}}} # EngineSettings: how samples are generated

Every section is strict: an unknown key, a wrong type or a duplicate YAML key is an error that
names the file and the key path. Values that the user must fill in (paths on their machine, the
pool shards' sha256) are written as `REPLACE_ME...` placeholders; the definitions load with
them (and say which are left), and a launch is refused, naming every one, until all are filled.

The sections live in `config.experiment` (what the experiment is), `config.settings` (Lean and
the generation engines on this machine) and `config.loading` (the file read into a
`RunConfig`); `config.base` holds what they share. Import from `prover_assets.config`.
"""

from __future__ import annotations

from prover_assets.config.base import (
    PLACEHOLDER_PREFIX,
    ConfigError,
    InputFile,
    is_placeholder,
    require_filled,
    resolve_path,
)
from prover_assets.config.experiment import (
    PLACE_FIELDS,
    CorrectionSpec,
    DemoSpec,
    EvalSetSpec,
    ExperimentSpec,
    GenerationSpec,
    IterationSpec,
    ModelSpec,
    PoolColumns,
    PoolSpec,
    ReportSpec,
    SftSpec,
    TrainingSpec,
)
from prover_assets.config.loading import (
    RunConfig,
    assemble_run_config,
    load_run_config,
    parse_engine_settings,
    parse_experiment_spec,
    parse_lean_settings,
    parse_run_config,
    placeholders,
    require_no_placeholders,
    same_shape,
)
from prover_assets.config.settings import (
    LEAN_BACKENDS,
    REMOTE_PINS,
    EngineSettings,
    LeanSettings,
    LocalLeanSettings,
    RemoteLeanSettings,
    SimulatedLeanSettings,
    lean_from_selector,
    require_backend_allowed,
)

__all__ = [
    "LEAN_BACKENDS",
    "PLACEHOLDER_PREFIX",
    "PLACE_FIELDS",
    "REMOTE_PINS",
    "ConfigError",
    "CorrectionSpec",
    "DemoSpec",
    "EngineSettings",
    "EvalSetSpec",
    "ExperimentSpec",
    "GenerationSpec",
    "InputFile",
    "IterationSpec",
    "LeanSettings",
    "LocalLeanSettings",
    "ModelSpec",
    "PoolColumns",
    "PoolSpec",
    "RemoteLeanSettings",
    "ReportSpec",
    "RunConfig",
    "SftSpec",
    "SimulatedLeanSettings",
    "TrainingSpec",
    "assemble_run_config",
    "is_placeholder",
    "lean_from_selector",
    "load_run_config",
    "parse_engine_settings",
    "parse_experiment_spec",
    "parse_lean_settings",
    "parse_run_config",
    "placeholders",
    "require_backend_allowed",
    "require_filled",
    "require_no_placeholders",
    "resolve_path",
    "same_shape",
]
