"""Jobs are asset selections over the one asset graph."""

from __future__ import annotations

import dagster as dg

from prover_assets.assets.keys import (
    BASELINE,
    CANDIDATE,
    OPERATIONS_GROUP,
    POOL_ROUND_GROUP,
    REPORT_GROUP,
    SFT_GROUP,
)
from prover_assets.assets.problems import GROUP as PROBLEMS_GROUP

__all__ = ["build_jobs"]


def build_jobs() -> list[dg.UnresolvedAssetJobDefinition]:
    return [
        dg.define_asset_job(
            "problems",
            selection=dg.AssetSelection.groups(PROBLEMS_GROUP),
            description="Evaluation sets, decontamination sets, the pool's candidates and the train pool.",
        ),
        dg.define_asset_job(
            "baseline",
            selection=dg.AssetSelection.groups(BASELINE).upstream(),
            description="Evaluation problems, then the baseline's generations and verdicts at each "
            "configured cap, in order. Relaunching resumes by key.",
        ),
        dg.define_asset_job(
            "pool_round",
            selection=dg.AssetSelection.groups(POOL_ROUND_GROUP).upstream(),
            description="The train pool, round 0 with verdicts and feedback, the correction rounds.",
        ),
        dg.define_asset_job(
            "sft",
            selection=dg.AssetSelection.groups(SFT_GROUP),
            description="SFT shards, the LoRA checkpoint, the exported model.",
        ),
        dg.define_asset_job(
            "candidate_eval",
            selection=dg.AssetSelection.groups(CANDIDATE),
            description="The exported model's generations and verdicts, as the baseline's.",
        ),
        dg.define_asset_job(
            "report",
            selection=dg.AssetSelection.groups(REPORT_GROUP),
            description="The evaluation report and evidence bundle.",
        ),
        dg.define_asset_job(
            "full_round",
            selection=dg.AssetSelection.all() - dg.AssetSelection.groups(OPERATIONS_GROUP),
            description="Everything: problems, baseline, pool round, SFT, candidate, report.",
        ),
        dg.define_asset_job(
            "operations",
            selection=dg.AssetSelection.groups(OPERATIONS_GROUP),
            description="The ETA of a full round from what has been measured so far.",
        ),
    ]
