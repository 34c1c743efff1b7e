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
    now_utc,
    publish_records,
    read_records,
    sha256_file,
)
from prover_assets.records.outputs import (
    StepResult,
    begin_stream,
    finish_output,
    reused_output,
)
from prover_assets.verify.elaboration import elaborate_in_rank_order
from prover_assets.verify.runner import CHUNKS_FILE, VerifyStats, verify_generations
from prover_assets.verify.validity import verdict_identity
from prover_assets.verify.verifier import StrictVerifier

__all__ = [
    "ELABORATION_FILE",
    "TRAIN_POOL_FILE",
    "VERDICTS_FILE",
    "materialize_train_pool",
    "materialize_verdicts",
]

log = logging.getLogger(__name__)

VERDICTS_FILE = "verdicts.jsonl"
TRAIN_POOL_FILE = "train_pool.jsonl"
ELABORATION_FILE = "elaboration.jsonl"
VerifierFactory = Callable[[], contextlib.AbstractContextManager[StrictVerifier]]


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
) -> StepResult:
    """Verify every generation of a batch (resumable, reused when current); every count in the
    manifest."""
    digests = {"generations": sha256_file(generations_file), "problems": sha256_file(problems_file)}
    with open_verifier() as verifier:
        identity = verdict_identity(verifier.info)
        if (reused := reused_output(folder, inputs=digests, config=identity)) is not None:
            if not _holds_infrastructure(folder / VERDICTS_FILE):
                return reused
            # Complete, but some verdicts are no judgement: resume the stream to verify them.
            (folder / MANIFEST_NAME).unlink()
        begin_stream(folder, identity)
        self_test(verifier)
        started = now_utc()
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
    counts = stats.to_json()
    return finish_output(
        folder,
        asset=str(folder),
        inputs=[generations_file, problems_file],
        outputs=[folder / VERDICTS_FILE, folder / CHUNKS_FILE],
        config=identity,
        counts=counts,
        started_at=started,
        extra={
            "input_digests": digests,
            "verifier": info.model_dump(mode="json"),
            "reverify_stale": reverify_stale,
        },
    )


def materialize_train_pool(
    folder: Path,
    *,
    candidates_file: Path,
    size: int,
    open_verifier: VerifierFactory,
    self_test: Callable[[StrictVerifier], None],
    progress: Callable[[dict[str, int]], None] | None = None,
) -> StepResult:
    """The first `size` candidates, in rank order, whose statements elaborate."""
    digests = {"candidates": sha256_file(candidates_file)}
    with open_verifier() as verifier:
        identity = {**verdict_identity(verifier.info), "size": size}
        if (reused := reused_output(folder, inputs=digests, config=identity)) is not None:
            return reused
        begin_stream(folder, identity)
        self_test(verifier)
        started = now_utc()
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
    counts = {**result.counts, "candidates": len(candidates), "target": size}
    return finish_output(
        folder,
        asset=str(folder),
        inputs=[candidates_file],
        outputs=[folder / TRAIN_POOL_FILE, folder / ELABORATION_FILE],
        config=identity,
        counts=counts,
        started_at=started,
        extra={"input_digests": digests},
    )
