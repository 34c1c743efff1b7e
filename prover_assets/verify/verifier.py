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
the verdict records both attempts; accepted on the re-check is accepted. The batch is
`verify/batching.py`'s.
"""

from __future__ import annotations

import functools
import hashlib
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
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
    Stage,
    Verification,
    VerifierInfo,
    code_sha256,
    reason_kind,
)
from prover_assets.verify.backends import LeanBackend
from prover_assets.verify.batching import JudgedSample, VerdictStream
from prover_assets.verify.cache import VerdictCache
from prover_assets.verify.history import CostHistory
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
    "verify/batching.py",
)


@functools.cache
def rules_sha256() -> str:
    """sha256 over the sources of `RULES_MODULES`, each named, in order."""
    package = Path(__file__).parents[1]
    digest = hashlib.sha256()
    for module in RULES_MODULES:
        digest.update(module.encode() + b"\0" + (package / module).read_bytes() + b"\0")
    return digest.hexdigest()


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
        """Verdicts for every pair as each is ready (`verify.batching.VerdictStream`): those
        needing no Lean (or found in the cache) at once, Lean's as they finish; `pairs` may be
        a growing stream. Once `stop` is set and `pairs` ends, the runs still waiting are
        dropped, those running finish."""
        return VerdictStream(self).verdicts(pairs, stop=stop)

    def verify(self, problem: Problem, generation: Generation) -> Verification:
        (verdict,) = self.verify_stream([(problem, generation)])
        return verdict

    def verify_many(self, pairs: Sequence[tuple[Problem, Generation]]) -> list[Verification]:
        return list(self.verify_stream(pairs))
