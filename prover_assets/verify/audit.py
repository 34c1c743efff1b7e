"""The evaluation's statements audited by Lean: trivial, vacuous and phantom statements found
where Lean can say it, each finding with the tactic and the REPL's answer.

A registered result on statements some of which a closing tactic proves alone, whose hypotheses
contradict each other, or that elaborate only because Lean bound a name the statement never
introduced, means less than its p-value says. For each problem (its theorem renamed `_audit`,
in its own header's env, each check a job of its own):

- `trivial:<tactic>`: the statement proved by one of `TRIVIAL_TACTICS` alone (complete, the
  standard axioms only): the statement measures nothing;
- `vacuous:<tactic>`: its top-level binders proving `False` by one of `VACUITY_TACTICS`: no
  model needs to prove the claim (a statement without binders has no such check);
- `elaboration` and `strict_elaboration`: the `:= by sorry` form, as it is and under
  `set_option autoImplicit false in`: elaborating only as it is means a name the statement
  never binds was bound by Lean as an auto-bound implicit (`phantom_variable`).

A check Lean could not judge (timeout, infrastructure) is recorded and counted, never a finding
and never a pass. On the simulated verifier the checks run and are labelled so: its rule decides
nothing about statements, so its findings are never applied (`report/defects.py`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from prover_assets.lean.extract import compile_view
from prover_assets.lean.protocol import STANDARD_AXIOMS
from prover_assets.lean.signature import claim_colon, theorem_signature
from prover_assets.problems.defects import DefectKind
from prover_assets.records import Appender, Problem, iter_records
from prover_assets.verify.backends import LeanBackend
from prover_assets.verify.worker import LeanJob, LeanResult

__all__ = [
    "AUDIT_BUDGET_S",
    "AUDIT_NAME",
    "TRIVIAL_TACTICS",
    "VACUITY_TACTICS",
    "AuditFinding",
    "AuditRun",
    "AuditStatus",
    "audit_jobs",
    "audit_statements",
    "audit_variants",
    "findings_of",
]

AUDIT_NAME = "_audit"
# The closing tactics a statement must not fall to alone (the fixed list).
TRIVIAL_TACTICS = ("rfl", "decide", "norm_num", "simp", "omega", "linarith")
# The same tactics where they can read the hypotheses: `rfl` and `decide` read none, `norm_num`
# and `simp` only at a location (`at *`); `omega` and `linarith` read them all by default.
VACUITY_TACTICS = ("norm_num at *", "simp at *", "omega", "linarith")
# Each check's budget: a statement that falls to one tactic alone falls fast; the verifier's own
# budget (minutes, for a model's proof) would let one slow `simp` hold a worker that long.
AUDIT_BUDGET_S = 30.0
ELABORATION = "elaboration"
STRICT_ELABORATION = "strict_elaboration"
_STRICT = "set_option autoImplicit false in\n"


class AuditStatus(StrEnum):
    """What Lean said of one check's command."""

    HOLDS = "holds"  # a proof complete on the standard axioms; a statement that elaborates
    FAILS = "fails"  # Lean's errors, or a proof left incomplete
    TIMEOUT = "timeout"  # not judged
    INFRASTRUCTURE = "infrastructure"  # not judged: the REPL gave no usable answer


class AuditRun(BaseModel):
    """One check of one problem: the command Lean compiled and what it answered."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    schema_version: Literal[1] = 1
    problem_id: str
    check: str  # "elaboration", "strict_elaboration", "trivial:<tactic>", "vacuous:<tactic>"
    command: str  # the text sent in the header's env
    status: AuditStatus
    messages: list[dict[str, Any]]  # Lean's answer (errors, warnings, infos), or the failure
    axioms: list[str] | None
    verify_s: float

    @property
    def key(self) -> tuple[str, str]:
        return self.problem_id, self.check


@dataclass(frozen=True)
class AuditFinding:
    """A defect Lean showed: the problem, its kind, the check that showed it and Lean's answer."""

    problem_id: str
    kind: DefectKind
    check: str
    tactic: str | None
    messages: tuple[dict[str, Any], ...]

    @property
    def source(self) -> str:
        return f"statement_audit ({self.check})"

    @property
    def description(self) -> str:
        if self.kind is DefectKind.TRIVIAL:
            return f"proved by `{self.tactic}` alone"
        if self.kind is DefectKind.VACUOUS_HYPOTHESES:
            return f"its hypotheses prove False by `{self.tactic}`"
        first = next((str(m.get("data")) for m in self.messages), "")
        return f"elaborates only with auto-bound implicits ({first[:120]})"


def audit_variants(problem: Problem) -> dict[str, str]:
    """Each check's whole statement (header, preamble, the theorem renamed `_audit`: no clash
    with a library name), by check."""
    text = problem.formal_statement
    signature = theorem_signature(text)
    assert signature is not None  # a Problem's validator requires one
    head = text[: signature.theorem_start]
    claimed = text[signature.tokens[0].start : signature.tokens[-1].end]
    variants = {
        ELABORATION: f"{head}theorem {AUDIT_NAME} {claimed} := by sorry",
        STRICT_ELABORATION: f"{head}theorem {AUDIT_NAME} {claimed} := by sorry",
    }
    for tactic in TRIVIAL_TACTICS:
        variants[f"trivial:{tactic}"] = f"{head}theorem {AUDIT_NAME} {claimed} := by\n  {tactic}"
    colon = claim_colon(signature.tokens)
    if colon:  # top-level binders before the claim
        binders = text[signature.tokens[0].start : signature.tokens[colon - 1].end]
        for tactic in VACUITY_TACTICS:
            variants[f"vacuous:{tactic}"] = (
                f"{head}theorem {AUDIT_NAME} {binders} : False := by\n  {tactic}"
            )
    return variants


def _body(check: str, statement: str) -> str:
    """What Lean compiles against the header's env; the strict check's option placed right
    before the theorem (the compile view drops `set_option` lines, as it does for every proof)."""
    body = compile_view(statement)
    if check != STRICT_ELABORATION:
        return body
    signature = theorem_signature(body)
    assert signature is not None  # the variant's theorem survives the compile view
    return body[: signature.theorem_start] + _STRICT + body[signature.theorem_start :]


def audit_jobs(problem: Problem, budget_s: float) -> list[LeanJob]:
    """One job per check of `problem`; the proofs' axioms are read, the elaborations' not."""
    return [
        LeanJob(
            key=(problem.problem_id, check),
            header=problem.header,
            body=_body(check, statement),
            theorem_name=None if check in (ELABORATION, STRICT_ELABORATION) else AUDIT_NAME,
            budget_s=budget_s,
        )
        for check, statement in audit_variants(problem).items()
    ]


def _status(result: LeanResult, proof: bool) -> AuditStatus:
    if result.failure == "timeout":
        return AuditStatus.TIMEOUT
    if result.failure is not None or result.outcome is None:
        return AuditStatus.INFRASTRUCTURE
    if not proof:
        return AuditStatus.HOLDS if result.outcome.passed else AuditStatus.FAILS
    standard = result.axioms is not None and set(result.axioms) <= STANDARD_AXIOMS
    return AuditStatus.HOLDS if result.outcome.complete and standard else AuditStatus.FAILS


def _run(result: LeanResult, command: str) -> AuditRun:
    problem_id, check = result.key
    outcome = result.outcome
    if outcome is None:
        messages = [{"data": result.failure, "detail": result.failure_detail}]
    else:
        messages = [dict(m) for m in (*outcome.errors, *outcome.warnings, *outcome.infos)]
    return AuditRun(
        problem_id=problem_id,
        check=check,
        command=command,
        status=_status(result, proof=check not in (ELABORATION, STRICT_ELABORATION)),
        messages=messages,
        axioms=None if result.axioms is None else list(result.axioms),
        verify_s=result.elapsed_s,
    )


def audit_statements(
    problems: Sequence[Problem],
    backend: LeanBackend,
    *,
    budget_s: float,
    results_path: Path,
    progress: Callable[[int, int], None] | None = None,
) -> list[AuditRun]:
    """Every check of every problem, streamed to `results_path` (resumable: a rerun sends only
    the checks not recorded yet); every run, in problem then check order."""
    jobs = [job for problem in problems for job in audit_jobs(problem, budget_s)]
    commands = {job.key: job.body for job in jobs}
    with Appender(results_path, AuditRun) as appender:
        pending = [job for job in jobs if job.key not in appender.keys]
        done = len(jobs) - len(pending)
        for result in backend.run(pending):
            appender.append(_run(result, commands[result.key]))
            done += 1
            if progress is not None:
                progress(done, len(jobs))
    order = {job.key: index for index, job in enumerate(jobs)}
    runs = [run for run in iter_records(results_path, AuditRun) if run.key in order]
    return sorted(runs, key=lambda run: order[run.key])


def findings_of(runs: Iterable[AuditRun]) -> list[AuditFinding]:
    """The defects the runs show, per problem in the runs' order: `trivial` by the first tactic
    that proves it, `vacuous_hypotheses` by the first that proves False from its binders,
    `phantom_variable` when it elaborates as it is and not without auto-bound implicits."""
    by_problem: dict[str, dict[str, AuditRun]] = defaultdict(dict)
    for run in runs:
        by_problem[run.problem_id][run.check] = run
    found = []
    for problem_id, checks in by_problem.items():
        for prefix, kind in (
            ("trivial:", DefectKind.TRIVIAL),
            ("vacuous:", DefectKind.VACUOUS_HYPOTHESES),
        ):
            held = [r for c, r in checks.items() if c.startswith(prefix)]
            proved = next((r for r in held if r.status is AuditStatus.HOLDS), None)
            if proved is not None:
                tactic = proved.check.removeprefix(prefix)
                found.append(
                    AuditFinding(problem_id, kind, proved.check, tactic, tuple(proved.messages))
                )
        plain, strict = checks.get(ELABORATION), checks.get(STRICT_ELABORATION)
        if (
            plain is not None
            and strict is not None
            and plain.status is AuditStatus.HOLDS
            and strict.status is AuditStatus.FAILS
        ):
            found.append(
                AuditFinding(
                    problem_id,
                    DefectKind.PHANTOM_VARIABLE,
                    STRICT_ELABORATION,
                    None,
                    tuple(strict.messages),
                )
            )
    return found
