"""One verification worker: a REPL process, its header environments, and its recycling.

The header is elaborated once per worker (per distinct header) and reused as `env`; each proof
is one command against it, then `#print axioms <theorem>` in the proof's env. The worker is
recycled (a fresh REPL) after N commands or above a resident-memory ceiling.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from prover_assets.lean.repl import ReplFailure, ReplOutcome, ReplProcess, read_answer

__all__ = ["LeanJob", "LeanResult", "ReplWorker", "parse_axioms"]

_DEPENDS = re.compile(r"depends on axioms: \[(.*)\]", re.DOTALL)
_NO_AXIOMS = "does not depend on any axioms"
AXIOMS_TIMEOUT_S = 60.0
# Measuring a REPL's resident memory scans /proc (about 5 ms, more on a busy host); memory grows
# over many proofs, so once a second per worker catches it as well as after every proof would.
MEMORY_CHECK_INTERVAL_S = 1.0


@dataclass(frozen=True)
class LeanJob:
    key: tuple
    header: str  # the problem's header: elaborated once per worker, reused as `env`
    body: str  # the compile view
    theorem_name: str | None  # for `#print axioms`; None skips the axiom check
    budget_s: float
    priority: float = 0.0  # larger first: a length proxy, so likely-long proofs start early


@dataclass(frozen=True)
class LeanResult:
    key: tuple
    outcome: ReplOutcome | None  # None when the REPL gave no answer
    axioms: tuple[str, ...] | None  # None when the axiom check did not run
    failure: str | None  # None, "timeout", or "infrastructure:<kind>"
    elapsed_s: float
    attempts: int
    worker: int


def parse_axioms(outcome: ReplOutcome, name: str) -> tuple[str, ...]:
    """The axioms of `name` from a `#print axioms` answer; raises ReplFailure if unreadable."""
    for message in outcome.infos:
        data = str(message.get("data", ""))
        if _NO_AXIOMS in data:
            return ()
        if (found := _DEPENDS.search(data)) is not None:
            return tuple(part.strip() for part in found.group(1).split(",") if part.strip())
    detail = "; ".join(str(m.get("data")) for m in (*outcome.errors, *outcome.infos))
    raise ReplFailure("axioms_unreadable", f"#print axioms {name}: {detail[:300]}")


class ReplWorker:
    def __init__(
        self,
        index: int,
        factory: Callable[[], ReplProcess],
        *,
        header_timeout_s: float,
        recycle_after: int,
        memory_ceiling_mb: float,
    ) -> None:
        self.index = index
        self._factory = factory
        self._header_timeout_s = header_timeout_s
        self._recycle_after = recycle_after
        self._memory_ceiling_mb = memory_ceiling_mb
        self._process: ReplProcess | None = None
        self._memory_checked_at = time.monotonic()
        self._envs: dict[str, int] = {}
        self.restarts = 0
        self.recycles = 0

    def _ready(self) -> ReplProcess:
        if self._process is None or not self._process.alive:
            if self._process is not None:
                self.restarts += 1
            self._process = self._factory()
            self._process.start()
            self._envs.clear()
        return self._process

    def _header_env(self, process: ReplProcess, header: str) -> int:
        if header not in self._envs:
            outcome = read_answer(process.send({"cmd": header}, self._header_timeout_s))
            if not outcome.passed or outcome.env is None:
                process.kill()
                raise ReplFailure("header", f"the header did not elaborate: {outcome.errors[:2]}")
            self._envs[header] = outcome.env
        return self._envs[header]

    def run(self, job: LeanJob) -> tuple[ReplOutcome, tuple[str, ...] | None]:
        """Compile one proof (and check its axioms); raises ReplFailure on any fault."""
        process = self._ready()
        env = self._header_env(process, job.header)
        outcome = read_answer(process.send({"cmd": job.body, "env": env}, job.budget_s))
        axioms = None
        if outcome.complete and job.theorem_name is not None and outcome.env is not None:
            printed = read_answer(
                process.send(
                    {"cmd": f"#print axioms {job.theorem_name}", "env": outcome.env},
                    AXIOMS_TIMEOUT_S,
                )
            )
            axioms = parse_axioms(printed, job.theorem_name)
        self._maybe_recycle(process)
        return outcome, axioms

    def _over_memory(self, process: ReplProcess) -> bool:
        now = time.monotonic()
        if now - self._memory_checked_at < MEMORY_CHECK_INTERVAL_S:
            return False
        self._memory_checked_at = now
        return process.resident_mb() > self._memory_ceiling_mb

    def _maybe_recycle(self, process: ReplProcess) -> None:
        if process.commands_sent >= self._recycle_after or self._over_memory(process):
            self.recycles += 1
            process.close()
            self._process = None

    def execute(self, job: LeanJob, retries: int) -> LeanResult:
        """Run `job`; an infrastructure fault is retried on a fresh REPL up to `retries` times.

        A timeout is the proof's own result (no retry); a fault that persists is reported as
        `infrastructure:<kind>`, never as a judgement of the proof.
        """
        started = time.monotonic()
        attempts = 0
        while True:
            attempts += 1
            try:
                outcome, axioms = self.run(job)
            except ReplFailure as failure:
                if failure.kind == "timeout":
                    return LeanResult(
                        job.key,
                        None,
                        None,
                        "timeout",
                        time.monotonic() - started,
                        attempts,
                        self.index,
                    )
                if attempts > retries:
                    return LeanResult(
                        job.key,
                        None,
                        None,
                        f"infrastructure:{failure.kind}",
                        time.monotonic() - started,
                        attempts,
                        self.index,
                    )
                continue
            return LeanResult(
                job.key, outcome, axioms, None, time.monotonic() - started, attempts, self.index
            )

    def close(self) -> None:
        if self._process is not None:
            self._process.close()
            self._process = None
