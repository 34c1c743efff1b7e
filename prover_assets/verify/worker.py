"""One verification worker: a REPL process, its header environment, and its recycling.

The header is elaborated once per REPL process and reused as `env`; a job with another header
gets another process (the warm spare, when it holds that header), never a second import in
place (see `ReplWorker._ready`). Each proof is one command against it, then `#print axioms
<theorem>` and the statement check in the proof's env. The worker is recycled (a fresh REPL)
after N commands or above a ceiling on its own memory (anonymous, `ReplProcess.anonymous_mb`).

Only the proof's own command can earn a verdict from a fault: exceeding its budget is `timeout`.
A fault anywhere else (the header, `#print axioms`, the statement check) or an answer that is
not an answer to the command (no `env`, "Unknown environment.") is infrastructure: retried on a
fresh REPL, then reported as `infrastructure:<stage>:<kind>`, never as a judgement of the proof.

Except text Lean did not write. Once the proof was sent, its code may have run and printed
answers of its own; after the job's last command the canary (`ReplProcess.canary`, in the
header's env, which no proof changes) must be answered next. `forged_output` is the verdict
when it is not, when an answer carries an env id this process has not reached, and when an
answer is text Lean never writes (empty, not JSON: the pinned REPL writes `IO.println` of a JSON
object). A fault Lean can answer itself (no env, "Unknown environment.", an axioms answer of
another shape) is infrastructure only if the canary then comes back clean. A forgery is never
retried as infrastructure (the retry would be the forger's next try), with one exception that
names the right culprit: read on a REPL an earlier job ran on (whose code may have left a task
printing), the job runs once more on a fresh REPL, and only a forgery there is its verdict.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from prover_assets.lean.repl import ReplFailure, ReplOutcome, ReplProcess, read_answer

__all__ = [
    "FORGED_OUTPUT",
    "LeanJob",
    "LeanResult",
    "ReplWorker",
    "WarmSpare",
    "checked_answer",
    "parse_axioms",
    "print_axioms_command",
]

# Lean's `printAxiomsOf` (Lean/Elab/Print.lean): one info message per declaration, of exactly
# these two shapes, the name as it resolved.
_DEPENDS = "' depends on axioms: ["
_NO_AXIOMS = "' does not depend on any axioms"
FORGED_OUTPUT = "forged_output"
# The stages at which the proof's code may have run in this REPL, so that text it printed can
# be read in place of their answers.
_AFTER_PROOF = ("proof", "axioms", "statement", "canary")
# Faults only text Lean never writes can cause: its answers are JSON objects, never empty, each
# with the next env id (`ReplProcess.send`).
_NOT_LEANS = (FORGED_OUTPUT, "non_json", "empty")
# Faults an answer of Lean's own can cause; the canary tells whether it was Lean's.
_CANARY_DECIDES = ("unknown_environment", "no_env", "axioms_unreadable")
# Measuring a REPL's own memory reads /proc/<pid>/smaps_rollup (about a millisecond); memory grows
# over many proofs, so once a second per worker catches it as well as after every proof would.
MEMORY_CHECK_INTERVAL_S = 1.0


@dataclass(frozen=True)
class LeanJob:
    """One proof for Lean: header, body, the theorem's name and the statement check."""

    key: tuple
    header: str  # the problem's header: elaborated once per worker, reused as `env`
    body: str  # the compile view
    theorem_name: str | None  # for `#print axioms`; None skips the axiom check
    budget_s: float
    priority: float = 0.0  # larger first: a length proxy, so likely-long proofs start early
    statement_check: str | None = None  # a command that holds only for the trusted statement
    # What the verifier read before Lean (the displayed theorem's faithfulness), carried to the
    # verdict; Lean never sees it.
    diagnostics: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LeanResult:
    """What Lean said of one job, or why it could not say (timeout, infrastructure)."""

    key: tuple
    outcome: ReplOutcome | None  # None when the REPL gave no answer
    axioms: tuple[str, ...] | None  # None when the axiom check did not run
    failure: str | None  # None, "timeout", "forged_output", or "infrastructure:<stage>:<kind>"
    elapsed_s: float
    attempts: int
    worker: int
    # The statement check's errors: None when it did not run, () when the statement holds.
    statement_errors: tuple[dict[str, Any], ...] | None = None
    # What the backend said about an infrastructure failure (the server's text, the REPL's
    # exit and stderr), kept in the verdict's diagnostics.
    failure_detail: str | None = None


def print_axioms_command(name: str) -> str:
    """`#print axioms` of the root declaration `name`. Asked by a relative name inside the
    namespace a preamble leaves open, `Ns.t` would resolve to a candidate's `Ns.Ns.t` (an
    `alias`, any declaration), which would answer for the theorem."""
    return f"#print axioms _root_.{name}"


def parse_axioms(outcome: ReplOutcome, name: str) -> tuple[str, ...]:
    """The axioms of `name` from the answer to its `#print axioms`: that answer's only message,
    an info of Lean's exact shape naming `name`; raises ReplFailure for any other answer."""
    messages = (*outcome.errors, *outcome.warnings, *outcome.infos)
    data = str(messages[0].get("data", "")) if len(messages) == 1 else None
    if outcome.infos and data is not None:
        if data == f"'{name}{_NO_AXIOMS}":
            return ()
        prefix = f"'{name}{_DEPENDS}"
        if data.startswith(prefix) and data.endswith("]"):
            listed = data[len(prefix) : -1].split(",")
            if all(part.strip() for part in listed):
                return tuple(part.strip() for part in listed)
    detail = "; ".join(str(m.get("data")) for m in messages)
    raise ReplFailure("axioms_unreadable", f"#print axioms {name}: {detail[:300]}")


def checked_answer(answer: Mapping[str, Any]) -> ReplOutcome:
    """The outcome of an answer to a command sent with an `env`; raises ReplFailure when it is
    no such answer: the REPL lost the env ("Unknown environment.") or gave no new env."""
    if "message" in answer and "messages" not in answer:
        raise ReplFailure("unknown_environment", str(answer["message"])[:300])
    outcome = read_answer(answer)
    if not isinstance(outcome.env, int):
        raise ReplFailure("no_env", f"an answer without `env`: {str(dict(answer))[:300]}")
    return outcome


def _import_header(process: ReplProcess, header: str, timeout_s: float) -> int:
    outcome = read_answer(process.send({"cmd": header}, timeout_s))
    if not outcome.passed or not isinstance(outcome.env, int):
        raise ReplFailure(
            "did_not_elaborate", f"the header did not elaborate: {outcome.errors[:2]}"
        )
    return outcome.env


class WarmSpare:
    """One REPL kept started with a header imported, for whichever worker restarts next: a
    restart after a timeout or a fault, or a recycle, costs no start-up and no import (Mathlib's
    takes about 10 s) while a new spare warms in the background. One spare per pool: one more
    REPL's memory, not one per worker."""

    def __init__(self, factory: Callable[[], ReplProcess], header_timeout_s: float) -> None:
        self._factory = factory
        self._header_timeout_s = header_timeout_s
        self._lock = threading.Lock()
        self._ready: tuple[ReplProcess, str, int] | None = None
        self._warming: threading.Thread | None = None
        self._closed = False
        self.taken = 0
        self.header_imports = 0  # by the spare's processes, each taken or not

    def take(self, header: str) -> tuple[ReplProcess, int] | None:
        """The spare and its env, when it is warm for `header`; a new one starts warming."""
        with self._lock:
            ready, self._ready = self._ready, None
        if ready is not None and (ready[1] != header or not ready[0].alive):
            ready[0].close()
            ready = None
        self._warm(header)
        if ready is None:
            return None
        self.taken += 1
        return ready[0], ready[2]

    def _warm(self, header: str) -> None:
        with self._lock:
            if self._closed or (self._warming is not None and self._warming.is_alive()):
                return
            self._warming = threading.Thread(
                target=self._start, args=(header,), name="lean-spare", daemon=True
            )
            self._warming.start()

    def _start(self, header: str) -> None:
        process = self._factory()
        try:
            process.start()
            self.header_imports += 1
            env = _import_header(process, header, self._header_timeout_s)
        except ReplFailure:
            process.kill()
            return
        with self._lock:
            if self._closed or self._ready is not None:
                process.close()
            else:
                self._ready = (process, header, env)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            ready, self._ready = self._ready, None
            warming = self._warming
        if warming is not None:
            warming.join()  # a spare still warming sees `_closed` once warm and closes itself
        if ready is not None:
            ready[0].close()


class ReplWorker:
    """One REPL process that runs jobs, recycled by commands and memory, restarted after a fault
    (from the pool's warm spare when it has one for the job's header)."""

    def __init__(
        self,
        index: int,
        factory: Callable[[], ReplProcess],
        *,
        header_timeout_s: float,
        check_timeout_s: float,
        recycle_after: int,
        memory_ceiling_mb: float,
        spare: WarmSpare | None = None,
    ) -> None:
        self.index = index
        self._spare = spare
        self._factory = factory
        self._header_timeout_s = header_timeout_s
        # `#print axioms`, the statement check and the canary: past what is left of the budget
        self._check_timeout_s = check_timeout_s
        self._recycle_after = recycle_after
        self._memory_ceiling_mb = memory_ceiling_mb
        self._process: ReplProcess | None = None
        self._memory_checked_at = time.monotonic()
        self._envs: dict[str, int] = {}
        self._jobs_on_process = 0  # jobs the current REPL has run (whose code may linger)
        self.restarts = 0
        self.recycles = 0
        self.header_imports = 0  # by this worker's processes (a spare's are the spare's)
        self.header_switches = 0  # processes closed because the next job needed another header

    def memory_report(self) -> dict[str, float] | None:
        """What this worker's REPL maps and holds now (None when none runs)."""
        return self._process.memory_report() if self._process is not None else None

    def held_headers(self) -> tuple[str, ...]:
        """The header this worker's REPL has imported (at most one): its cheapest next jobs."""
        return tuple(self._envs)

    def _ready(self, header: str) -> ReplProcess:
        if self._process is not None and self._envs and header not in self._envs:
            # One header per process: Lean maps each .olean at its stored base address, which
            # the first import holds; a second import reads the files into anonymous memory
            # (`read_module_data`, src/library/module.cpp), about the first's size again.
            self.header_switches += 1
            self._process.close()
            self._process = None
        if self._process is None or not self._process.alive:
            if self._process is not None:
                self.restarts += 1
            self._envs.clear()
            self._jobs_on_process = 0
            warm = self._spare.take(header) if self._spare is not None else None
            if warm is not None:
                self._process, self._envs[header] = warm
            else:
                self._process = self._factory()
                self._process.start()
        return self._process

    def _header_env(self, process: ReplProcess, header: str) -> int:
        if header not in self._envs:
            self.header_imports += 1
            self._envs[header] = _import_header(process, header, self._header_timeout_s)
        return self._envs[header]

    def warm(self, header: str) -> None:
        """Start the REPL and import `header` now, before the first proof needs them."""
        process = self._ready(header)
        try:
            self._header_env(process, header)
        except ReplFailure:
            self._discard()  # the first job retries on a fresh REPL and reports what it finds

    def _command(
        self, process: ReplProcess, stage: str, cmd: str, env: int, timeout: float
    ) -> ReplOutcome:
        try:
            return checked_answer(process.send({"cmd": cmd, "env": env}, timeout))
        except ReplFailure as failure:
            raise failure.at_stage(stage) from failure

    def run(
        self, job: LeanJob
    ) -> tuple[ReplOutcome, tuple[str, ...] | None, tuple[dict[str, Any], ...] | None]:
        """Compile one proof, then check its axioms and its statement: (outcome, axioms,
        statement errors). Raises ReplFailure, with its stage, on any fault."""
        process = self._ready(job.header)
        self._jobs_on_process += 1
        try:
            env = self._header_env(process, job.header)
        except ReplFailure as failure:
            raise failure.at_stage("header") from failure
        proof_sent = time.monotonic()
        try:
            judged = self._judge(process, job, env, proof_sent)
        except ReplFailure as failure:
            raise self._unmasked(process, env, failure, job, proof_sent) from failure
        try:
            process.canary(env, self._after_proof_timeout(job, proof_sent))
        except ReplFailure as failure:
            staged = failure.at_stage("canary")
            raise self._unmasked(process, env, staged, job, proof_sent) from failure
        self._maybe_recycle(process)
        return judged

    def _after_proof_timeout(self, job: LeanJob, proof_sent: float) -> float:
        """How long an answer after the proof's is waited for: as long as the proof could still
        be running (text it printed may have stood in for every answer read since, and Lean's
        own, arriving then, unmasks it), then as long as a check."""
        rest = job.budget_s - (time.monotonic() - proof_sent)
        return max(0.0, rest) + self._check_timeout_s

    def _unmasked(
        self, process: ReplProcess, env: int, failure: ReplFailure, job: LeanJob, sent: float
    ) -> ReplFailure:
        """`failure` at a stage after the proof was sent, as `forged_output` when text Lean did
        not write caused it (see the module docstring)."""
        if failure.stage not in _AFTER_PROOF:
            return failure
        if failure.kind in _NOT_LEANS:
            return ReplFailure(FORGED_OUTPUT, failure.detail, failure.stage)
        if failure.kind in _CANARY_DECIDES and process.alive:
            try:
                process.canary(env, self._after_proof_timeout(job, sent))
            except ReplFailure as canary:
                if canary.kind in _NOT_LEANS:
                    detail = f"{failure.detail}; then the canary: {canary.detail}"
                    return ReplFailure(FORGED_OUTPUT, detail, failure.stage)
        return failure

    def _judge(
        self, process: ReplProcess, job: LeanJob, env: int, proof_sent: float
    ) -> tuple[ReplOutcome, tuple[str, ...] | None, tuple[dict[str, Any], ...] | None]:
        """The proof's command, then its axioms and its statement check when it is complete."""
        outcome = self._command(process, "proof", job.body, env, job.budget_s)
        axioms = statement_errors = None
        if outcome.complete and job.theorem_name is not None:
            printed = self._command(
                process,
                "axioms",
                print_axioms_command(job.theorem_name),
                outcome.env,
                self._after_proof_timeout(job, proof_sent),
            )
            try:
                axioms = parse_axioms(printed, job.theorem_name)
            except ReplFailure as failure:
                raise failure.at_stage("axioms") from failure
        if outcome.complete and job.statement_check is not None:
            checked = self._command(
                process,
                "statement",
                job.statement_check,
                outcome.env,
                self._after_proof_timeout(job, proof_sent),
            )
            statement_errors = checked.errors
        return outcome, axioms, statement_errors

    def _over_memory(self, process: ReplProcess) -> bool:
        now = time.monotonic()
        if now - self._memory_checked_at < MEMORY_CHECK_INTERVAL_S:
            return False
        self._memory_checked_at = now
        return process.anonymous_mb() > self._memory_ceiling_mb

    def _maybe_recycle(self, process: ReplProcess) -> None:
        if process.commands_sent >= self._recycle_after or self._over_memory(process):
            self.recycles += 1
            process.close()
            self._process = None

    def execute(self, job: LeanJob, retries: int) -> LeanResult:
        """Run `job`; an infrastructure fault is retried on a fresh REPL up to `retries` times.

        The proof's own command exceeding its budget is the proof's result (`timeout`, no
        retry); a fault that persists is `infrastructure:<stage>:<kind>`, never a judgement.
        """
        started = time.monotonic()
        attempts = 0
        while True:
            attempts += 1
            process = self._process
            inherited = process is not None and process.alive and self._jobs_on_process > 0
            try:
                outcome, axioms, statement_errors = self.run(job)
            except ReplFailure as failure:
                self._discard()
                if failure.kind == FORGED_OUTPUT:
                    if inherited:  # an earlier job's code may have printed it: ask afresh
                        continue
                    return LeanResult(
                        job.key,
                        None,
                        None,
                        FORGED_OUTPUT,
                        time.monotonic() - started,
                        attempts,
                        self.index,
                        failure_detail=f"{failure.stage}: {failure.detail}"[:500],
                    )
                proof_timeout = failure.kind == "timeout" and failure.stage == "proof"
                if proof_timeout or attempts > retries:
                    verdict = (
                        "timeout"
                        if proof_timeout
                        else f"infrastructure:{failure.stage}:{failure.kind}"
                    )
                    elapsed = time.monotonic() - started
                    detail = None if proof_timeout else failure.detail[:500]
                    return LeanResult(
                        job.key,
                        None,
                        None,
                        verdict,
                        elapsed,
                        attempts,
                        self.index,
                        failure_detail=detail,
                    )
                continue
            elapsed = time.monotonic() - started
            return LeanResult(
                job.key, outcome, axioms, None, elapsed, attempts, self.index, statement_errors
            )

    def _discard(self) -> None:
        """Kill the REPL after a fault: whatever state it was in, the retry starts afresh."""
        if self._process is not None:
            self._process.kill()
            self._process = None
            self.restarts += 1

    def close(self) -> None:
        if self._process is not None:
            self._process.close()
            self._process = None
