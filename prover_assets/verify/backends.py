"""Lean backends behind one interface: a local REPL pool, a remote server, the demo's simulation.

- `LocalReplBackend`: a work-stealing pool of REPL processes (the workspace's REPL binary,
  started with `lake env`'s environment: `lean/launch.py`).
- `RemoteBackend`: a Kimina Lean Server (`POST /api/check`) for scale-out.
- the simulated backend of the demo: the same local pool, with the REPL double as the REPL and
  a seeded acceptance rule; its pins say SIMULATED, so nothing it produces is evidence.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import requests

from prover_assets.config import (
    REMOTE_PINS,
    LeanSettings,
    LocalLeanSettings,
    RemoteLeanSettings,
    SimulatedLeanSettings,
    require_filled,
)
from prover_assets.http import backoff_s, pooled_session
from prover_assets.lean.containment import describe_containment
from prover_assets.lean.launch import repl_launch
from prover_assets.lean.memory_cap import describe_memory_limit
from prover_assets.lean.repl import ReplFailure, ReplProcess, read_answer, sweep_repl_folders
from prover_assets.records import Pins
from prover_assets.verify.pins import check_expected_pins, read_workspace_pins, simulated_pins
from prover_assets.verify.pool import JobQueue, WorkStealingPool, serve_jobs
from prover_assets.verify.simulator import (
    describe_rule,
)
from prover_assets.verify.sizing import sized_workers
from prover_assets.verify.worker import (
    LeanJob,
    LeanResult,
    ReplWorker,
    WarmSpare,
    parse_axioms,
    print_axioms_command,
)

log = logging.getLogger(__name__)

__all__ = [
    "LeanBackend",
    "LocalReplBackend",
    "RemoteBackend",
    "backend_from_settings",
    "settings_pins",
]

SIMULATOR_MODULE = "prover_assets.verify.simulator"


class LeanBackend(ABC):
    """Where Lean runs: pins, configuration, and `run` over jobs; a context manager."""

    pins: Pins
    workers: int

    @abstractmethod
    def config(self) -> dict[str, Any]:
        """What describes this backend in every verdict (with the verifier's policy)."""

    @abstractmethod
    def run(self, jobs: Sequence[LeanJob] | JobQueue) -> Iterator[LeanResult]:
        """One result per job, in completion order, on all the workers; a `JobQueue` may grow
        while it runs."""

    def warm(self, header: str) -> None:  # noqa: B027 - optional hook
        """Start every worker with `header` imported (a server warms its own)."""

    def header_imports(self) -> dict[str, int]:
        """Header imports so far, per worker; empty where a server imports its own."""
        return {}

    def memory_report(self) -> dict[str, dict[str, float]]:
        """What each worker's REPL maps and holds now; empty where a server runs them."""
        return {}

    def close(self) -> None:  # noqa: B027 - optional hook
        pass

    def __enter__(self) -> LeanBackend:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class LocalReplBackend(LeanBackend):
    """A pool of REPL processes on this machine (real `lake exe repl`, or the simulator)."""

    def __init__(
        self,
        command: Sequence[str],
        *,
        pins: Pins,
        workers: int,
        cwd: Path | None = None,
        memory_cap_mb: int | None = None,
        memory_ceiling_mb: float = float("inf"),
        recycle_after: int = 1000,
        header_timeout_s: float = 600.0,
        check_timeout_s: float,
        retries: int = 2,
        sandbox: bool = True,
        hidden: Sequence[Path] = (),
        simulated_rule: str | None = None,
        warm_spare: bool = True,
    ) -> None:
        self.command = list(command)
        self.simulated_rule = simulated_rule  # the simulator's rule in words, for the report
        self.pins = pins
        self.workers = workers
        self.cwd = cwd
        self.memory_cap_mb = memory_cap_mb
        self.memory_ceiling_mb = memory_ceiling_mb
        self.recycle_after = recycle_after
        self.retries = retries
        self.sandbox = sandbox
        self.hidden = tuple(hidden)
        self.header_timeout_s = header_timeout_s
        self.check_timeout_s = check_timeout_s

        self.launch = repl_launch(self.command, cwd)
        # What REPLs of a killed verifier left in TMPDIR (they die with it: `spawn_tied`).
        self.swept = sweep_repl_folders()

        factory = self._new_repl
        self.warm_spare = warm_spare
        spare = WarmSpare(factory, header_timeout_s) if warm_spare else None
        self.pool = WorkStealingPool(
            [
                ReplWorker(
                    i,
                    factory,
                    header_timeout_s=header_timeout_s,
                    check_timeout_s=check_timeout_s,
                    recycle_after=recycle_after,
                    memory_ceiling_mb=memory_ceiling_mb,
                    spare=spare,
                )
                for i in range(workers)
            ],
            retries=retries,
            spare=spare,
        )

    def _new_repl(self) -> ReplProcess:
        """A REPL process as every worker and the spare start one (not started yet)."""
        return ReplProcess(
            self.launch.argv,
            cwd=self.cwd,
            memory_cap_mb=self.memory_cap_mb,
            sandbox=self.sandbox,
            hidden=self.hidden,
            extra_env=self.launch.env,
        )

    def config(self) -> dict[str, Any]:
        return {
            "backend": self.pins.backend,
            "command": self.command,
            "repl_start": self.launch.record(),
            "workers": self.workers,
            "memory_cap_mb": self.memory_cap_mb,
            "memory_limit": describe_memory_limit(self.memory_cap_mb),
            "memory_ceiling_mb": self.memory_ceiling_mb
            if math.isfinite(self.memory_ceiling_mb)
            else None,
            "recycle_after": self.recycle_after,
            "infrastructure_retries": self.retries,
            "header_timeout_s": self.header_timeout_s,
            "check_timeout_s": self.check_timeout_s,
            "warm_spare": self.warm_spare,
            "sandbox": self._sandbox_record(),
            **({"simulated_rule": self.simulated_rule} if self.simulated_rule else {}),
        }

    def _sandbox_record(self) -> dict[str, Any]:
        """Which containment held (bubblewrap, a network namespace, none), as the memory cap
        records its mechanism; whether the data root was out of the REPLs' sight (a yes or no,
        not its path: verdicts of two data roots stay comparable); a private TMPDIR always."""
        held = describe_containment(self.sandbox)
        hidden = bool(held["filesystem"]) and bool(self.hidden)
        return {**held, "data_root_hidden": hidden, "tmpdir": "private per REPL"}

    def run(self, jobs: Sequence[LeanJob] | JobQueue) -> Iterator[LeanResult]:
        return self.pool.run(jobs)

    def warm(self, header: str) -> None:
        self.pool.warm(header)

    def header_imports(self) -> dict[str, int]:
        return self.pool.header_imports()

    def memory_report(self) -> dict[str, dict[str, float]]:
        return self.pool.memory_report()

    def close(self) -> None:
        self.pool.close()

    def restarts(self) -> int:
        return self.pool.restarts()


class RemoteBackend(LeanBackend):
    """A Kimina Lean Server: one snippet per proof (header + compile view + `#print axioms`)."""

    def __init__(
        self,
        url: str,
        *,
        pins: Pins,
        workers: int,
        retries: int = 2,
        position_base: str = "snippet",
        request_slack_s: float = 60.0,
        backoff_s: float = 1.0,
        backoff_max_s: float = 30.0,
    ) -> None:
        self.url = url.rstrip("/")
        self.pins = pins
        self.workers = workers
        self.retries = retries
        self.position_base = position_base
        self.request_slack_s = request_slack_s
        self.backoff_s = backoff_s
        self.backoff_max_s = backoff_max_s
        # One session: its connections are reused across proofs, one per worker thread.
        self._session = pooled_session(1, workers)

    def config(self) -> dict[str, Any]:
        return {
            "backend": "remote",
            "url": self.url,
            "workers": self.workers,
            "infrastructure_retries": self.retries,
            "position_base": self.position_base,
        }

    def _line_offset(self, header: str) -> int:
        """Lines to subtract so that positions index the compile view."""
        header_lines = (header + "\n").count("\n")
        if self.position_base == "snippet":
            return header_lines
        stripped = 0  # Kimina's split moves leading blank and `import` lines out of the body
        for line in (header + "\n").split("\n"):
            if line.strip() and not line.strip().startswith("import "):
                break
            stripped += 1
        return header_lines - min(stripped, header_lines)

    def _snippet(self, job: LeanJob) -> tuple[str, int | None, int | None]:
        """The code sent (header, compile view, `#print axioms`, the statement check), the line
        of the `#print axioms` (only its messages answer it: a proof's own `trace` could print
        the same words) and the line on which the statement check starts."""
        code = job.header + "\n" + job.body
        print_line = None
        if job.theorem_name is not None:
            code += "\n\n"
            print_line = code.count("\n") + 1
            code += print_axioms_command(job.theorem_name)
        if job.statement_check is None:
            return code, print_line, None
        code += "\n\n"
        return code + job.statement_check, print_line, code.count("\n") + 1

    def _post(self, code: str, job: LeanJob) -> dict[str, Any]:
        payload = {
            "snippets": [{"id": json.dumps(job.key), "code": code}],
            "timeout": math.ceil(job.budget_s),
            "debug": False,
            "reuse": True,
        }
        try:
            reply = self._session.post(
                f"{self.url}/api/check",
                json=payload,
                timeout=job.budget_s + self.request_slack_s,
            )
        except requests.RequestException as exc:
            raise ReplFailure("connection", f"{type(exc).__name__}: {exc}") from exc
        if not reply.ok:
            raise ReplFailure(f"http_{reply.status_code}", reply.text[:500])
        try:
            return reply.json()["results"][0]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise ReplFailure("non_json", f"{exc}: {reply.text[:300]!r}") from exc

    def _check_once(self, job: LeanJob) -> LeanResult:
        started = time.monotonic()
        code, print_line, check_line = self._snippet(job)
        result = self._post(code, job)
        elapsed = time.monotonic() - started
        error = result.get("error")
        if error:
            if "timed out" in str(error):
                return LeanResult(job.key, None, None, "timeout", elapsed, 1, 0)
            raise ReplFailure("remote_error", str(error)[:300])
        response = result.get("response") or {}
        offset = self._line_offset(job.header)
        printed, messages, statement = [], [], []
        for message in response.get("messages", []):
            line = (message.get("pos") or {}).get("line", 0)
            if check_line is not None and line >= check_line:
                statement.append(message)
            elif line == print_line:
                printed.append(message)
            else:
                messages.append(_shift(message, offset))
        outcome = read_answer(
            {
                **response,
                "messages": messages,
                "sorries": [_shift(s, offset) for s in response.get("sorries", [])],
            }
        )
        axioms = statement_errors = None
        if outcome.complete and job.theorem_name is not None:
            axioms = parse_axioms(read_answer({"messages": printed}), job.theorem_name)
        if outcome.complete and check_line is not None:
            statement_errors = read_answer({"messages": statement}).errors
        return LeanResult(job.key, outcome, axioms, None, elapsed, 1, 0, statement_errors)

    def backoff(self, attempt: int) -> float:
        """Seconds to wait after failed attempt `attempt` (1, 2, ...): doubling, bounded."""
        return backoff_s(attempt, self.backoff_s, self.backoff_max_s)

    def _check(self, job: LeanJob) -> LeanResult:
        started = time.monotonic()
        for attempt in range(1, self.retries + 2):
            try:
                result = self._check_once(job)
            except ReplFailure as exc:
                failure = exc
                log.warning("remote Lean, attempt %d for %s: %s", attempt, job.key, exc)
                if attempt <= self.retries:
                    time.sleep(self.backoff(attempt))
                continue
            return dataclasses.replace(
                result, elapsed_s=time.monotonic() - started, attempts=attempt
            )
        return LeanResult(
            job.key,
            None,
            None,
            f"infrastructure:{failure.kind}",
            time.monotonic() - started,
            self.retries + 1,
            0,
            failure_detail=failure.detail,
        )

    def run(self, jobs: Sequence[LeanJob] | JobQueue) -> Iterator[LeanResult]:
        return serve_jobs(jobs, [self._check] * self.workers, name="lean-remote")


def _shift(item: dict[str, Any], offset: int) -> dict[str, Any]:
    shifted = dict(item)
    for name in ("pos", "endPos"):
        if isinstance(item.get(name), dict):
            shifted[name] = {**item[name], "line": item[name]["line"] - offset}
    return shifted


def backend_from_settings(settings: LeanSettings, data_root: Path | None = None) -> LeanBackend:
    """The backend the settings describe; a local pool's REPLs cannot see `data_root` (where
    the sandbox holds)."""
    pins = settings_pins(settings)
    if isinstance(settings, RemoteLeanSettings):
        return RemoteBackend(
            settings.url,
            pins=pins,
            workers=settings.workers,
            retries=settings.infrastructure_retries,
            position_base=settings.position_base,
        )
    common = {
        "workers": sized_workers(settings).workers,
        "memory_cap_mb": settings.memory_cap_mb,
        "memory_ceiling_mb": settings.memory_ceiling_mb,
        "recycle_after": settings.recycle_after,
        "header_timeout_s": settings.header_timeout_s,
        "check_timeout_s": settings.check_timeout_s,
        "retries": settings.infrastructure_retries,
        "sandbox": settings.sandbox,
        "hidden": () if data_root is None else (data_root,),
        "warm_spare": settings.warm_spare,
    }
    if isinstance(settings, SimulatedLeanSettings):
        command = [sys.executable, "-m", SIMULATOR_MODULE, "--rule", settings.rule]
        command += ["--seed", str(settings.seed)]
        if settings.accept_share is not None:
            command += ["--accept-share", str(settings.accept_share)]
        rule = describe_rule(settings.rule, settings.seed, settings.accept_share)
        return LocalReplBackend(command, pins=pins, simulated_rule=rule, **common)
    return LocalReplBackend(settings.command, pins=pins, cwd=_workspace(settings), **common)


def _workspace(settings: LocalLeanSettings) -> Path:
    return Path(
        require_filled(settings.workspace, "resources.lean.config.settings.local.workspace")
    )


def settings_pins(settings: LeanSettings) -> Pins:
    """The pins of the verifier `settings` describe: read from the local workspace (and
    checked against `expected_pins`, raising `PinError`), a server's declared ones, or the
    simulator's (labelled SIMULATED)."""
    if isinstance(settings, RemoteLeanSettings):
        return Pins(
            **{k: settings.expected_pins[k] for k in REMOTE_PINS},
            backend="remote",
            simulated=False,
        )
    if isinstance(settings, SimulatedLeanSettings):
        return simulated_pins(f"{SIMULATOR_MODULE}, rule {settings.rule}, seed {settings.seed}")
    pins = read_workspace_pins(_workspace(settings))
    check_expected_pins(pins, settings.expected_pins)
    return pins
