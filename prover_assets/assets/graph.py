"""Every asset of the graph a spec describes, in one list (the definitions and the resource
that names the job making a missing upstream both build it)."""

from __future__ import annotations

import dagster as dg

from prover_assets.assets.demo import demo_assets
from prover_assets.assets.eta import eta_assets
from prover_assets.assets.generation import generation_assets
from prover_assets.assets.keys import Schedule
from prover_assets.assets.preflight import preflight_assets
from prover_assets.assets.problems import problem_assets
from prover_assets.assets.report import report_assets
from prover_assets.assets.sft import sft_assets
from prover_assets.assets.verification import verification_assets
from prover_assets.config import ExperimentSpec

__all__ = ["graph_assets"]


def graph_assets(spec: ExperimentSpec, schedule: Schedule) -> list[dg.AssetsDefinition]:
    """Every asset of the graph `spec` describes."""
    return [
        *problem_assets(spec),
        *generation_assets(spec, schedule),
        *verification_assets(spec, schedule),
        *sft_assets(spec, schedule),
        *report_assets(spec),
        *demo_assets(spec, schedule),
        *eta_assets(spec),
        *preflight_assets(schedule),
    ]
