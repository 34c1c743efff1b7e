"""Validity checks of the SFT shards, as plain functions over the files."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from prover_assets.config import TrainingSpec
from prover_assets.problems.decontamination import DecontaminationSets
from prover_assets.records import (
    MANIFEST_NAME,
    Generation,
    Problem,
    iter_records,
    read_manifest,
    read_records,
)
from prover_assets.records.validity import CheckOutcome
from prover_assets.sft.builder import SftCounts
from prover_assets.sft.export import ExportResult
from prover_assets.sft.shards import IGNORE_INDEX, SftDataset, pack
from prover_assets.sft.stages import TrainingResult
from prover_assets.sft.trainer import DATA_ORDER_FILE

__all__ = [
    "check_at_least_one_row",
    "check_checkpoint_data_order",
    "check_data_order",
    "check_export_parity",
    "check_no_eval_leak",
    "check_rows_match_generations",
    "check_shard_counts",
]


def check_rows_match_generations(
    shards_dir: Path, generation_files: Sequence[Path]
) -> CheckOutcome:
    """Every row, through the trainer's collate, is its generation's prompt (no loss) and
    completion (the loss tokens), token for token."""
    dataset = SftDataset(shards_dir)
    wanted = {
        (e.problem_id, e.sample_idx, e.round, e.cap_tokens): i for i, e in enumerate(dataset.index)
    }
    matched, problems = 0, []
    for path in generation_files:
        for generation in iter_records(path, Generation):
            i = wanted.pop(generation.key, None)
            if i is None:
                continue
            batch = pack(dataset, [i])
            loss = batch.labels != IGNORE_INDEX
            prompt_len = len(generation.prompt_ids)
            if (
                not np.array_equal(batch.input_ids[:prompt_len], generation.prompt_ids)
                or loss[:prompt_len].any()
                or not np.array_equal(batch.labels[loss], generation.completion_ids)
            ):
                problems.append(list(generation.key))
            else:
                matched += 1
    problems += [list(key) for key in wanted]  # rows without a generation
    return CheckOutcome(
        not problems,
        f"{matched} of {len(dataset)} rows match their generation exactly",
        {"mismatched_or_unknown": problems[:20]},
    )


def check_no_eval_leak(
    shards_dir: Path, pool_file: Path, sets: DecontaminationSets
) -> CheckOutcome:
    """Every SFT row is a train-pool problem whose statement is no evaluation statement."""
    pool = {p.problem_id: p for p in read_records(pool_file, Problem)}
    rows = {e.problem_id for e in SftDataset(shards_dir).index}
    outside = sorted(rows - set(pool))
    leaked = sorted(
        pid
        for pid in rows & set(pool)
        if pool[pid].statement_sha in sets.statement_shas or pool[pid].alpha_sha in sets.alpha_shas
    )
    return CheckOutcome(
        not outside and not leaked,
        f"{len(leaked)} training problems share a statement with an evaluation set, "
        f"{len(outside)} are outside the pool",
        {"leaked": leaked[:20], "outside": outside[:20]},
    )


def check_shard_counts(counts: SftCounts, shards_dir: Path) -> CheckOutcome:
    """candidates = written + every drop, and the index holds exactly `written` rows."""
    drops = sum(counts.drops.values())
    rows = len(SftDataset(shards_dir))
    passed = counts.reconciles() and rows == counts.written
    return CheckOutcome(
        passed,
        f"{counts.candidates} candidates = {counts.written} written + {drops} "
        f"dropped; {rows} rows on disk",
        {"rows": rows, "dropped": drops},
    )


def check_at_least_one_row(shards_dir: Path) -> CheckOutcome:
    """The shards hold at least one row."""
    rows = len(SftDataset(shards_dir))
    return CheckOutcome(rows > 0, f"{rows} training rows", {"rows": rows})


def check_data_order(order_log: Path, *, micro_steps: int, rows: int, epochs: int) -> CheckOutcome:
    """Across stops and resumes, each micro-step ran exactly once and no row was seen more
    than `epochs` times."""
    import json
    from collections import Counter

    entries = [json.loads(line) for line in order_log.read_text().splitlines()]
    steps = Counter(entry["micro_step"] for entry in entries)
    repeated = sorted(step for step, n in steps.items() if n > 1)
    missing = sorted(set(range(micro_steps)) - set(steps))
    seen = Counter(row for entry in entries for row in entry["rows"])
    overseen = sorted(row for row, n in seen.items() if n > epochs)
    return CheckOutcome(
        not repeated and not missing and not overseen,
        f"{len(steps)} of {micro_steps} micro-steps ran; {len(repeated)} repeated, {len(missing)} missing; "
        f"{len(overseen)} rows seen more than {epochs} times",
        {
            "repeated": repeated[:20],
            "missing": missing[:20],
            "overseen": overseen[:20],
            "rows": rows,
        },
    )


def check_checkpoint_data_order(checkpoint_dir: Path) -> CheckOutcome:
    """`check_data_order` of a checkpoint, judged by the counts and the training settings of the
    run that made it, as its manifest records them (not the config the graph was built from)."""
    manifest = read_manifest(checkpoint_dir)
    counts = TrainingResult.of(manifest, checkpoint_dir / MANIFEST_NAME)
    training = TrainingSpec.model_validate(manifest["config"]["training"])
    return check_data_order(
        checkpoint_dir / DATA_ORDER_FILE,
        micro_steps=counts.trained_micro_steps(training.gradient_accumulation),
        rows=counts.rows,
        epochs=training.epochs,
    )


def check_export_parity(export_dir: Path) -> CheckOutcome:
    """The export's parity as its step measured it: the fp32 merge reproduces base + adapter,
    and the cast drifts no more than the base's under the same cast."""
    counts = ExportResult.read(export_dir)
    return CheckOutcome(
        counts.parity_passed,
        "; ".join(counts.parity_failures()) or counts.describe(),
        {
            "merge_max_abs_diff": counts.merge_max_abs_diff,
            "cast_drift": counts.cast_drift,
            "base_cast_drift": counts.base_cast_drift,
        },
    )
