"""The strict verifier: (problem, generation) -> verdict, in the order of design section 4.

1. `no_code` without Lean: no extractable block, a length-capped completion, or no room;
2. the static gate on the displayed code (and the displayed statement against the problem's)
   and on the bytes Lean will get, refusing every reading the two disagree on;
3. Goedel's re-insertion of the problem's own statement, then the compile view;
4. the REPL, against the header env, under the wall budget: errors, sorries, sorry warnings;
5. `#print axioms _root_.<theorem>` in the proof's env, its one answer read in Lean's exact
   shape: only propext, Classical.choice, Quot.sound accept;
6. the statement check in the proof's env: the root theorem's type is the trusted statement
   elaborated afresh (`statement_changed` otherwise), as kernel-replay checkers do.
An infrastructure failure is recorded as such, never as a judgement of the proof.

Nothing is verified twice: within a batch, samples with the same code for the same statement
share one Lean run; across batches, assets and runs a `VerdictCache` answers what this verifier
(same pins, same config) already judged finally. Every copy points at the verdict it copies
(`cached_from`). A `timeout` is re-run once after the batch on a mostly idle pool (at most
`recheck_share` of the workers busy: a proof near the budget can fail on a loaded host), and
the verdict records both attempts; accepted on the re-check is accepted.
"""

from __future__ import annotations

import functools
import hashlib
import queue
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from prover_assets.lean.extract import ReinsertionError, displayed_theorem, lean_input
from prover_assets.lean.gate import STATEMENT_REASONS, static_check
from prover_assets.lean.protocol import STANDARD_AXIOMS
from prover_assets.lean.repl import ReplOutcome
from prover_assets.lean.statements import parse_statement, statement_check_command
from prover_assets.records import (
    Generation,
    Problem,
    SampleKey,
    Stage,
    Verification,
    VerifierInfo,
    code_sha256,
    reason_kind,
)
from prover_assets.records.models import AttemptOutcome, TimeoutRecheck
from prover_assets.verify.backends import LeanBackend
from prover_assets.verify.cache import VerdictCache, cache_key, copy_for
from prover_assets.verify.history import CostHistory
from prover_assets.verify.pool import JobQueue
from prover_assets.verify.worker import FORGED_OUTPUT, LeanJob, LeanResult

__all__ = ["RULES_MODULES", "StrictVerifier", "VerifierPolicy", "rules_sha256"]

# The modules whose code decides a verdict, and the gate's data files: a change to any of them is
# another verifier, so its digest is in every verdict's config (the verdict cache's key, the
# compared identity).
RULES_MODULES = (
    "lean/lexer.py",
    "lean/words.py",
    "lean/statements.py",
    "lean/signature.py",
    "lean/statement_identity.py",
    "lean/extract.py",
    "lean/gate.py",
    "lean/gate_data.py",
    "lean/proof_block.py",
    "lean/config_values.py",
    "data/gate/mathlib_runners.jsonl",
    "data/gate/allowed_options.jsonl",
    "data/gate/mathlib_commands.jsonl",
    "lean/protocol.py",
    "lean/repl.py",
    "lean/containment.py",
    "lean/canary.py",
    "verify/worker.py",
    "verify/verifier.py",
)


@functools.cache
def rules_sha256() -> str:
    """sha256 over the sources of `RULES_MODULES`, each named, in order."""
    package = Path(__file__).parents[1]
    digest = hashlib.sha256()
    for module in RULES_MODULES:
        digest.update(module.encode() + b"\0" + (package / module).read_bytes() + b"\0")
    return digest.hexdigest()


@dataclass(frozen=True)
class JudgedSample:
    """What a verdict needs of its sample once the job is made: the key and the code. A queued
    run keeps this, not the generation, whose token ids (up to the cap, twice) would otherwise
    stay in memory for every sample waiting for Lean."""

    problem_id: str
    sample_idx: int
    round: int
    cap_tokens: int
    lean_code: str | None

    @classmethod
    def of(cls, generation: Generation) -> JudgedSample:
        return cls(
            generation.problem_id,
            generation.sample_idx,
            generation.round,
            generation.cap_tokens,
            generation.lean_code,
        )

    @property
    def key(self) -> SampleKey:
        return SampleKey(self.problem_id, self.sample_idx, self.round, self.cap_tokens)


@dataclass
class _Run:
    """One Lean run of a batch: its cache key, the trusted statement, the job, and the samples
    (same code, same statement) it judges, the first one measured."""

    key: str
    statement: str
    job: LeanJob
    samples: list[JudgedSample]


@dataclass
class _Batch:
    """The runs of one `verify_stream`, shared by the thread that admits samples and the one
    that settles verdicts: by cache key (queued or running, and settled) and by job key."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    runs: dict[str, _Run] = field(default_factory=dict)
    running: dict[tuple, _Run] = field(default_factory=dict)
    settled: dict[str, Verification] = field(default_factory=dict)
    pushed: int = 0  # Lean jobs fed, re-checks included: each answers once unless dropped


def _with_both_attempts(before: Verification, after: Verification) -> Verification:
    """The re-check's verdict, recording the timeout before it."""
    recheck = TimeoutRecheck(
        first=AttemptOutcome(stage=before.stage, verify_s=before.verify_s),
        second=AttemptOutcome(stage=after.stage, verify_s=after.verify_s),
    )
    diagnostics = after.diagnostics.model_copy(update={"timeout_recheck": recheck})
    return after.model_copy(update={"diagnostics": diagnostics})


_LEAN_DONE = object()
_FED = object()


def _incomplete_reasons(outcome: ReplOutcome) -> list[str]:
    """Why a proof without errors is incomplete: a sorry, a sorry warning, a failed warning."""
    reasons = []
    if outcome.sorries:
        reasons.append("incomplete:sorry")
    if any("sorry" in str(w.get("data")) for w in outcome.warnings):
        reasons.append("incomplete:sorry_warning")
    if any("failed" in str(w.get("data")) for w in outcome.warnings):
        reasons.append("incomplete:warning_failed")
    return reasons


@dataclass(frozen=True)
class VerifierPolicy:
    """The strict verifier's policy: the budget and whether Lean's errors are kept for feedback."""

    budget_s: float
    feedback: bool  # record the REPL's errors and the compile view (for correction rounds)
    # reject: a displayed theorem that differs from the problem's rejects (strict);
    # record: it is only recorded (Goedel's protocol judges the re-inserted original).
    statement_check: Literal["reject", "record"] = "reject"
    gate: bool = True
    axiom_check: bool = True
    recheck_statement: bool = True  # step 6
    recheck_timeouts: bool = True  # a timeout is run once more after the batch
    recheck_share: float = 0.5  # of the workers, at most, busy with the re-checks


class StrictVerifier:
    """The gate, statement re-insertion, Lean, the axiom and statement checks: one verdict per
    sample."""

    def __init__(
        self,
        backend: LeanBackend,
        policy: VerifierPolicy,
        cache: VerdictCache | None = None,
        history: CostHistory | None = None,
    ) -> None:
        self.backend = backend
        self.policy = policy
        self.cache = cache
        self.history = history if history is not None else CostHistory()
        self.batch_duplicates = 0  # samples that shared another's Lean run in a batch
        self.timeouts_rechecked = 0
        self.ordered_by_history = 0  # Lean jobs whose statement had earlier measured runs
        self._info = VerifierInfo(
            pins=backend.pins,
            config={**asdict(self.policy), **backend.config(), "rules_sha256": rules_sha256()},
            workers=backend.workers,
        )

    @property
    def info(self) -> VerifierInfo:
        return self._info

    def _verdict(
        self,
        generation: Generation | JudgedSample,
        stage: Stage,
        reasons: list[str],
        verify_s: float = 0.0,
        **extra: Any,
    ) -> Verification:
        diagnostics = extra.pop("diagnostics", {})
        return Verification(
            problem_id=generation.problem_id,
            sample_idx=generation.sample_idx,
            round=generation.round,
            cap_tokens=generation.cap_tokens,
            accepted=stage is Stage.ACCEPTED,
            reasons=reasons,
            verify_s=verify_s,
            budget_s=self.policy.budget_s,
            verifier=self._info,
            code_sha256=code_sha256(generation.lean_code),
            stage=stage,
            diagnostics=diagnostics,
            **extra,
        )

    def prepare(self, problem: Problem, generation: Generation) -> Verification | LeanJob:
        """A verdict that needs no Lean, or the job to run."""
        if problem.problem_id != generation.problem_id:
            raise ValueError(
                f"generation of {generation.problem_id} given with {problem.problem_id}"
            )
        if generation.finish_reason in ("length", "no_room"):
            return self._verdict(generation, Stage.NO_CODE, [f"no_code:{generation.finish_reason}"])
        code = generation.lean_code
        if code is None:
            return self._verdict(generation, Stage.NO_CODE, ["no_code"])
        displayed = displayed_theorem(code)
        diagnostics = {
            "displayed_statement_faithful": displayed.faithful_to(problem.formal_statement),
            "code_chars": len(code),
        }
        if self.policy.gate:
            reasons = static_check(code, statement=problem.formal_statement, displayed=displayed)
            if self.policy.statement_check == "record":
                reasons = [r for r in reasons if reason_kind(r) not in STATEMENT_REASONS]
            if reasons:
                return self._verdict(generation, Stage.GATE, reasons, diagnostics=diagnostics)
        try:
            compiled = lean_input(problem.formal_statement, code)
        except ReinsertionError as exc:
            return self._verdict(
                generation,
                Stage.REINSERTION,
                [f"reinsertion:{exc.reason}"],
                diagnostics=diagnostics,
            )
        trusted = parse_statement(problem.formal_statement)
        if trusted.qualified_name is None:
            raise ValueError(
                f"{problem.problem_id}: the trusted statement does not parse ({trusted.reason}); "
                "every problem is parsed when it is loaded, so its file was changed since"
            )
        return LeanJob(
            key=generation.key,
            header=problem.header,
            body=compiled.body,
            theorem_name=trusted.qualified_name if self.policy.axiom_check else None,
            budget_s=self.policy.budget_s,
            priority=self.history.predicted_s(problem.formal_statement, len(code)),
            statement_check=statement_check_command(problem.formal_statement)
            if self.policy.recheck_statement
            else None,
            diagnostics=diagnostics,
        )

    def judge(
        self, generation: Generation | JudgedSample, job: LeanJob, result: LeanResult
    ) -> Verification:
        """The verdict on Lean's `result` for `job`, the job `prepare` made of `generation`
        (the displayed theorem's reading comes with the job)."""
        diagnostics: dict[str, Any] = {
            **job.diagnostics,
            "attempts": result.attempts,
            "worker": result.worker,
        }
        extra: dict[str, Any] = {}
        if result.failure == "timeout":
            return self._verdict(
                generation, Stage.TIMEOUT, ["timeout"], result.elapsed_s, diagnostics=diagnostics
            )
        if result.failure == FORGED_OUTPUT:
            # A rejection, not infrastructure: a retry would be the forger's next try.
            return self._verdict(
                generation,
                Stage.FORGED_OUTPUT,
                [FORGED_OUTPUT],
                result.elapsed_s,
                diagnostics={**diagnostics, "failure_detail": result.failure_detail},
            )
        if result.failure is not None or result.outcome is None:
            kind = (result.failure or "infrastructure:no_answer").removeprefix("infrastructure:")
            return self._infrastructure(generation, result, kind, diagnostics)
        outcome = result.outcome
        if self.policy.feedback:
            extra = {"repl_errors": [dict(e) for e in outcome.errors], "repl_code": job.body}
        diagnostics["warnings"] = len(outcome.warnings)
        if not outcome.passed:
            return self._verdict(
                generation,
                Stage.COMPILE_ERROR,
                ["compile_error"],
                result.elapsed_s,
                diagnostics=diagnostics,
                **extra,
            )
        if not outcome.complete:
            return self._verdict(
                generation,
                Stage.INCOMPLETE,
                _incomplete_reasons(outcome) or ["incomplete"],
                result.elapsed_s,
                diagnostics=diagnostics,
                **extra,
            )
        checked = self._checks_after_proof(generation, job, result, diagnostics, extra)
        if checked is not None:
            return checked
        return self._verdict(
            generation, Stage.ACCEPTED, [], result.elapsed_s, diagnostics=diagnostics, **extra
        )

    def _checks_after_proof(
        self,
        generation: Generation | JudgedSample,
        job: LeanJob,
        result: LeanResult,
        diagnostics: dict[str, Any],
        extra: dict[str, Any],
    ) -> Verification | None:
        """The axiom check and the statement check of a complete proof: the verdict of the
        first that fails (or could not run), None when both pass."""
        if job.theorem_name is not None:
            if result.axioms is None:
                return self._infrastructure(generation, result, "axioms:missing", diagnostics)
            diagnostics["axioms"] = list(result.axioms)
            foreign = [a for a in result.axioms if a not in STANDARD_AXIOMS]
            if foreign:
                return self._verdict(
                    generation,
                    Stage.AXIOM,
                    [f"axiom:{a}" for a in foreign],
                    result.elapsed_s,
                    diagnostics=diagnostics,
                    **extra,
                )
        if job.statement_check is not None:
            if result.statement_errors is None:
                return self._infrastructure(generation, result, "statement:missing", diagnostics)
            if result.statement_errors:
                diagnostics["statement_check"] = job.statement_check
                diagnostics["statement_errors"] = [
                    str(e.get("data", ""))[:500] for e in result.statement_errors
                ]
                return self._verdict(
                    generation,
                    Stage.STATEMENT_CHANGED,
                    ["statement_changed"],
                    result.elapsed_s,
                    diagnostics=diagnostics,
                    **extra,
                )
        return None

    def _infrastructure(
        self,
        generation: Generation | JudgedSample,
        result: LeanResult,
        kind: str,
        diagnostics: dict[str, Any],
    ) -> Verification:
        """A backend that answered the proof but not a check after it: not a judgement."""
        if result.failure_detail:
            diagnostics = {**diagnostics, "failure_detail": result.failure_detail}
        return self._verdict(
            generation,
            Stage.INFRASTRUCTURE,
            [f"infrastructure:{kind}"],
            result.elapsed_s,
            diagnostics=diagnostics,
        )

    def verify_stream(
        self,
        pairs: Iterable[tuple[Problem, Generation]],
        *,
        stop: threading.Event | None = None,
    ) -> Iterator[Verification]:
        """Verdicts for every pair as each is ready: those needing no Lean (or found in the
        cache) at once, Lean's as they finish. `pairs` may be a growing stream: its pairs go to
        the workers as they come. A timeout is re-checked once the pool is otherwise idle (at
        most `recheck_share` of the workers busy), its verdict holding both attempts. Once
        `stop` is set and `pairs` ends, the runs still waiting are dropped (no verdict: a later
        run verifies them), those running finish, and no timeout waits for its re-check."""
        batch = _Batch()
        busy = max(1, int(self.backend.workers * self.policy.recheck_share))
        feed = JobQueue(defer_while_running=busy)
        channel: queue.Queue[object] = queue.Queue()

        def produce() -> None:
            try:
                for problem, generation in pairs:
                    for verdict in self._admit(problem, generation, batch, feed):
                        channel.put(verdict)
            except BaseException as exc:  # surfaces in the consumer, never lost in a thread
                channel.put(exc)
            finally:
                channel.put(_FED)

        def consume() -> None:
            try:
                for result in self.backend.run(feed):
                    channel.put(result)
            except BaseException as exc:
                channel.put(exc)
            finally:
                channel.put(_LEAN_DONE)

        producer = threading.Thread(target=produce, name="verifier-feed", daemon=True)
        runner = threading.Thread(target=consume, name="verifier-lean", daemon=True)
        producer.start()
        runner.start()
        try:
            yield from self._collect(channel, feed, batch, stop)
        finally:
            # Jobs still waiting are dropped, running ones finish; a producer still reading a
            # stream stops at its next sample (the feed refuses it).
            feed.cancel()
            runner.join()

    def _collect(
        self,
        channel: queue.Queue[object],
        feed: JobQueue,
        batch: _Batch,
        stop: threading.Event | None,
    ) -> Iterator[Verification]:
        """The verdicts of one `verify_stream`: the producer's, and Lean's results judged; the
        feed is closed once everything fed has an answer (re-checks included)."""
        fed = False
        received = 0
        first_attempts: dict[tuple, Verification] = {}
        while (item := channel.get()) is not _LEAN_DONE:
            if isinstance(item, BaseException):
                raise item
            if item is _FED:
                fed = True
                if stop is not None and stop.is_set():
                    # The waiting runs are dropped (no verdict); the feed is closed, so the
                    # workers end after the running ones.
                    feed.cancel()
            elif isinstance(item, Verification):
                yield item
            else:
                assert isinstance(item, LeanResult)
                received += 1
                with batch.lock:
                    run = batch.running[item.key]
                verdict: Verification | None = self.judge(run.samples[0], run.job, item)
                assert verdict is not None
                self._measured(run, item)
                if item.key in first_attempts:
                    verdict = _with_both_attempts(first_attempts.pop(item.key), verdict)
                    self.timeouts_rechecked += 1
                elif verdict.stage is Stage.TIMEOUT and self.policy.recheck_timeouts:
                    if not (stop is not None and stop.is_set() and fed):
                        first_attempts[item.key] = verdict
                        with batch.lock:
                            batch.pushed += 1
                        feed.defer([run.job])
                    verdict = None  # final only after its re-check
                if verdict is not None:
                    yield from self._settled(run, verdict, batch)
            with batch.lock:
                answered = fed and received == batch.pushed
            if answered:
                feed.close()

    def _measured(self, run: _Run, result: LeanResult) -> None:
        """Record how long the run held a worker (a run that failed on the host measured
        nothing about the proof)."""
        timed_out = result.failure == "timeout"
        if result.failure is None or timed_out:
            self.history.record(
                run.statement,
                run.job.diagnostics["code_chars"],
                result.elapsed_s,
                timed_out=timed_out,
            )

    def _admit(
        self, problem: Problem, generation: Generation, batch: _Batch, feed: JobQueue
    ) -> list[Verification]:
        """Take one sample into the batch: its verdicts ready now (no Lean needed, a cached
        verdict, a copy of a settled duplicate), or none when its run is queued or joined."""
        prepared = self.prepare(problem, generation)
        if isinstance(prepared, Verification):
            return [prepared]
        statement = problem.formal_statement
        key = cache_key(self._info, statement, code_sha256(generation.lean_code))
        with batch.lock:
            if key in batch.settled:
                self.batch_duplicates += 1
                return [copy_for(batch.settled[key], generation.key, key, self._info)]
            if key in batch.runs:
                batch.runs[key].samples.append(JudgedSample.of(generation))
                self.batch_duplicates += 1
                return []
            hit = self.cache.get(key, self._info, statement) if self.cache else None
            if hit is not None:
                return [copy_for(hit, generation.key, key, self._info)]
            run = _Run(key, statement, prepared, [JudgedSample.of(generation)])
            batch.runs[key] = run
            batch.running[prepared.key] = run
            batch.pushed += 1
        self.ordered_by_history += self.history.knows(statement)
        feed.push([prepared])
        return []

    def _settled(self, run: _Run, verdict: Verification, batch: _Batch) -> Iterator[Verification]:
        """The verdict of the run's first sample, stored when final, and its copies for the
        samples that shared the run (a duplicate that comes later is copied on admission)."""
        if self.cache is not None:
            self.cache.put(run.key, verdict, run.statement)
        with batch.lock:
            del batch.runs[run.key]
            batch.settled[run.key] = verdict
            copies = run.samples[1:]
        yield verdict
        for generation in copies:
            yield copy_for(verdict, generation.key, run.key, self._info)

    def verify(self, problem: Problem, generation: Generation) -> Verification:
        (verdict,) = self.verify_stream([(problem, generation)])
        return verdict

    def verify_many(self, pairs: Sequence[tuple[Problem, Generation]]) -> list[Verification]:
        return list(self.verify_stream(pairs))
