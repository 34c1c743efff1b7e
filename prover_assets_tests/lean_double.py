"""Helpers to drive the verifier against the REPL double, scripted per test."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from prover_assets.verify.backends import LocalReplBackend
from prover_assets_tests.factories import make_pins

DOUBLE = [sys.executable, "-m", "prover_assets_tests.doubles.lean_repl"]


def probe(process: Any, port: int | None = None) -> dict[str, Any]:
    """What the double's process sees of itself (`--@fake probe`): its limits, environment,
    working folder, and whether it could connect to `port`."""
    spec = {"connect": f"127.0.0.1:{port}"} if port else {}
    answer = process.send(
        {"cmd": f"--@fake probe {json.dumps(spec)}\ntheorem a : True := trivial"}, 20
    )
    return json.loads(answer["messages"][0]["data"])


def error_reply(
    data: str, line: int = 2, column: int = 2, end_column: int | None = 10
) -> dict[str, Any]:
    end = None if end_column is None else {"line": line, "column": end_column}
    return {
        "messages": [
            {
                "severity": "error",
                "pos": {"line": line, "column": column},
                "endPos": end,
                "data": data,
            }
        ]
    }


def working_instrument() -> list[dict[str, Any]]:
    """Rules under which the double passes the self-test, as a sound Lean would: it rejects the
    known-bad proof (the double knows no self-test of its own)."""
    return [{"match": {"substring": "selftest_bad"}, "reply": error_reply("unsolved goals")}]


def double_backend(
    tmp_path: Path,
    rules: list[dict] | None = None,
    *args: str,
    workers: int = 2,
    retries: int = 1,
    check_timeout_s: float = 5.0,
    **kwargs: Any,
) -> LocalReplBackend:
    """A local backend whose REPL is the double, with these rules and a log of every request."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    rules_path = tmp_path / "rules.json"
    rules_path.write_text(json.dumps(rules or []))
    command = [
        *DOUBLE,
        "--rules",
        str(rules_path),
        "--log",
        str(tmp_path / "repl_log.jsonl"),
        *args,
    ]
    return LocalReplBackend(
        command,
        pins=make_pins(),
        workers=workers,
        retries=retries,
        check_timeout_s=check_timeout_s,
        sandbox=False,
        **kwargs,
    )


def repl_log(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "repl_log.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def rescanning_take(buffer: bytearray) -> str | None:
    """The reading before the resumable scan, kept as the oracle: it searches the whole buffer
    again on every call (quadratic in an answer read in pieces)."""
    start = 0
    while start < len(buffer) and buffer[start] in b" \t\r\n":
        start += 1
    if start == len(buffer):
        if buffer.count(b"\n") >= 2:
            buffer.clear()
            return ""
        return None
    end = buffer.find(b"\n\n", start)
    if end == -1:
        return None
    text = buffer[start:end].decode(errors="replace")
    del buffer[: end + 2]
    return text
