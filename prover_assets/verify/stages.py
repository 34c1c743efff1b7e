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
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

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
)
from prover_assets.verify.audit import (
    AUDIT_BUDGET_S,
    AuditStatus,
    audit_statements,
    findings_of,
)
from prover_assets.verify.elaboration import ElaborationCounts, elaborate_in_rank_order
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
    "TRAIN_POOL_FILE",
    "VERDICTS_FILE",
    "LeanWorkersBusy",
    "StatementAuditResult",
    "StreamedVerdicts",
    "TrainPoolResult",
    "lean_workers_lease",
    "lean_workers_wanted",
    "materialize_statement_audit",
    "materialize_train_pool",
    "materialize_verdicts",
    "stream_verdicts",
    "verdicts_alongside",
]

log = logging.getLogger(__name__)

VERDICTS_FILE = "verdicts.jsonl"
TRAIN_POOL_FILE = "train_pool.jsonl"
ELABORATION_FILE = "elaboration.jsonl"
AUDIT_FILE = "audit.jsonl"
LEAN_LEASE_DIR = ".lean-workers"
LEAN_WANTED_DIR = ".lean-workers-wanted"
_FOREVER = float("inf")
VerifierFactory = Callable[[], contextlib.AbstractContextManager[StrictVerifier]]
# Refuses a broken instrument (raises), under the batch's header.
SelfTest = Callable[[StrictVerifier, str], None]


class TrainPoolResult(StageResult):
    """The train pool: `pool` statements that elaborate, out of the `checked` candidates."""

    elaboration: ElaborationCounts
    pool: int
    candidates: int
    target: int


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


def materialize_statement_audit(
    folder: Path,
    *,
    problems_file: Path,
    open_verifier: VerifierFactory,
    self_test: SelfTest,
    progress: Callable[[int, int], None] | None = None,
) -> StepResult[StatementAuditResult]:
    """Every problem of `problems_file` audited by Lean (`verify/audit.py`), resumable."""
    inputs = StepInputs.hash({"problems": problems_file})
    with open_verifier() as verifier:
        budget_s = min(verifier.policy.budget_s, AUDIT_BUDGET_S)
        identity = {**_identity_record(verifier), "budget_s": budget_s}
        step = Step(folder, str(folder), StatementAuditResult, inputs, identity)
        if (reused := step.reused()) is not None:
            return reused
        step.begin_stream()
        problems = read_records(problems_file, Problem)
        self_test(verifier, batch_header(p.header for p in problems))
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
) -> StepResult[VerificationResult]:
    """Verify every generation of a batch (resumable, reused when current); every count in the
    manifest, with `run_id`, the orchestrator's run that completes it."""
    inputs = StepInputs.hash({"generations": generations_file, "problems": problems_file})
    with open_verifier() as verifier:
        step = Step(folder, str(folder), VerificationResult, inputs, _identity_record(verifier))
        if (reused := step.reused()) is not None:
            if not _holds_infrastructure(folder / VERDICTS_FILE):
                return reused
            # Complete, but some verdicts are no judgement: resume the stream to verify them.
            (folder / MANIFEST_NAME).unlink()
        stream = _VerdictStream(folder, generations_file, problems_file, commit_every)
        with step.journaled():
            stats = _verify_into(
                stream, verifier, self_test, reverify_stale=reverify_stale, progress=progress
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


@contextlib.contextmanager
def lean_workers_lease(
    data_root: Path, *, give_up: threading.Event | None = None, poll_s: float = 5.0
) -> Iterator[None]:
    """Hold the experiment's Lean workers: one pool of REPLs at a time under `data_root`
    (released however this process ends), so that verification beside generation never doubles
    the workers a machine is sized for. Waits for the holder, saying so (`lean_workers_wanted`:
    verification beside a generation then hands the workers over); with `give_up`, it is such a
    verification itself: it stops waiting once `give_up` is set and raises LeanWorkersBusy."""
    with contextlib.ExitStack() as wanting:
        told = False
        while True:
            held = contextlib.ExitStack()
            try:
                held.enter_context(hold_folder(data_root / LEAN_LEASE_DIR, wait_s=0))
            except FolderBusyError as busy:
                if give_up is not None and give_up.is_set():
                    raise LeanWorkersBusy(str(busy)) from None
                if give_up is None and not told:
                    log.info("waiting for the Lean workers: %s", busy)
                    wanting.enter_context(hold_folder(data_root / LEAN_WANTED_DIR, wait_s=_FOREVER))
                told = True
                (give_up.wait if give_up is not None else time.sleep)(poll_s)
                continue
            wanting.close()  # got them: no longer waiting
            with held:
                yield
            return


def lean_workers_wanted(data_root: Path) -> bool:
    """Whether a step is waiting for the Lean workers (a verdict step, whose stage's downstream
    waits on it): verification beside a generation gives them up for it."""
    try:
        with hold_folder(data_root / LEAN_WANTED_DIR, wait_s=0):
            return False
    except FolderBusyError:
        return True


class LeanWorkersBusy(RuntimeError):
    """Another step held the Lean workers for as long as this one was willing to wait."""


class StreamedVerdicts(BaseModel):
    """What verification beside a generation step did: verdicts committed to the verdict
    asset's stream before the generation ended (its own step verifies the rest)."""

    model_config = ConfigDict(extra="forbid")

    verified: int = 0
    accepted: int = 0
    cached: int = 0
    waited_for_lean_s: float = 0.0
    handovers: int = 0  # times the Lean workers were handed to a verdict step that waited
    skipped: str | None = None  # why nothing was verified: a complete output, busy workers
    error: str | None = None  # a failure; the verdict step meets it again and reports it


def stream_verdicts(
    folder: Path,
    *,
    generations_file: Path,
    problems_file: Path,
    open_verifier: VerifierFactory,
    self_test: SelfTest,
    commit_every: int,
    until: threading.Event,
    wanted: Callable[[], bool] = lambda: False,
    poll_s: float = 5.0,
) -> StreamedVerdicts:
    """Verify a generation stream while it grows, into the verdict stream of `folder`, until
    `until` is set: the committed proofs are judged while the GPU still samples. When another
    step waits for the Lean workers (`wanted`: a verdict step, whose stage's downstream waits on
    it), the proofs still waiting are left, the running ones finish, the workers are handed over,
    and verification resumes once they are free again. Resumable like `materialize_verdicts`
    (the same stream, the same identity); it writes no manifest."""
    if (folder / MANIFEST_NAME).exists():
        return StreamedVerdicts(skipped="the verdicts are complete already")
    stream = _VerdictStream(folder, generations_file, problems_file, commit_every)
    done = StreamedVerdicts()
    while not until.is_set():
        if wanted():
            until.wait(poll_s)
            continue
        asked = time.monotonic()
        pause = _paused_by(until, wanted, poll_s)
        try:
            with open_verifier() as verifier:
                done.waited_for_lean_s += time.monotonic() - asked
                stats = _verify_into(stream, verifier, self_test, follow=pause)
        except LeanWorkersBusy as busy:
            done.waited_for_lean_s += time.monotonic() - asked
            if not done.verified:
                done.skipped = f"the Lean workers were busy while the generation ran ({busy})"
            break
        finally:
            pause.set()
        done.verified += stats.verified_now
        done.accepted += stats.accepted_now
        done.cached += stats.cached_now
        done.handovers += not until.is_set()
    return done


def _paused_by(
    until: threading.Event, wanted: Callable[[], bool], poll_s: float
) -> threading.Event:
    """An event set once `until` is set or another step wants the Lean workers."""
    pause = threading.Event()

    def watch() -> None:
        while not pause.is_set():
            if until.wait(poll_s) or wanted():
                pause.set()

    threading.Thread(target=watch, name="lean-handover", daemon=True).start()
    return pause


@contextlib.contextmanager
def verdicts_alongside(
    stream: Callable[[threading.Event], StreamedVerdicts],
) -> Iterator[StreamedVerdicts]:
    """Run `stream` (a `stream_verdicts` bound to its step) in a thread while the block
    generates; at the block's end it stops taking proofs and its running proofs finish. What it
    did is in the yielded record once the block is over; its failure is recorded, not raised:
    the generation is this step's product, and the verdict step meets the same failure."""
    until = threading.Event()
    outcome = StreamedVerdicts()

    def run() -> None:
        try:
            done = stream(until)
            for name in StreamedVerdicts.model_fields:
                setattr(outcome, name, getattr(done, name))
        except Exception as exc:  # recorded for the step's metadata, and logged
            log.warning("verification beside generation stopped: %s", exc, exc_info=True)
            outcome.error = f"{type(exc).__name__}: {exc}"

    thread = threading.Thread(target=run, name="verdicts-alongside", daemon=True)
    thread.start()
    try:
        yield outcome
    finally:
        until.set()
        thread.join()


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
    inputs = StepInputs.hash({"candidates": candidates_file})
    with open_verifier() as verifier:
        identity = {**_identity_record(verifier), "size": size}
        step = Step(folder, str(folder), TrainPoolResult, inputs, identity)
        if (reused := step.reused()) is not None:
            return reused
        step.begin_stream()
        candidates = read_records(candidates_file, Problem)
        self_test(verifier, batch_header(c.header for c in candidates))
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
