"""The `eta` asset: how long a full round takes, from what the instance has measured so far.

It reads the result models in the manifests of the loop's latest materializations, so it can be
materialized at any time: before anything has run it is all priors, and every asset that
finishes replaces a prior by a measurement.
"""

import json
from pathlib import Path
from typing import Any, TypeVar

import dagster as dg

from prover_assets.assets.keys import (
    DECONTAMINATION_KEY,
    DEMO_BASE_MODEL,
    ETA_KEY,
    EXPORTED_MODEL,
    OPERATIONS_GROUP,
    POOL_CANDIDATES_KEY,
    REPORT_KEY,
    SFT_CHECKPOINT,
    SFT_SHARDS,
    TRAIN_POOL,
    eval_set_key,
    judged_batches,
    pool_generations_key,
)
from prover_assets.assets.metadata import display_number, latest_result, step_wall_s
from prover_assets.config import ExperimentSpec, assemble_run_config, is_placeholder
from prover_assets.generation.runner import GenerationBatchResult
from prover_assets.gpus import training_ranks
from prover_assets.operations.eta import (
    BOUNDS,
    RoundPlan,
    StepBalance,
    eta_table,
    eval_problems_upper_bound,
    measured_inputs,
    round_plan,
    step_balances,
)
from prover_assets.preflight.gate import preflight_figures
from prover_assets.problems.stages import EvalSetResult
from prover_assets.records.outputs import StageResult
from prover_assets.report.markdown import clock_time, png_image
from prover_assets.report.plots import bar_plot
from prover_assets.resources import ExperimentResource, GpuResource, LeanResource
from prover_assets.sft.export import planned_export
from prover_assets.sft.memory import GIB, QWEN3_8B, ModelShape, training_memory
from prover_assets.sft.stages import SftShardsResult, TrainingResult
from prover_assets.verify.runner import VerificationResult
from prover_assets.verify.sizing import sized_workers
from prover_assets.verify.stages import TrainPoolResult

__all__ = ["ETA_TABLE", "eta_assets"]

# The metadata key of the ETA's table in numbers (`eta_table`: hours per step, low / central /
# high, and each input): what the report reads.
ETA_TABLE = "table"

R = TypeVar("R", bound=StageResult)


def _eval_problem_count(
    spec: ExperimentSpec, eval_set: str, materialized: EvalSetResult | None
) -> int:
    """Measured when the set is materialized; before that, the bound from its file."""
    if materialized is not None:
        return materialized.written
    return eval_problems_upper_bound(spec, eval_set)


def eta_assets(built: ExperimentSpec) -> list[dg.AssetsDefinition]:
    """The `eta` asset: hours of a full round of `built`'s shape, from what has been measured so
    far."""

    @dg.asset(
        key=ETA_KEY,
        group_name=OPERATIONS_GROUP,
        kinds={"markdown"},
        description="Hours of a full round (every iteration and training seed), per step, low / "
        "central / high: measured inputs from the metadata of materialized assets (any "
        "iteration's), stated priors for the rest. Materialize at any time.",
    )
    def eta(
        context: dg.AssetExecutionContext,
        experiment: ExperimentResource,
        lean: LeanResource,
        gpu: GpuResource,
    ):
        spec = experiment.model(built)
        sizing = sized_workers(lean.model())
        instance = context.instance
        measured = _measured(built, instance)
        engines = gpu.model()
        plan = _round_plan(spec, instance, sizing.workers, engines.engines, engines.device)
        config = assemble_run_config(spec, lean.model(), engines, experiment.source)
        table = eta_table(plan, measured, preflight_figures(config))
        balances = step_balances(table, sizing.workers)
        context.log.info(f"Lean: {sizing.describe()}")
        for balance in balances:
            context.log.info(balance.describe())
        total = table["total_hours"]
        measured_count = sum(i["source"] == "measured" for i in table["inputs"].values())
        preflight_count = sum(i["source"] == "preflight" for i in table["inputs"].values())
        context.log.info(
            f"full round: {clock_time(total['central'] * 3600)} central "
            f"({clock_time(total['low'] * 3600)} to {clock_time(total['high'] * 3600)}); "
            f"{measured_count} of {len(table['inputs'])} inputs measured, {preflight_count} from "
            "the preflight's smoke round"
        )
        memory = _memory_metadata(spec)
        context.log.info(f"training memory: {memory['training_memory_peak']}")
        return dg.MaterializeResult(
            metadata={
                **_eta_metadata(spec.name, table, measured_count),
                "inputs_from_preflight": preflight_count,
                "lean_workers": sizing.describe(),
                "balance": _balance_table(balances),
                **memory,
            }
        )

    return [eta]


def _measured(built: ExperimentSpec, instance: dg.DagsterInstance) -> dict[str, float]:
    """The round's inputs measured by the materialized steps' results and wall times."""

    def found(keys: list[dg.AssetKey], model: type[R]) -> list[R]:
        return [r for key in keys if (r := measured_result(instance, key, model)) is not None]

    def walled(keys: list[dg.AssetKey], model: type[R]) -> list[tuple[R, float]]:
        return [
            (result, wall)
            for key in keys
            if (result := measured_result(instance, key, model)) is not None
            and (wall := step_wall_s(instance, key, any_partition=True)) is not None
        ]

    correction = (
        measured_result(instance, pool_generations_key(1), GenerationBatchResult)
        if built.corrections.rounds
        else None
    )
    batches = judged_batches(built)
    generation_keys = [batch.generations for batch in batches]
    verdict_keys = [batch.verdicts for batch in batches]
    return measured_inputs(
        found(generation_keys, GenerationBatchResult),
        found(verdict_keys, VerificationResult),
        correction_plan=correction.plan.corrections if correction else None,
        train_pool=measured_result(instance, TRAIN_POOL, TrainPoolResult),
        sft_shards=measured_result(instance, SFT_SHARDS, SftShardsResult),
        sft_checkpoint=measured_result(instance, SFT_CHECKPOINT, TrainingResult),
        step_seconds=_fixed_step_seconds(built, instance),
        generation_walls=walled(generation_keys, GenerationBatchResult),
        verification_walls=walled(verdict_keys, VerificationResult),
    )


def _memory_metadata(spec: ExperimentSpec) -> dict[str, Any]:
    """One training rank's planned peak, term by term, with the attention the config names
    (flash-attention 2 for auto; SDPA's peak beside it), from the model snapshot's config.json,
    or Qwen3-8B's shape before it is on disk."""
    if spec.model.source == "demo_tiny":
        return {"training_memory_peak": "the demo trains its tiny model on CPU: no GPU plan"}
    config_file = Path(spec.model.path or "") / "config.json"
    if not is_placeholder(spec.model.path or "") and config_file.is_file():
        config, source = json.loads(config_file.read_text(encoding="utf-8")), str(config_file)
    else:
        config, source = QWEN3_8B, "Qwen3-8B's shape (no snapshot at spec.model.path yet)"
    parameters = ModelShape.of(config).parameters()
    # a GPU training plan: the merge planned on a training GPU where the fp32 model fits
    export_bytes, merge_on = planned_export(
        spec.training.gpu_memory_gib, parameters, trains_on_gpu=True
    )
    flash = training_memory(spec.training, config)
    sdpa = training_memory(spec.training, config, attention="sdpa")
    planned = sdpa if spec.training.attention == "sdpa" else flash  # the config's choice
    rows = [dg.TableRecord(row) for row in planned.table()]
    schema = dg.TableSchema(
        [
            dg.TableColumn("term", "string"),
            dg.TableColumn("GiB", "float"),
            dg.TableColumn("in peak", "bool", description="added into the peak"),
        ]
    )
    return {
        "training_memory": dg.MetadataValue.table(rows, schema),
        "training_memory_peak": planned.refusal() or planned.describe(),
        "training_memory_peak_sdpa_gib": dg.MetadataValue.float(round(sdpa.peak_bytes / GIB, 2)),
        "training_memory_model_config": source,
        # the export's fp32 merge (sft/export.py: on a training GPU when it fits), its host peak
        # beside the training's GPU peak
        "export_merge_on": merge_on,
        "export_host_peak_gib": dg.MetadataValue.float(round(export_bytes / GIB, 2)),
    }


def _fixed_step_seconds(built: ExperimentSpec, instance: dg.DagsterInstance) -> dict[str, float]:
    """The measured wall time of each fixed step (by its ETA input), where every asset of the
    step was materialized with work done."""
    keys = {
        "eval sets s": [eval_set_key(name) for name in built.eval_sets],
        "decontamination s": [DECONTAMINATION_KEY],
        "pool candidates s": [POOL_CANDIDATES_KEY],
        "train pool s": [TRAIN_POOL],
        "demo format tuning s": [DEMO_BASE_MODEL],
        "SFT shards s": [SFT_SHARDS],
        "export s": [EXPORTED_MODEL],
        "report s": [REPORT_KEY],
    }
    seconds = {}
    for name, step_keys in keys.items():
        walls = [step_wall_s(instance, key, any_partition=True) for key in step_keys]
        if walls and all(wall is not None for wall in walls):
            seconds[name] = sum(w for w in walls if w is not None)
    return seconds


def _round_plan(
    spec: ExperimentSpec, instance: dg.DagsterInstance, workers: int, engines: int, device: str
) -> RoundPlan:
    """What a full round of this experiment does (problem counts measured where known)."""
    counts = {
        name: _eval_problem_count(
            spec, name, measured_result(instance, eval_set_key(name), EvalSetResult)
        )
        for name in spec.eval_sets
    }
    return round_plan(spec, counts, workers, engines, training_ranks(spec.training, device))


def _balance_table(balances: list[StepBalance]) -> dg.MetadataValue:
    """Which side bounds each sampling step, by how much, and the workers that balance it."""
    return dg.MetadataValue.table(
        [
            dg.TableRecord(
                {
                    "step": b.step,
                    "generate h": round(b.generate_h, 3),
                    "verify h": round(b.verify_h, 3),
                    "bound by": b.bound_by,
                    "factor": round(b.factor, 2),
                    "workers to balance": b.balancing_workers,
                }
            )
            for b in balances
        ],
        dg.TableSchema(
            [
                dg.TableColumn("step", "string"),
                dg.TableColumn("generate h", "float"),
                dg.TableColumn("verify h", "float", description="at the workers now"),
                dg.TableColumn("bound by", "string"),
                dg.TableColumn("factor", "float"),
                dg.TableColumn("workers to balance", "int"),
            ]
        ),
    )


def measured_result(instance: dg.DagsterInstance, key: dg.AssetKey, model: type[R]) -> R | None:
    """The result of `key`'s latest materialization, of any iteration: each measures a rate."""
    return latest_result(instance, key, model, any_partition=True)


def _eta_metadata(name: str, table: dict[str, Any], measured_count: int) -> dict[str, Any]:
    """The ETA table as the asset's metadata: totals, the step and input tables, a plot."""
    total = table["total_hours"]
    steps = dg.MetadataValue.table(
        [
            dg.TableRecord({"step": s["step"], **{b: clock_time(s[b] * 3600) for b in BOUNDS}})
            for s in [*table["steps"], {"step": "total", **total}]
        ],
        dg.TableSchema(
            [dg.TableColumn("step", "string")]
            + [dg.TableColumn(b, "string", description="h:mm:ss") for b in BOUNDS]
        ),
    )
    inputs = dg.MetadataValue.table(
        [
            dg.TableRecord(
                {"input": name, **{b: display_number(i[b]) for b in BOUNDS}, "source": i["source"]}
            )
            for name, i in table["inputs"].items()
        ],
        dg.TableSchema(
            [dg.TableColumn("input", "string")]
            + [dg.TableColumn(b, "float") for b in BOUNDS]
            + [
                dg.TableColumn(
                    "source",
                    "string",
                    description="measured by a full step, by the preflight's smoke round, or a prior",
                )
            ]
        ),
    )
    plot = bar_plot(
        {
            bound: {s["step"]: s[bound] for s in table["steps"]}
            for bound in ("low", "central", "high")
        },
        title=f"{name}: hours per step of a full round",
        ylabel="hours",
    )
    return {
        "total_central": clock_time(total["central"] * 3600),
        "total_range": f"{clock_time(total['low'] * 3600)} to {clock_time(total['high'] * 3600)}",
        "total_hours_central": dg.MetadataValue.float(display_number(total["central"])),
        "total_hours_low": dg.MetadataValue.float(display_number(total["low"])),
        "total_hours_high": dg.MetadataValue.float(display_number(total["high"])),
        "inputs_measured": f"{measured_count} of {len(table['inputs'])}",
        "steps": steps,
        "inputs": inputs,
        "plot": dg.MetadataValue.md(png_image(plot, "hours per step")),
        ETA_TABLE: dg.MetadataValue.json(table),
    }
