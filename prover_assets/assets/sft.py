"""SFT assets: shards (read back through the trainer), the LoRA checkpoint, the exported model."""

import json
from pathlib import Path

import dagster as dg

from prover_assets import iteration
from prover_assets.assets.generation import RETRY, model_deps, model_for, resolved
from prover_assets.assets.keys import (
    DECONTAMINATION_KEY,
    SFT_GROUP,
    SFT_SHARDS,
    TRAIN_POOL,
    Schedule,
    TrainingRun,
    iteration_partitions,
    training_runs,
)
from prover_assets.assets.metadata import (
    display_number,
    histogram,
    partition_of,
    step_materialization,
)
from prover_assets.assets.progress import ProgressReporter
from prover_assets.assets.retries import fail_fast, start_attempt
from prover_assets.config import ExperimentSpec
from prover_assets.generation.revision import MODEL_DIR
from prover_assets.iteration import OutputRef, sft_round_refs
from prover_assets.problems.stages import SETS_FILE
from prover_assets.report.cost import tokens_trained
from prover_assets.report.markdown import png_image
from prover_assets.report.plots import line_plot
from prover_assets.resources import ExperimentResource, GpuResource, LeanResource
from prover_assets.sft.stages import (
    TrainingInterrupted,
    export_merge_device,
    materialize_checkpoint,
    materialize_export,
    materialize_shards,
)
from prover_assets.sft.trainer import DATA_ORDER_FILE, METRICS_FILE
from prover_assets.verify.stages import TRAIN_POOL_FILE

__all__ = ["sft_assets"]


def sft_rounds(
    spec: ExperimentSpec, experiment: ExperimentResource, partition: str | None
) -> list[tuple[Path, Path]]:
    """The pool rounds (files) of iteration `partition`'s SFT data."""
    return resolved(experiment, sft_round_refs(spec, partition))


def training_start(
    spec: ExperimentSpec, run: TrainingRun, partition: str | None
) -> OutputRef | None:
    """The model iteration `partition`'s LoRA of `run` trains on (`iteration.training_start`)."""
    return iteration.training_start(spec, tuple(run.export.path), partition)


def sft_data_deps(built: ExperimentSpec) -> list[dg.AssetDep]:
    """The pool rounds `sft_shards` reads, from the rule it reads them by
    (`iteration.sft_round_refs`): with several iterations, each round's partitions mapped to
    every iteration that reads them (its own, or with `sft_data: cumulative` each later one
    too), so Dagster sees an earlier iteration's round as upstream of a later one's shards."""
    readers: dict[tuple[str, ...], dict[str, list[str]]] = {}
    for number in range(1, built.iterations + 1):
        partition = iteration.iteration_partition(built.iterations, number)
        for pair in sft_round_refs(built, partition):
            for ref in pair:
                read_by = readers.setdefault(ref.asset, {})
                if ref.partition is not None and partition is not None:
                    read_by.setdefault(ref.partition, []).append(partition)
    return [
        dg.AssetDep(
            dg.AssetKey(list(asset)),
            partition_mapping=dg.StaticPartitionMapping(read_by) if read_by else None,
        )
        for asset, read_by in readers.items()
    ]


def sft_assets(built: ExperimentSpec, schedule: Schedule) -> list[dg.AssetsDefinition]:
    """The SFT assets: shards from the pool rounds' accepted samples, and per training seed the
    LoRA checkpoint and the export; all per iteration."""
    partitions = iteration_partitions(built.iterations)

    @dg.asset(
        key=SFT_SHARDS,
        group_name=SFT_GROUP,
        kinds={"numpy"},
        deps=[*sft_data_deps(built), TRAIN_POOL, DECONTAMINATION_KEY, *model_deps(built)],
        partitions_def=partitions,
        description="Accepted, faithful, distinct pool proofs as training rows (prompt_ids + "
        "completion_ids as sampled), every rule counted, read back through the trainer's path.",
    )
    def sft_shards(
        context: dg.AssetExecutionContext, experiment: ExperimentResource
    ) -> dg.MaterializeResult:
        spec = experiment.model(built)
        partition = partition_of(context)
        base_dir, _ = model_for(spec, experiment, None)
        rounds_files = sft_rounds(spec, experiment, partition)
        result = materialize_shards(
            experiment.asset_dir(SFT_SHARDS, partition),
            generation_files=[generations for generations, _ in rounds_files],
            verdict_files=[verdicts for _, verdicts in rounds_files],
            pool_file=experiment.complete_file(TRAIN_POOL, TRAIN_POOL_FILE),
            sets_file=experiment.complete_file(DECONTAMINATION_KEY, SETS_FILE),
            base_model_dir=base_dir,
            spec=spec.sft,
            samples_per_problem=spec.generation.n_samples,
        )
        counts = result.result.counts
        return step_materialization(
            result,
            experiment.data_root(),
            {
                "rows": dg.MetadataValue.int(counts.written),
                "candidates": counts.candidates,
                "drops": histogram({**counts.drops, "written": counts.written}, key="rule"),
                "tokens": counts.tokens,
                "kinds": dg.MetadataValue.json(counts.kinds),
                "reconciles": counts.reconciles(),
            },
        )

    return [
        sft_shards,
        *(
            asset
            for run in training_runs(built.training.all_seeds())
            for asset in _training_assets(built, schedule, run)
        ),
    ]


def _training_assets(
    built: ExperimentSpec, schedule: Schedule, run: TrainingRun
) -> list[dg.AssetsDefinition]:
    """The LoRA checkpoint and the export of one training seed."""
    partitions = iteration_partitions(built.iterations)
    seed = "" if run.registered and len(built.training.all_seeds()) == 1 else f" Seed {run.seed}."

    @dg.asset(
        key=run.checkpoint,
        group_name=SFT_GROUP,
        deps=[SFT_SHARDS, *model_deps(built)],
        partitions_def=partitions,
        pool=schedule.gpu_pool,
        retry_policy=RETRY,
        kinds={"pytorch"},
        description="LoRA training (transformers Trainer + peft) on packed micro-batches, "
        f"resumable to the micro-step; a SIGTERM saves and stops, running again resumes.{seed}",
    )
    @fail_fast
    def sft_checkpoint(
        context: dg.AssetExecutionContext,
        experiment: ExperimentResource,
        gpu: GpuResource,
        lean: LeanResource,
    ):
        spec = experiment.model(built)
        partition = partition_of(context)
        base_dir, base_rev = model_for(spec, experiment, training_start(spec, run, partition))
        folder = experiment.asset_dir(run.checkpoint, partition)
        start_attempt(context, folder, DATA_ORDER_FILE)
        reporter = ProgressReporter(context, "optimizer steps")
        threads = gpu.cpu_threads(lean)
        context.log.info(f"training on {threads.describe()}")
        try:
            result = materialize_checkpoint(
                folder,
                shards_dir=experiment.upstream_dir(SFT_SHARDS, partition),
                base_model_dir=base_dir,
                base_revision=base_rev,
                training=spec.training.for_seed(run.seed),
                device=gpu.model().device,
                on_progress=lambda at: reporter(
                    at.step, at.steps, at.steps_per_s(), "steps", at.extra()
                ),
                cpu_threads=threads.count,
            )
        except TrainingInterrupted as stop:
            # A stop was asked for (SIGTERM): retrying on our own would undo it.
            raise dg.Failure(description=str(stop), allow_retries=False) from stop
        metrics = [json.loads(line) for line in (folder / METRICS_FILE).read_text().splitlines()]
        losses = [(m["step"], m["loss"]) for m in metrics if "loss" in m]
        plot = (
            line_plot(
                {"train loss": ([s for s, _ in losses], [v for _, v in losses])},
                title="SFT loss",
                xlabel="optimizer step",
                ylabel="loss",
                integer_x=True,
            )
            if losses
            else b""
        )
        return step_materialization(
            result,
            experiment.data_root(),
            {
                "loss_curve": dg.MetadataValue.md(
                    png_image(plot, "loss curve") if plot else "no steps logged"
                ),
                "final_loss": (
                    dg.MetadataValue.float(display_number(losses[-1][1])) if losses else "none"
                ),
                "tokens_trained": tokens_trained(
                    experiment.upstream_dir(SFT_SHARDS, partition), result.result.epochs
                ),
            },
        )

    @dg.asset(
        key=run.export,
        group_name=SFT_GROUP,
        deps=[run.checkpoint],
        partitions_def=partitions,
        pool=schedule.gpu_pool,
        kinds={"huggingface"},
        description="The adapter merged into the base, saved as a plain Hugging Face folder with "
        f"revision sft-<sha256 of the weight shards>; its log-probabilities equal the adapter model's.{seed}",
    )
    def exported_model(
        context: dg.AssetExecutionContext,
        experiment: ExperimentResource,
        gpu: GpuResource,
        lean: LeanResource,
    ):
        spec = experiment.model(built)
        partition = partition_of(context)
        base_dir, _ = model_for(spec, experiment, training_start(spec, run, partition))
        device = gpu.model().device
        dtype = "bfloat16" if spec.training.uses_bf16(device) else "float32"
        merge_on = export_merge_device(spec.training, device, base_dir)
        context.log.info(f"export: the fp32 merge runs on {merge_on}")
        reporter = ProgressReporter(context, "export phases", log_every_s=0.0)
        result = materialize_export(
            experiment.asset_dir(run.export, partition),
            checkpoint_dir=experiment.upstream_dir(run.checkpoint, partition),
            base_model_dir=base_dir,
            shards_dir=experiment.complete_folder(SFT_SHARDS, partition),
            dtype=dtype,
            on_phase=lambda done, total, phase: reporter(
                done, total, None, "phases", {"now": phase}
            ),
            cpu_threads=gpu.cpu_threads(lean).count,
            merge_on=merge_on,
        )
        return step_materialization(
            result,
            experiment.data_root(),
            {
                "merged_on": result.result.merged_on,
                "model_rev": result.result.revision,
                "model_dir": dg.MetadataValue.path(str(result.folder / MODEL_DIR)),
            },
        )

    return [sft_checkpoint, exported_model]
