"""The validity conditions of a comparison, judged by the report itself from the files it reads.

The pre-registration calls a run pair with any failed validity condition invalid, not
negative. Each condition here is the very function the blocking check of the same name calls
(one rule, one place), applied to the files the comparison is made of, so the verdict does not
depend on which checks ran in which run: a failure makes the comparison INVALID.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from prover_assets.generation.validity import check_design_match, check_samples_per_problem
from prover_assets.problems.decontamination import DecontaminationSets
from prover_assets.problems.stages import EvalSetResult
from prover_assets.problems.validity import (
    check_counts_reconcile,
    check_goedel_normalisation,
    check_ids_unique,
    check_statements_parse,
)
from prover_assets.records import Problem, read_manifest, read_records
from prover_assets.records.hashing import sha256_file
from prover_assets.records.manifest import recorded_path
from prover_assets.records.validity import CheckOutcome
from prover_assets.report.analysis import INVALID
from prover_assets.report.runs import RunFiles
from prover_assets.report.summary import Condition, JudgedFile
from prover_assets.sft.stages import SftShardsResult
from prover_assets.sft.trainer import DATA_ORDER_FILE
from prover_assets.sft.validity import (
    check_at_least_one_row,
    check_checkpoint_data_order,
    check_export_parity,
    check_no_eval_leak,
    check_rows_match_generations,
    check_shard_counts,
)
from prover_assets.verify.runner import CHUNKS_FILE
from prover_assets.verify.validity import (
    check_chunks,
    check_infrastructure_within_bound,
    check_no_length_capped_accepted,
    check_verdicts_cover_generations,
    check_verifier_identical,
)

__all__ = [
    "INVALID",
    "TrainingFiles",
    "ValiditySettings",
    "failed_conditions",
    "judge_comparison",
]


@dataclass(frozen=True)
class TrainingFiles:
    """The SFT outputs the candidate was trained and exported from (the registered seed's)."""

    shards: Path
    pool_generations: tuple[Path, ...]
    pool: Path
    decontamination_sets: Path
    checkpoint: Path
    export: Path


@dataclass(frozen=True)
class ValiditySettings:
    """What the conditions are judged against: the run's samples per problem and the
    infrastructure bound."""

    samples_per_problem: int
    max_infrastructure_share: float


def _judge(
    name: str, subject: str, files: Sequence[Path], judge: Callable[[], CheckOutcome]
) -> Condition:
    """`judge` run as condition `name` on `subject`; a file it cannot read fails it (never
    skips it), naming the error."""
    try:
        outcome = judge()
    except (OSError, ValueError, KeyError) as exc:
        outcome = CheckOutcome(False, f"could not be judged: {type(exc).__name__}: {exc}")
    judged = tuple(
        JudgedFile(path=str(p), sha256=sha256_file(p) if p.is_file() else "missing") for p in files
    )
    return Condition(
        name=name, subject=subject, held=outcome.passed, found=outcome.description, files=judged
    )


def _eval_set(problems: Path, eval_set: str) -> list[Condition]:
    source = recorded_path(problems.parent, read_manifest(problems.parent)["inputs"][0]["path"])
    subject = f"eval set {eval_set}"
    return [
        _judge(
            "counts_reconcile",
            subject,
            [problems.parent / "manifest.json"],
            lambda: check_counts_reconcile(EvalSetResult.read(problems.parent)),
        ),
        _judge("ids_unique", subject, [problems], lambda: check_ids_unique(problems)),
        _judge("statements_parse", subject, [problems], lambda: check_statements_parse(problems)),
        _judge(
            "goedel_normalisation",
            subject,
            [source, problems],
            lambda: check_goedel_normalisation(source, problems),
        ),
    ]


def _run(run: RunFiles, settings: ValiditySettings) -> list[Condition]:
    subject = f"{run.system} on {run.eval_set} cap {run.cap}"
    generations, verdicts = run.generations, run.verdicts
    chunks = verdicts.parent / CHUNKS_FILE

    def samples() -> CheckOutcome:
        ids = [p.problem_id for p in read_records(run.problems, Problem)]
        return check_samples_per_problem(generations, ids, settings.samples_per_problem)

    def infrastructure() -> CheckOutcome:
        bound = settings.max_infrastructure_share
        return check_infrastructure_within_bound(generations, verdicts, bound)

    return [
        _judge("samples_per_problem", subject, [run.problems, generations], samples),
        _judge(
            "verdicts_cover_generations",
            subject,
            [generations, verdicts],
            lambda: check_verdicts_cover_generations(generations, verdicts),
        ),
        _judge(
            "no_length_capped_accepted",
            subject,
            [generations, verdicts],
            lambda: check_no_length_capped_accepted(generations, verdicts),
        ),
        _judge("no_chunk_half_dead", subject, [chunks], lambda: check_chunks(chunks)),
        _judge("infrastructure_within_bound", subject, [generations, verdicts], infrastructure),
    ]


def _training(files: TrainingFiles) -> list[Condition]:
    shards = files.shards
    shards_manifest = shards / "manifest.json"

    def no_eval_leak() -> CheckOutcome:
        sets = DecontaminationSets.from_json(json.loads(files.decontamination_sets.read_text()))
        return check_no_eval_leak(shards, files.pool, sets)

    return [
        _judge(
            "read_back_exact",
            "SFT shards",
            [shards_manifest, *files.pool_generations],
            lambda: check_rows_match_generations(shards, files.pool_generations),
        ),
        _judge(
            "no_eval_leak",
            "SFT shards",
            [shards_manifest, files.pool, files.decontamination_sets],
            no_eval_leak,
        ),
        _judge(
            "counts_reconcile",
            "SFT shards",
            [shards_manifest],
            lambda: check_shard_counts(SftShardsResult.read(shards).counts, shards),
        ),
        _judge(
            "at_least_one_row",
            "SFT shards",
            [shards_manifest],
            lambda: check_at_least_one_row(shards),
        ),
        _judge(
            "data_order",
            "SFT checkpoint",
            [files.checkpoint / DATA_ORDER_FILE, files.checkpoint / "manifest.json"],
            lambda: check_checkpoint_data_order(files.checkpoint),
        ),
        _judge(
            "logprob_parity",
            "exported model",
            [files.export / "manifest.json"],
            lambda: check_export_parity(files.export),
        ),
    ]


def judge_comparison(
    baseline: RunFiles,
    candidate: RunFiles,
    training: TrainingFiles | None,
    settings: ValiditySettings,
) -> list[Condition]:
    """Every validity condition of comparing `candidate` with `baseline`: the eval set's
    integrity, each run's samples and verdicts, the pair's verifier and design, and the SFT
    outputs the candidate came from (`training`; None for a candidate not trained here)."""
    pair = f"{candidate.system} against {baseline.system} on {baseline.eval_set} cap {baseline.cap}"
    conditions = _eval_set(baseline.problems, baseline.eval_set)
    conditions += _run(baseline, settings) + _run(candidate, settings)
    conditions += [
        _judge(
            "verifier_identical",
            pair,
            [baseline.verdicts, candidate.verdicts],
            lambda: check_verifier_identical([baseline.verdicts, candidate.verdicts]),
        ),
        _judge(
            "design_match",
            pair,
            [baseline.generations, candidate.generations],
            lambda: check_design_match(baseline.generations, candidate.generations),
        ),
    ]
    return conditions + (_training(training) if training is not None else [])


def failed_conditions(conditions: Sequence[Condition]) -> list[str]:
    """Each failed condition in words: `data_order (SFT checkpoint): 1 repeated ...`."""
    return [f"{c.name} ({c.subject}): {c.found}" for c in conditions if not c.held]
