"""The preflight's checks of the Lean side: the workspace's pins, one REPL's round trip and its
header import, measured as the verifier starts its REPLs (command, workspace, memory cap,
sandbox). What they measure (`ReplMeasure`) the host memory check and the self-test read."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prover_assets.config import (
    LocalLeanSettings,
    RemoteLeanSettings,
    RunConfig,
    SimulatedLeanSettings,
)
from prover_assets.lean.containment import describe_containment
from prover_assets.lean.launch import repl_launch
from prover_assets.lean.memory_cap import memory_cap
from prover_assets.lean.protocol import GOEDEL_HEADER
from prover_assets.lean.repl import ReplProcess
from prover_assets.preflight.model import (
    CheckStatus,
    Measurement,
    PreflightCheck,
    not_applicable,
    passed_or_failed,
    timed,
)
from prover_assets.verify.backends import SIMULATOR_MODULE, settings_pins

__all__ = [
    "ROUND_TRIP_COMMAND",
    "ReplAnswer",
    "ReplMeasure",
    "import_check",
    "one_command",
    "pins_check",
    "repl_settings",
    "round_trip_check",
]

# A REPL command that needs no import: the round trip measures the REPL, not Mathlib.
ROUND_TRIP_COMMAND = "example : 1 + 1 = 2 := rfl"


def pins_check(config: RunConfig) -> PreflightCheck:
    """`lean.pins`: the workspace's Lean, Mathlib and REPL revisions are the ones the config
    expects (a simulated verifier says it has none)."""
    lean = config.lean
    expected = getattr(lean, "expected_pins", {})

    def measure() -> Measurement:
        pins = settings_pins(lean)
        read = ", ".join(
            f"{k} {getattr(pins, k)}" for k in ("lean_version", "mathlib_rev", "repl_rev")
        )
        if isinstance(lean, SimulatedLeanSettings):
            return Measurement(CheckStatus.NOT_APPLICABLE, f"SIMULATED verifier: {read}")
        if isinstance(lean, RemoteLeanSettings):
            return Measurement(CheckStatus.PASSED, f"declared by the config for the server: {read}")
        return Measurement(CheckStatus.PASSED, f"read from the workspace: {read}")

    return timed(
        "lean.pins",
        f"each expected pin a prefix of the workspace's ({expected or 'none expected'})",
        "build the registered workspace (`make lean-workspace`), or point lean.workspace at it",
        measure,
    )


@dataclass(frozen=True)
class ReplAnswer:
    """One command's answer from a fresh REPL: its errors, the seconds from start to answer,
    and the REPL's memory once it answered."""

    errors: list[dict[str, Any]]
    seconds: float
    memory: dict[str, float]


def repl_settings(config: RunConfig) -> SimulatedLeanSettings | LocalLeanSettings | None:
    """The settings of REPLs this host starts (None for a Lean server)."""
    lean = config.lean
    return None if isinstance(lean, RemoteLeanSettings) else lean


def one_command(
    lean: SimulatedLeanSettings | LocalLeanSettings, command: str, timeout_s: float
) -> ReplAnswer:
    """Start one REPL as the verifier starts it (its command, workspace, memory cap and
    sandbox), send `command`, and end it."""
    if isinstance(lean, SimulatedLeanSettings):
        argv = [
            sys.executable,
            "-m",
            SIMULATOR_MODULE,
            "--rule",
            lean.rule,
            "--seed",
            str(lean.seed),
        ]
        cwd = None
    else:
        argv, cwd = list(lean.command), Path(lean.workspace)
    launch = repl_launch(argv, cwd)  # the direct start the workers use, proved to answer
    started = time.monotonic()
    process = ReplProcess(
        launch.argv,
        cwd=cwd,
        memory_cap_mb=lean.memory_cap_mb,
        sandbox=lean.sandbox,
        extra_env=launch.env,
    )
    process.start()
    try:
        answer = process.send({"cmd": command}, timeout_s)
        memory = process.memory_report()
    finally:
        process.close()
    errors = [m for m in answer.get("messages", []) if m.get("severity") == "error"]
    return ReplAnswer(errors, time.monotonic() - started, memory)


@dataclass
class ReplMeasure:
    """What the REPL checks measured, for the checks after them."""

    round_trip_s: float | None = None
    import_s: float | None = None
    resident_mb: float | None = None
    address_space_mb: float | None = None
    anonymous_mb: float | None = None  # the warmed REPL's own (anonymous) memory
    mapped_mb: float | None = None  # the rest of its resident memory: the mapped .oleans


def round_trip_check(config: RunConfig, timeout_s: float, measured: ReplMeasure) -> PreflightCheck:
    """`lean.round_trip`: a REPL started as the verifier starts it answers one command within
    `timeout_s` (`measured`: that start, made once for the Lean checks)."""
    threshold = f"an answer within {timeout_s:g} s of starting the REPL"
    remedy = (
        "start the REPL by hand in the workspace (`lake exe repl`, then "
        '`{"cmd": "example : 1 + 1 = 2 := rfl"}` and a blank line): if it never answers, rebuild '
        "it (`lake build repl`); if it answers slowly, the host is overloaded"
    )
    lean = repl_settings(config)
    if lean is None:
        return not_applicable(
            "lean.round_trip", "a Lean server: the self-test is its round trip", threshold, remedy
        )

    def measure() -> Measurement:
        answer = one_command(lean, ROUND_TRIP_COMMAND, timeout_s)
        measured.round_trip_s = answer.seconds
        # The REPL ran as the verifier runs it: say what contained it.
        held = describe_containment(lean.sandbox)
        text = (
            f"answered in {answer.seconds:.2f} s; contained by {held['mechanism']}: {held['how']}"
        )
        if answer.errors:
            return Measurement(CheckStatus.FAILED, f"{text} with errors: {answer.errors[:2]}")
        return Measurement(CheckStatus.PASSED, text, {"repl round trip s": answer.seconds})

    return timed("lean.round_trip", threshold, remedy, measure)


def import_check(config: RunConfig, measured: ReplMeasure) -> PreflightCheck:
    """One `import Mathlib` (the protocol's header), timed, with the warmed REPL's memory against
    the worker's cap."""
    lean = repl_settings(config)
    if lean is None:
        return not_applicable(
            "lean.import", "a Lean server sizes its own workers", "", "see the server's own logs"
        )
    cap = memory_cap()
    mechanism = cap.mechanism
    limit = "resident" if mechanism == "cgroup" else "address space"
    threshold = (
        f"within header_timeout_s {lean.header_timeout_s:g} s; {limit} below memory_cap_mb "
        f"{lean.memory_cap_mb} ({mechanism}: {cap.evidence}); own (anonymous) memory below "
        f"memory_ceiling_mb {lean.memory_ceiling_mb}"
    )
    remedy = (
        "raise memory_cap_mb / memory_ceiling_mb to what a warmed REPL needs (measured here), or "
        "fewer lean workers; an import past the timeout: a cold .olean cache (`lake exe cache get`) "
        "or a slow disk"
    )

    def measure() -> Measurement:
        answer = one_command(lean, GOEDEL_HEADER.strip(), lean.header_timeout_s)
        memory = answer.memory
        measured.import_s = answer.seconds
        measured.resident_mb = memory["resident_mb"]
        measured.address_space_mb = memory["address_space_mb"]
        measured.anonymous_mb = memory["anonymous_mb"]
        measured.mapped_mb = memory["mapped_mb"]
        held = memory["resident_mb"] if mechanism == "cgroup" else memory["address_space_mb"]
        ok = (
            not answer.errors
            and held < lean.memory_cap_mb
            and memory["anonymous_mb"] < lean.memory_ceiling_mb
        )
        text = (
            f"{answer.seconds:.1f} s, resident {memory['resident_mb']:.0f} MiB (own "
            f"{memory['anonymous_mb']:.0f}, mapped {memory['mapped_mb']:.0f}), address space "
            f"{memory['address_space_mb']:.0f} MiB"
            + (f"; errors: {answer.errors[:2]}" if answer.errors else "")
        )
        return Measurement(passed_or_failed(ok), text, {"header import s": answer.seconds})

    return timed("lean.import", threshold, remedy, measure)
