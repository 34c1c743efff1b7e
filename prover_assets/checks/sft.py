"""Blocking checks of the SFT assets."""

import json
from pathlib import Path

import dagster as dg

from prover_assets.assets.keys import (
    DECONTAMINATION_KEY,
    SFT_SHARDS,
    TRAIN_POOL,
    TrainingRun,
    iteration_partitions,
    pool_generations_key,
    training_runs,
)
from prover_assets.assets.metadata import output_dir
from prover_assets.checks import complete_file, complete_folder, gate, made_from, to_result
from prover_assets.config import ExperimentSpec
from prover_assets.problems.decontamination import DecontaminationSets
from prover_assets.problems.stages import SETS_FILE
from prover_assets.sft.stages import SftShardsResult, recorded_generations
from prover_assets.sft.trainer import DATA_ORDER_FILE
from prover_assets.sft.validity import (
    check_at_least_one_row,
    check_checkpoint_data_order,
    check_export_parity,
    check_no_eval_leak,
    check_rows_match_generations,
    check_shard_counts,
)
from prover_assets.verify.stages import TRAIN_POOL_FILE

__all__ = ["sft_checks"]


def sft_checks(built: ExperimentSpec) -> list:
    """The blocking checks of the SFT shards, and of each seed's checkpoint (data order) and
    export (parity)."""
    generations = [pool_generations_key(r) for r in range(built.corrections.rounds + 1)]
    partitions = iteration_partitions(built.iterations)

    def shards(context: dg.AssetCheckExecutionContext) -> Path:
        return complete_folder(context, SFT_SHARDS)

    @gate(
        SFT_SHARDS,
        "read_back_exact",
        "every row, through the trainer's dataset and collate, is its generation's "
        "prompt (no loss) and completion (loss), token for token",
        partitions=partitions,
        reads=generations,
    )
    def read_back_exact(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        # the generations the shards were made from, whatever the config says now
        files = recorded_generations(made_from(context, SFT_SHARDS))
        return to_result(context, check_rows_match_generations(shards(context), files))

    @gate(
        SFT_SHARDS,
        "no_eval_leak",
        "every SFT row is a train-pool problem whose statement (exact or alpha-renamed) is no evaluation statement",
        partitions=partitions,
        reads=[TRAIN_POOL, DECONTAMINATION_KEY],
    )
    def no_eval_leak(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        sets_file = complete_file(context, DECONTAMINATION_KEY, SETS_FILE)
        sets = DecontaminationSets.from_json(json.loads(sets_file.read_text()))
        pool = complete_file(context, TRAIN_POOL, TRAIN_POOL_FILE)
        return to_result(context, check_no_eval_leak(shards(context), pool, sets))

    @gate(
        SFT_SHARDS,
        "counts_reconcile",
        "candidate samples = rows written + rows dropped by each rule",
        partitions=partitions,
    )
    def counts_reconcile(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        folder = shards(context)
        return to_result(context, check_shard_counts(SftShardsResult.read(folder).counts, folder))

    @gate(SFT_SHARDS, "at_least_one_row", "there is something to train on", partitions=partitions)
    def at_least_one_row(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        return to_result(context, check_at_least_one_row(shards(context)))

    return [
        read_back_exact,
        no_eval_leak,
        counts_reconcile,
        at_least_one_row,
        *(
            check
            for run in training_runs(built.training.all_seeds())
            for check in _training_checks(run, partitions)
        ),
    ]


def _training_checks(run: TrainingRun, partitions: dg.PartitionsDefinition | None) -> list:
    """The data-order check of one seed's checkpoint and the parity check of its export."""

    @gate(
        run.checkpoint,
        "data_order",
        "across stops and resumes: each micro-step once, no row more than the run's "
        "`training.epochs` times",
        partitions=partitions,
    )
    def data_order(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        # Only the order log is re-hashed: the checkpoint's weights are the export's to read.
        checkpoint = complete_file(context, run.checkpoint, DATA_ORDER_FILE).parent
        return to_result(context, check_checkpoint_data_order(checkpoint))

    @gate(
        run.export,
        "logprob_parity",
        "the fp32 merge reproduces base + adapter token logprobs, and the cast to the "
        "registered dtype drifts no more than the base model does under the same cast",
        partitions=partitions,
    )
    def logprob_parity(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        # The parity its step measured, in its manifest (the weights are re-hashed by readers).
        return to_result(context, check_export_parity(Path(output_dir(context, run.export))))

    return [data_order, logprob_parity]
