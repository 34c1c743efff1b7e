"""Preflight: every way a registered round can fail, found in minutes before its hours start.

`run_preflight(config)` runs the checks in order (the config, the model, the Lean workspace,
host memory, the GPUs, the golden prompt, a smoke round, the disk) and keeps its report where
heavy jobs look for it (`require_passing_preflight`).
"""

from prover_assets.preflight.gate import (
    HEAVY_JOBS,
    PREFLIGHT_JOB,
    PreflightMissing,
    preflight_identity,
    read_report,
    require_passing_preflight,
)
from prover_assets.preflight.model import CheckStatus, PreflightCheck, PreflightReport
from prover_assets.preflight.run import PreflightSettings, run_preflight

__all__ = [
    "HEAVY_JOBS",
    "PREFLIGHT_JOB",
    "CheckStatus",
    "PreflightCheck",
    "PreflightMissing",
    "PreflightReport",
    "PreflightSettings",
    "preflight_identity",
    "read_report",
    "require_passing_preflight",
    "run_preflight",
]
