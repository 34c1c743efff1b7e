"""Jobs are asset selections over the one asset graph."""

from __future__ import annotations

import dagster as dg

from prover_assets.assets.keys import (
    BASELINE,
    CANDIDATE,
    OPERATIONS_GROUP,
    POOL_ROUND_GROUP,
    PROBLEMS_GROUP,
    REPORT_GROUP,
    SFT_GROUP,
)

__all__ = ["build_jobs"]


_JOBS: list[tuple[str, dg.AssetSelection, str]] = [
    (
        "problems",
        dg.AssetSelection.groups(PROBLEMS_GROUP),
        "Evaluation sets, decontamination sets, the pool's candidates and the train pool.",
    ),
    (
        "baseline",
        dg.AssetSelection.groups(BASELINE).upstream(),
        "Evaluation problems, then the baseline's generations and verdicts at each "
        "configured cap, in order. Relaunching resumes by key.",
    ),
    (
        "pool_round",
        dg.AssetSelection.groups(POOL_ROUND_GROUP).upstream(),
        "The train pool, round 0 with verdicts and feedback, the correction rounds.",
    ),
    (
        "sft",
        dg.AssetSelection.groups(SFT_GROUP),
        "SFT shards, the LoRA checkpoint, the exported model.",
    ),
    (
        "candidate_eval",
        dg.AssetSelection.groups(CANDIDATE),
        "The exported model's generations and verdicts, as the baseline's.",
    ),
    (
        "report",
        dg.AssetSelection.groups(REPORT_GROUP),
        "The evaluation report and evidence bundle.",
    ),
    (
        "full_round",
        dg.AssetSelection.all() - dg.AssetSelection.groups(OPERATIONS_GROUP),
        "Everything: problems, baseline, pool round, SFT, candidate, report.",
    ),
    (
        "operations",
        dg.AssetSelection.groups(OPERATIONS_GROUP),
        "The ETA of a full round from what has been measured so far.",
    ),
]


def build_jobs(
    run_config: dg.ConfigMapping, *, unlaunchable: list[str] = ()
) -> list[dg.UnresolvedAssetJobDefinition]:
    """Every job, with `run_config` (the launch-time validation) as its config; `unlaunchable`
    (placeholders still in the config file) is said in each job's description."""
    note = (
        f" NOT LAUNCHABLE YET: fill in the {len(unlaunchable)} placeholders of the config file "
        f"({', '.join(unlaunchable)})."
        if unlaunchable
        else ""
    )
    return [
        dg.define_asset_job(
            name, selection=selection, description=description + note, config=run_config
        )
        for name, selection, description in _JOBS
    ]
