"""The verification steps as whole operations: verdict files, the train pool, reference checks.

A verdicts folder holds `verdicts.jsonl` (the resumable stream), `chunks.jsonl` (every commit
chunk's infrastructure count), `stream.json` (the verifier's identity: pins, budget, policy;
a resume must match it) and, once every generation is judged, `manifest.json`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

from prover_assets.children import FolderBusyError, hold_folder
from prover_assets.records import (
    MANIFEST_NAME,
    Problem,
    Stage,
    Verification,
    iter_records,
    publish_records,
    read_records,
)
from prover_assets.records.outputs import (
    StageResult,
    Step,
    StepInputs,
    StepResult,
    begin_stream,
    verified_outputs,
)
from prover_assets.verify.audit import (
    AUDIT_BUDGET_S,
    AuditStatus,
    audit_statements,
    findings_of,
)
from prover_assets.verify.elaboration import (
    ElaborationCounts,
    ElaborationStatus,
    elaborate_in_rank_order,
    elaborate_references,
)
from prover_assets.verify.runner import (
    CHUNKS_FILE,
    VerificationResult,
    VerifyStats,
    verify_generations,
)
from prover_assets.verify.self_test import batch_header
from prover_assets.verify.validity import verdict_identity
from prover_assets.verify.verifier import StrictVerifier

__all__ = [
    "AUDIT_FILE",
    "ELABORATION_FILE",
    "LEAN_LEASE_DIR",
    "REFERENCE_FILE",
    "TRAIN_POOL_FILE",
    "VERDICTS_FILE",
    "GenerationFailed",
    "GenerationOutcome",
    "ReferenceElaborationResult",
    "SiblingGeneration",
    "StatementAuditResult",
    "TrainPoolResult",
    "lean_workers_lease",
    "materialize_reference_elaboration",
    "materialize_statement_audit",
    "materialize_train_pool",
    "materialize_verdicts",
]

log = logging.getLogger(__name__)

VERDICTS_FILE = "verdicts.jsonl"
TRAIN_POOL_FILE = "train_pool.jsonl"
ELABORATION_FILE = "elaboration.jsonl"
AUDIT_FILE = "audit.jsonl"
REFERENCE_FILE = "reference_elaboration.jsonl"
LEAN_LEASE_DIR = ".lean-workers"
VerifierFactory = Callable[[], contextlib.AbstractContextManager[StrictVerifier]]
R = TypeVar("R", bound=StageResult)
# Refuses a broken instrument (raises), under the batch's header.
SelfTest = Callable[[StrictVerifier, str], None]


class TrainPoolResult(StageResult):
    """The train pool: `pool` statements that elaborate, out of the `checked` candidates."""

    elaboration: ElaborationCounts
    pool: int
    candidates: int
    target: int


class ReferenceElaborationResult(StageResult):
    """An eval set's statements elaborated as `theorem _ref <signature> := by sorry`: how many,
    by status, and whether a simulated verifier judged them (never evidence)."""

    problems: int
    statuses: dict[str, int]
    simulated: bool


class StatementAuditResult(StageResult):
    """The statement audit of an eval set: checks run by status, defects found by kind, and
    whether a simulated verifier ran them (its findings are labelled, never applied)."""

    problems: int
    checks: int
    statuses: dict[str, int]
    found: dict[str, int]  # defect kind -> problems
    simulated: bool


def _identity_record(verifier: StrictVerifier) -> dict[str, Any]:
    """The verifier's identity as a step's config records it (what a resumed stream and a
    reused output must share)."""
    return verdict_identity(verifier.info).model_dump(mode="json")


def _begin_batch(
    folder: Path,
    result_type: type[R],
    statements: tuple[str, Path],
    verifier: StrictVerifier,
    self_test: SelfTest,
    **identity: Any,
) -> StepResult[R] | tuple[Step[R], list[Problem]]:
    """A Lean step over a file of statements (`statements`: its input name and path): its
    output reused when current, else its step begun (the verifier and `identity` pinned) and
    the statements read, the instrument tested under their header."""
    name, path = statements
    config = {**_identity_record(verifier), **identity}
    step = Step(folder, str(folder), result_type, StepInputs.hash({name: path}), config)
    if (reused := step.reused()) is not None:
        return reused
    step.begin_stream()
    problems = read_records(path, Problem)
    self_test(verifier, batch_header(p.header for p in problems))
    return step, problems


def materialize_statement_audit(
    folder: Path,
    *,
    problems_file: Path,
    open_verifier: VerifierFactory,
    self_test: SelfTest,
    progress: Callable[[int, int], None] | None = None,
) -> StepResult[StatementAuditResult]:
    """Every problem of `problems_file` audited by Lean (`verify/audit.py`), resumable."""
    with open_verifier() as verifier:
        budget_s = min(verifier.policy.budget_s, AUDIT_BUDGET_S)
        begun = _begin_batch(
            folder,
            StatementAuditResult,
            ("problems", problems_file),
            verifier,
            self_test,
            budget_s=budget_s,
        )
        if isinstance(begun, StepResult):
            return begun
        step, problems = begun
        with step.journaled():
            runs = audit_statements(
                problems,
                verifier.backend,
                budget_s=budget_s,
                results_path=folder / AUDIT_FILE,
                progress=progress,
            )
        simulated = verifier.info.pins.simulated
    found = Counter(f.kind.value for f in findings_of(runs))
    result = StatementAuditResult(
        problems=len(problems),
        checks=len(runs),
        statuses={s.value: sum(r.status is s for r in runs) for s in AuditStatus},
        found=dict(sorted(found.items())),
        simulated=simulated,
    )
    return step.finish(result, [folder / AUDIT_FILE])


def materialize_reference_elaboration(
    folder: Path, *, problems_file: Path, open_verifier: VerifierFactory, self_test: SelfTest
) -> StepResult[ReferenceElaborationResult]:
    """Every problem of an eval set elaborated as its reference (`verify/elaboration.py`), one
    record each in `REFERENCE_FILE`; reused when current."""
    with open_verifier() as verifier:
        begun = _begin_batch(
            folder, ReferenceElaborationResult, ("problems", problems_file), verifier, self_test
        )
        if isinstance(begun, StepResult):
            return begun
        step, problems = begun
        with step.journaled():
            results = elaborate_references(
                problems, verifier.backend, budget_s=verifier.policy.budget_s
            )
        simulated = verifier.info.pins.simulated
    publish_records(folder / REFERENCE_FILE, results)
    statuses = Counter(r.status.value for r in results)
    result = ReferenceElaborationResult(
        problems=len(problems),
        statuses={status.value: statuses[status.value] for status in ElaborationStatus},
        simulated=simulated,
    )
    return step.finish(result, [folder / REFERENCE_FILE])


def _holds_infrastructure(verdicts: Path) -> bool:
    return any(v.stage is Stage.INFRASTRUCTURE for v in iter_records(verdicts, Verification))


@dataclass(frozen=True)
class _VerdictStream:
    """Where a batch's verdicts stream: its folder, the generations and problems they judge,
    and how many verdicts a commit holds."""

    folder: Path
    generations_file: Path
    problems_file: Path
    commit_every: int


def _verify_into(
    stream: _VerdictStream, verifier: StrictVerifier, self_test: SelfTest, **settings: Any
) -> VerifyStats:
    """Pin the verifier as the stream's identity, refuse a broken instrument, then verify
    (`settings` go to `verify_generations`)."""
    begin_stream(stream.folder, _identity_record(verifier))
    problems = {p.problem_id: p for p in read_records(stream.problems_file, Problem)}
    self_test(verifier, batch_header(p.header for p in problems.values()))
    return verify_generations(
        problems,
        stream.generations_file,
        stream.folder / VERDICTS_FILE,
        verifier,
        commit_every=stream.commit_every,
        **settings,
    )


def materialize_verdicts(
    folder: Path,
    *,
    generations_file: Path,
    problems_file: Path,
    open_verifier: VerifierFactory,
    self_test: SelfTest,
    commit_every: int,
    reverify_stale: bool = False,
    progress: Callable[[VerifyStats], None] | None = None,
    run_id: str | None = None,
    sibling: SiblingGeneration | None = None,
) -> StepResult[VerificationResult]:
    """Verify every generation of a batch (resumable, reused when current); every count in the
    manifest, with `run_id`, the orchestrator's run that completes it. With `sibling`, the
    generations are still being written by their own step: each is judged as it lands, and the
    manifest follows once that step has written them whole."""
    with open_verifier() as verifier:
        identity = _identity_record(verifier)
        stream = _VerdictStream(folder, generations_file, problems_file, commit_every)
        beside, known = None, {}
        if sibling is not None:
            # A complete output is only waited beside: it is judged by its manifest below.
            judge = not (folder / MANIFEST_NAME).exists()
            following = Step(folder, str(folder), VerificationResult, StepInputs({}, {}), identity)
            with following.journaled():
                beside, known["generations"] = _follow(
                    stream, verifier, self_test if judge else None, sibling, progress
                )
        inputs = StepInputs.hash(
            {"generations": generations_file, "problems": problems_file}, known
        )
        step = Step(folder, str(folder), VerificationResult, inputs, identity)
        if (reused := step.reused()) is not None:
            if not _holds_infrastructure(folder / VERDICTS_FILE):
                return reused
            # Complete, but some verdicts are no judgement: resume the stream to verify them.
            (folder / MANIFEST_NAME).unlink()
        with step.journaled():
            stats = _verify_into(
                stream,
                verifier,
                (lambda *_: None) if beside else self_test,  # tested before following
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
            "verified_beside_generation": beside,
        },
    )


@contextlib.contextmanager
def lean_workers_lease(data_root: Path, *, poll_s: float = 5.0) -> Iterator[None]:
    """Hold the experiment's Lean workers: one pool of REPLs at a time under `data_root`
    (released however this process ends), whatever runs them: the `lean` pool orders Dagster's
    steps, this lease also a script or a second code location beside them. Waits for the
    holder, saying so once."""
    told = False
    while True:
        held = contextlib.ExitStack()
        try:
            held.enter_context(hold_folder(data_root / LEAN_LEASE_DIR, wait_s=0))
        except FolderBusyError as busy:
            if not told:
                log.info("waiting for the Lean workers: %s", busy)
                told = True
            time.sleep(poll_s)
            continue
        with held:
            yield
        return


class GenerationOutcome(Enum):
    """Where the generation a verdict step judges as it lands stands: still written, written
    whole, or failed for good (its step will not write more in this run)."""

    RUNNING = "running"
    COMPLETE = "complete"
    FAILED = "failed"


class GenerationFailed(RuntimeError):
    """The generation a verdict step followed failed: the verdicts of what it wrote are kept
    for the resume, and no manifest is written."""


@dataclass(frozen=True)
class SiblingGeneration:
    """A generation its own step writes while this verdict step judges it (the overlapped
    schedule's pair: one writer per folder, both at once). `outcome` asks that step's state."""

    outcome: Callable[[], GenerationOutcome]
    poll_s: float = 5.0


def _follow(
    stream: _VerdictStream,
    verifier: StrictVerifier,
    self_test: SelfTest | None,
    sibling: SiblingGeneration,
    progress: Callable[[VerifyStats], None] | None,
) -> tuple[int, str]:
    """Verify the generations as they are committed (only wait, without `self_test`), until
    their step has ended; returns how many were verified meanwhile and the sha256 of the whole
    file, re-hashed against its step's manifest. Raises GenerationFailed if that step failed."""
    ended = threading.Event()
    outcome: list[GenerationOutcome | Exception] = []

    def watch() -> None:
        try:
            while not ended.is_set():
                if (state := sibling.outcome()) is not GenerationOutcome.RUNNING:
                    outcome.append(state)
                    ended.set()
                ended.wait(sibling.poll_s)
        except Exception as exc:  # raised in the step's thread below, never lost
            outcome.append(exc)
            ended.set()

    watcher = threading.Thread(target=watch, name="generation-watch", daemon=True)
    watcher.start()
    verified = 0
    try:
        if self_test is None:
            ended.wait()
        else:
            stats = _verify_into(stream, verifier, self_test, follow=ended, progress=progress)
            verified = stats.verified_now
    finally:
        ended.set()
        watcher.join()
    if isinstance(state := outcome[0], Exception):
        raise state
    if state is GenerationOutcome.FAILED:
        raise GenerationFailed(
            f"the generation {stream.generations_file} failed; the {verified} "
            f"verdicts made beside it are kept in {stream.folder} for the resume"
        )
    generations = stream.generations_file
    (sha256,) = verified_outputs(generations.parent, [generations.name]).values()
    return verified, sha256


def materialize_train_pool(
    folder: Path,
    *,
    candidates_file: Path,
    size: int,
    open_verifier: VerifierFactory,
    self_test: SelfTest,
    progress: Callable[[ElaborationCounts], None] | None = None,
) -> StepResult[TrainPoolResult]:
    """The first `size` candidates, in rank order, whose statements elaborate."""
    with open_verifier() as verifier:
        begun = _begin_batch(
            folder, TrainPoolResult, ("candidates", candidates_file), verifier, self_test, size=size
        )
        if isinstance(begun, StepResult):
            return begun
        step, candidates = begun
        with step.journaled():
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
