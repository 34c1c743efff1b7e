"""The verification steps as whole operations: verdict files, the train pool, reference checks.

A verdicts folder holds `verdicts.jsonl` (the resumable stream), `chunks.jsonl` (every commit
chunk's infrastructure count), `stream.json` (the verifier's identity: pins, budget, policy;
a resume must match it) and, once every generation is judged, `manifest.json`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from pathlib import Path

from prover_assets.records import (
    MANIFEST_NAME,
    Problem,
    Stage,
    Verification,
    iter_records,
    publish_records,
    read_records,
)
from prover_assets.records.outputs import StageResult, Step, StepInputs, StepResult
from prover_assets.verify.elaboration import ElaborationCounts, elaborate_in_rank_order
from prover_assets.verify.runner import (
    CHUNKS_FILE,
    VerificationResult,
    VerifyStats,
    verify_generations,
)
from prover_assets.verify.validity import verdict_identity
from prover_assets.verify.verifier import StrictVerifier

__all__ = [
    "ELABORATION_FILE",
    "TRAIN_POOL_FILE",
    "VERDICTS_FILE",
    "TrainPoolResult",
    "materialize_train_pool",
    "materialize_verdicts",
]

log = logging.getLogger(__name__)

VERDICTS_FILE = "verdicts.jsonl"
TRAIN_POOL_FILE = "train_pool.jsonl"
ELABORATION_FILE = "elaboration.jsonl"
VerifierFactory = Callable[[], contextlib.AbstractContextManager[StrictVerifier]]


class TrainPoolResult(StageResult):
    """The train pool: `pool` statements that elaborate, out of the `checked` candidates."""

    elaboration: ElaborationCounts
    pool: int
    candidates: int
    target: int


def _holds_infrastructure(verdicts: Path) -> bool:
    return any(v.stage is Stage.INFRASTRUCTURE for v in iter_records(verdicts, Verification))


def materialize_verdicts(
    folder: Path,
    *,
    generations_file: Path,
    problems_file: Path,
    open_verifier: VerifierFactory,
    self_test: Callable[[StrictVerifier], None],
    commit_every: int,
    reverify_stale: bool = False,
    progress: Callable[[VerifyStats], None] | None = None,
    run_id: str | None = None,
) -> StepResult[VerificationResult]:
    """Verify every generation of a batch (resumable, reused when current); every count in the
    manifest, with `run_id`, the orchestrator's run that completes it."""
    inputs = StepInputs.hash({"generations": generations_file, "problems": problems_file})
    with open_verifier() as verifier:
        step = Step(
            folder, str(folder), VerificationResult, inputs, verdict_identity(verifier.info)
        )
        if (reused := step.reused()) is not None:
            if not _holds_infrastructure(folder / VERDICTS_FILE):
                return reused
            # Complete, but some verdicts are no judgement: resume the stream to verify them.
            (folder / MANIFEST_NAME).unlink()
        step.begin_stream()
        self_test(verifier)
        problems = {p.problem_id: p for p in read_records(problems_file, Problem)}
        stats = verify_generations(
            problems,
            generations_file,
            folder / VERDICTS_FILE,
            verifier,
            commit_every=commit_every,
            reverify_stale=reverify_stale,
            progress=progress,
        )
        info = verifier.info
    return step.finish(
        stats.to_result(),
        [folder / VERDICTS_FILE, folder / CHUNKS_FILE],
        extra={
            "verifier": info.model_dump(mode="json"),
            "reverify_stale": reverify_stale,
            "run_id": run_id,
        },
    )


def materialize_train_pool(
    folder: Path,
    *,
    candidates_file: Path,
    size: int,
    open_verifier: VerifierFactory,
    self_test: Callable[[StrictVerifier], None],
    progress: Callable[[ElaborationCounts], None] | None = None,
) -> StepResult[TrainPoolResult]:
    """The first `size` candidates, in rank order, whose statements elaborate."""
    inputs = StepInputs.hash({"candidates": candidates_file})
    with open_verifier() as verifier:
        identity = {**verdict_identity(verifier.info), "size": size}
        step = Step(folder, str(folder), TrainPoolResult, inputs, identity)
        if (reused := step.reused()) is not None:
            return reused
        step.begin_stream()
        self_test(verifier)
        candidates = read_records(candidates_file, Problem)
        result = elaborate_in_rank_order(
            candidates,
            verifier.backend,
            target=size,
            budget_s=verifier.policy.budget_s,
            results_path=folder / ELABORATION_FILE,
            progress=progress,
        )
    publish_records(folder / TRAIN_POOL_FILE, result.pool)
    counts = TrainPoolResult(
        elaboration=result.counts, pool=len(result.pool), candidates=len(candidates), target=size
    )
    return step.finish(counts, [folder / TRAIN_POOL_FILE, folder / ELABORATION_FILE])
