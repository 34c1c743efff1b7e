"""The pinned REPL's standard input and output, as a process standing in for it must speak
them (`REPL/Main.lean` at 7df77c0): a query is the lines up to a blank one; a comment gets no
answer; a query that is no JSON command ends the process with Lean's uncaught exception; the
answers go through a C stdio buffer that is never flushed, so a kill loses what it holds. The
simulated Lean (`verify.simulator`) and the tests' REPL double both speak it from here."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any, Protocol, TextIO

__all__ = ["CStdioStdout", "Responder", "parse_query", "read_query", "serve"]


class Responder(Protocol):
    """What answers the queries: one JSON answer (ended by a blank line) per request."""

    commands: int  # requests answered so far

    def respond(self, request: dict[str, Any], query: str) -> str: ...


def read_query(stdin: TextIO) -> str | None:
    """Lines up to a whitespace-only line; None at EOF with nothing read."""
    lines: list[str] = []
    for line in stdin:
        if not line.strip():
            return "".join(lines)
        lines.append(line)
    return "".join(lines) if lines else None


def parse_query(query: str) -> dict[str, Any] | int | None:
    """The request in a query; None for a comment (no answer); an exit code for a query the
    REPL dies on, its message on stderr as the pinned REPL's `parse` throws it
    (`REPL/Main.lean` 283-303 at 7df77c0): a blank line alone and text that is no JSON
    (`Could not parse JSON`), JSON that is no command (`... as a valid JSON command`)."""
    if query.startswith(("#", "--")):  # as read: `query.startsWith`, nothing stripped
        return None
    try:
        request = json.loads(query)
    except json.JSONDecodeError as exc:
        return _uncaught(f"Could not parse JSON:\n{exc}")
    if not isinstance(request, dict) or not isinstance(request.get("cmd"), str):
        return _uncaught(f"Could not parse as a valid JSON command:\n{query.strip()[:200]}")
    return request


def _uncaught(message: str) -> int:
    """Lean's `uncaught exception: <error>` for an `IO.userError` out of `main`: exit 1."""
    sys.stderr.write(f"uncaught exception: {json.dumps({'message': message})}\n")
    return 1


class CStdioStdout:
    """Standard output buffered as C stdio buffers a `FILE *` that is never flushed: by line
    when it is a terminal, in blocks of `block` bytes otherwise (glibc's buffer is the
    descriptor's `st_blksize`, 4096 for a pipe); what is left is written at a normal exit and
    lost to a kill, as Lean's runtime would lose it."""

    def __init__(self, fd: int = 1, block: int = 4096) -> None:
        self.fd = fd
        self.by_line = os.isatty(fd)
        self.block = block
        self.pending = bytearray()

    def write(self, text: str) -> None:
        self.pending += text.encode("utf-8")
        if self.by_line:
            cut = self.pending.rfind(b"\n") + 1
        else:
            cut = len(self.pending) - len(self.pending) % self.block
        self._emit(cut)

    def close(self) -> None:
        self._emit(len(self.pending))

    def _emit(self, count: int) -> None:
        written = 0
        while written < count:
            written += os.write(self.fd, self.pending[written:count])
        del self.pending[:count]


def serve(simulator: Responder, write: Callable[[str], None] | None = None) -> int:
    """Answer requests from stdin until EOF (exit 0) or a query the REPL dies on; by default
    written as the pinned REPL writes (`CStdioStdout`)."""
    stdout = CStdioStdout()
    emit = write or stdout.write
    try:
        while (query := read_query(sys.stdin)) is not None:
            request = parse_query(query)
            if isinstance(request, int):
                return request
            if request is None:
                continue
            simulator.commands += 1
            emit(simulator.respond(request, query))
        return 0
    finally:
        stdout.close()
