"""Every asset of the graph a spec describes, in one list (the definitions and the resource
that names the job making a missing upstream both build it)."""

from __future__ import annotations

import dagster as dg

from prover_assets.assets.demo import demo_assets
from prover_assets.assets.eta import eta_assets
from prover_assets.assets.generation import generation_asset, generation_nodes
from prover_assets.assets.keys import Schedule
from prover_assets.assets.overlapped import overlapped_pair
from prover_assets.assets.preflight import preflight_assets
from prover_assets.assets.problems import problem_assets
from prover_assets.assets.report import report_assets
from prover_assets.assets.sft import sft_assets
from prover_assets.assets.verification import verdict_asset, verdict_nodes, verification_assets
from prover_assets.config import ExperimentSpec

__all__ = ["generations_and_verdicts", "graph_assets"]


def graph_assets(spec: ExperimentSpec, schedule: Schedule) -> list[dg.AssetsDefinition]:
    """Every asset of the graph `spec` describes."""
    return [
        *problem_assets(spec),
        *generations_and_verdicts(spec, schedule),
        *verification_assets(spec, schedule),
        *sft_assets(spec, schedule),
        *report_assets(spec),
        *demo_assets(spec, schedule),
        *eta_assets(spec),
        *preflight_assets(schedule),
    ]


def generations_and_verdicts(spec: ExperimentSpec, schedule: Schedule) -> list[dg.AssetsDefinition]:
    """Each generation asset and its verdict asset: apart, one after the other (exclusive), or
    one pair whose two steps run at once (overlapped, `assets/overlapped.py`)."""
    generations = generation_nodes(spec, schedule)
    verdicts = {node.generation: node for node in verdict_nodes(spec)}
    if schedule.overlapped:
        return [overlapped_pair(g, verdicts[g.key], spec, schedule) for g in generations]
    return [
        *(generation_asset(node, spec, schedule) for node in generations),
        *(verdict_asset(node, spec, schedule) for node in verdicts.values()),
    ]
