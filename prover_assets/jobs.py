"""Jobs are asset selections over the one asset graph.

In a graph of several iterations the per-iteration jobs (`pool_round`, `sft`,
`candidate_eval`, and `iteration`: one iteration whole) are partitioned: a run is one
iteration's partition. Dagster takes no ConfigMapping on a partitioned job, so their run config
is the config file's (a PartitionedConfig), checked when the run's resources start instead of
at launch; `full_round` is not offered there (the report needs every iteration first).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import dagster as dg

from prover_assets import job_names
from prover_assets.assets.keys import (
    BASELINE,
    CANDIDATE,
    OPERATIONS_GROUP,
    POOL_ROUND_GROUP,
    PREFLIGHT_GROUP,
    PROBLEMS_GROUP,
    REPORT_GROUP,
    SFT_GROUP,
    STATEMENT_AUDIT,
)

__all__ = ["build_jobs", "jobs_making", "unmaterialized_message"]


_JOBS: list[tuple[str, dg.AssetSelection, str]] = [
    (
        job_names.PREFLIGHT,
        dg.AssetSelection.groups(PREFLIGHT_GROUP),
        "Every check of the environment (config, model, Lean, memory, GPUs, prompt, a smoke "
        "round, disk), in minutes: heavy jobs refuse to launch without a passing one.",
    ),
    (
        job_names.PROBLEMS,
        dg.AssetSelection.groups(PROBLEMS_GROUP),
        "Evaluation sets, decontamination sets, the pool's candidates and the train pool.",
    ),
    (
        job_names.BASELINE,
        # The statements' audit with them: the report leaves out what it finds.
        dg.AssetSelection.groups(BASELINE).upstream()
        | dg.AssetSelection.key_prefixes([STATEMENT_AUDIT]),
        "Evaluation problems and their statement audit, then the baseline's generations and "
        "verdicts at each configured cap, in order. Relaunching resumes by key.",
    ),
    (
        job_names.POOL_ROUND,
        dg.AssetSelection.groups(POOL_ROUND_GROUP).upstream(),
        "The train pool, round 0 with verdicts and feedback, the correction rounds.",
    ),
    (
        job_names.SFT,
        dg.AssetSelection.groups(SFT_GROUP),
        "SFT shards, the LoRA checkpoint, the exported model.",
    ),
    (
        job_names.CANDIDATE_EVAL,
        dg.AssetSelection.groups(CANDIDATE),
        "The exported model's generations and verdicts, as the baseline's.",
    ),
    (
        job_names.REPORT,
        dg.AssetSelection.groups(REPORT_GROUP),
        "The evaluation report and evidence bundle.",
    ),
    (
        job_names.FULL_ROUND,
        dg.AssetSelection.all() - dg.AssetSelection.groups(OPERATIONS_GROUP, PREFLIGHT_GROUP),
        "Everything: problems, baseline, pool round, SFT, candidate, report.",
    ),
    (
        job_names.OPERATIONS,
        dg.AssetSelection.groups(OPERATIONS_GROUP),
        "The ETA of a full round from what has been measured so far.",
    ),
]


_PER_ITERATION = (job_names.POOL_ROUND, job_names.SFT, job_names.CANDIDATE_EVAL)
_ITERATION_JOB = (
    job_names.ITERATION,
    dg.AssetSelection.groups(POOL_ROUND_GROUP, SFT_GROUP, CANDIDATE).upstream()
    - dg.AssetSelection.groups(BASELINE),
    "One expert iteration whole (pick its partition; iteration i needs iteration i-1's export): "
    "its pool rounds, SFT data, every training seed's checkpoint, export and evaluation.",
)


def _launchable(iterations: bool) -> list[tuple[str, dg.AssetSelection, str]]:
    """The jobs a graph offers: `full_round` only in a graph of one iteration."""
    if not iterations:
        return list(_JOBS)
    return [made for made in _JOBS if made[0] != job_names.FULL_ROUND] + [_ITERATION_JOB]


def jobs_making(
    key: dg.AssetKey, assets: Sequence[dg.AssetsDefinition], *, iterations: bool
) -> list[str]:
    """The jobs of the graph of `assets` that materialize `key`, the narrowest first."""
    selected = [(name, selection.resolve(assets)) for name, selection, _ in _launchable(iterations)]
    return [name for name, keys in sorted(selected, key=lambda job: len(job[1])) if key in keys]


def unmaterialized_message(
    key: dg.AssetKey, partition: str | None, folder: str, jobs: Sequence[str]
) -> str:
    """What a step says of an upstream asset with no complete output: which, and what to launch."""
    what = key.to_user_string() + (f" (iteration {partition})" if partition is not None else "")
    if jobs:
        launch = " or ".join(f"`{job}`" for job in jobs[:2])
        todo = (
            f"launch the {launch} job first (the Launchpad, or `dagster job launch -j {jobs[0]} "
            "-c <your config>`)"
        )
    else:
        todo = "materialize it first"
    return f"this step reads {what}, which is not materialized yet (no complete output in {folder}): {todo}."


def build_jobs(
    run_config: Callable[[str], dg.ConfigMapping],
    *,
    unlaunchable: list[str] = (),
    iterations: dg.PartitionsDefinition | None = None,
) -> list[dg.UnresolvedAssetJobDefinition]:
    """Every job, with `run_config(job)` (the launch-time validation) as its config; `unlaunchable`
    (placeholders still in the config file) is said in each job's description. With
    `iterations` (a graph of several), the per-iteration jobs are partitioned by them."""
    note = (
        f" NOT LAUNCHABLE YET: fill in the {len(unlaunchable)} placeholders of the config file "
        f"({', '.join(unlaunchable)})."
        if unlaunchable
        else ""
    )
    if iterations is None:
        return [
            dg.define_asset_job(
                name, selection=selection, description=description + note, config=run_config(name)
            )
            for name, selection, description in _JOBS
        ]
    per_iteration = dg.PartitionedConfig(
        partitions_def=iterations, run_config_for_partition_key_fn=lambda _: {}
    )
    jobs = _launchable(iterations=True)
    return [
        dg.define_asset_job(
            name,
            selection=selection,
            description=description + note,
            config=per_iteration
            if name in (*_PER_ITERATION, _ITERATION_JOB[0])
            else run_config(name),
            partitions_def=iterations if name in (*_PER_ITERATION, _ITERATION_JOB[0]) else None,
        )
        for name, selection, description in jobs
    ]
