"""Jobs are asset selections over the one asset graph."""

from __future__ import annotations

import dagster as dg

from prover_assets.assets.problems import GROUP as PROBLEMS_GROUP

__all__ = ["build_jobs"]


def build_jobs() -> list[dg.UnresolvedAssetJobDefinition]:
    return [
        dg.define_asset_job(
            "problems",
            selection=dg.AssetSelection.groups(PROBLEMS_GROUP),
            description="Evaluation sets, decontamination sets and the pool's ranked candidates.",
        ),
        dg.define_asset_job(
            "full_round",
            selection=dg.AssetSelection.all(),
            description="Everything: problems, baseline, pool round, SFT, candidate, report.",
        ),
    ]
