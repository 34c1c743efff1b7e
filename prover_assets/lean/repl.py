"""The Lean REPL protocol: one process, one JSON request at a time, and reading its answers.

`ReplProcess` starts the REPL (`lake exe repl` in a workspace, or any command) in its own
session, killed if this process dies (`spawn_tied`), under a memory cap (`memory_limit`),
without network access and with a private TMPDIR where the OS allows it. A request is ONE JSON line plus one
blank line; an answer is read as bytes until a complete JSON text is followed by a blank line,
whatever the pieces it arrives in. Any fault (timeout, crash, EOF, an empty or non-JSON
answer) kills the whole process group and raises a `ReplFailure`; the caller restarts.

The REPL's stdout is a pseudo-terminal in raw mode, not a pipe. The registered REPL
(leanprover-community/repl 7df77c0, Lean v4.9.0-rc1) answers with `IO.println` and never
flushes (the fix, 4fc1e6d, came with v4.10). Lean's handles are C `FILE *`s
(`src/runtime/io.cpp`: `io_wrap_handle(FILE *)`, writes by `fwrite`), so its stdout is
buffered by C stdio: in 4 KiB blocks on a pipe, where an answer of a few hundred bytes would
wait for the next ones, and by line on a terminal, where each line of an answer is written as
it ends. A terminal needs nothing of the binary. `stdbuf -o0` would instead need glibc's stdio
in a dynamically linked binary that honours LD_PRELOAD, in lake's child as well. Raw mode turns
off the output processing that would write `\n` as `\r\n`. The input side, with its line
discipline (canonical lines of at most 4 KiB, echo), is never used: requests go through a
pipe on stdin. `lake exe repl` starts the REPL as its child with the same stdout, so it is
answered the same way. Current REPLs, which flush each answer, read the same.

The memory cap is a cgroup's `MemoryMax` (a transient systemd scope) where the host gives this
user one, else RLIMIT_AS. RLIMIT_AS counts address space, not memory: every `.olean` Mathlib
maps (about 5 GB of them) and each thread's malloc arena (glibc reserves 64 MiB of address
space per arena, up to eight per core: dozens of GB on a many-core host) count against it, so
a cap that means "this much memory" under a cgroup kills a warmed REPL under RLIMIT_AS. The
REPL runs with `MALLOC_ARENA_MAX` set, which bounds the arenas either way; `memory_report`
measures what a warmed REPL maps and holds (the self-test records it).

`read_answer` is Goedel's reading made strict: errors are messages of severity `error`;
complete means no errors, no sorries, no warning `declaration uses 'sorry'` in either quoting
(v4.9 and v4.28+), and no warning containing `failed`.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
import tty
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from prover_assets.children import forget_child, spawn_tied

__all__ = [
    "ReplFailure",
    "ReplOutcome",
    "ReplProcess",
    "describe_memory_limit",
    "memory_limit",
    "read_answer",
    "sandbox_prefix",
    "take_answer",
]

log = logging.getLogger(__name__)

_SORRY_WARNINGS = ("declaration uses 'sorry'", "declaration uses `sorry`")
_READ_CHUNK = 1 << 16


@dataclass(frozen=True)
class ReplOutcome:
    """An answer read strictly: errors, sorries, warnings, infos, the env, and whether it passed
    and is complete."""

    passed: bool  # no errors
    complete: bool  # passed, no sorries, no sorry warning, no warning containing `failed`
    errors: tuple[dict[str, Any], ...]
    sorries: tuple[dict[str, Any], ...]
    warnings: tuple[dict[str, Any], ...]
    infos: tuple[dict[str, Any], ...]
    env: int | None


def _is_bad_warning(data: str) -> bool:
    return "failed" in data or any(text in data for text in _SORRY_WARNINGS)


def read_answer(answer: Mapping[str, Any]) -> ReplOutcome:
    """Goedel's reading of a REPL answer, made strict (see the module docstring)."""
    messages = answer.get("messages") or []
    errors = tuple(m for m in messages if m.get("severity") == "error")
    warnings = tuple(m for m in messages if m.get("severity") == "warning")
    infos = tuple(m for m in messages if m.get("severity") == "info")
    sorries = tuple(answer.get("sorries") or [])
    passed = not errors
    bad_warning = any(_is_bad_warning(str(w.get("data"))) for w in warnings)
    return ReplOutcome(
        passed=passed,
        complete=passed and not sorries and not bad_warning,
        errors=errors,
        sorries=sorries,
        warnings=warnings,
        infos=infos,
        env=answer.get("env"),
    )


def take_answer(buffer: bytearray) -> str | None:
    """The text of the first answer in `buffer` (ended by a blank line), removed from it with
    its blank line; "" for a whitespace-only answer; None while no answer is complete."""
    start = 0
    while start < len(buffer) and buffer[start] in b" \t\r\n":
        start += 1
    if start == len(buffer):
        # Whitespace only: an empty answer once it holds a blank line.
        if buffer.count(b"\n") >= 2:
            buffer.clear()
            return ""
        return None
    end = buffer.find(b"\n\n", start)
    if end == -1:
        return None
    text = buffer[start:end].decode(errors="replace")  # UTF-8
    del buffer[: end + 2]
    return text


class ReplFailure(RuntimeError):
    """The REPL did not give a usable answer. `kind`: timeout, crash, empty, non_json, ...;
    `stage`: the command it happened at (header, proof, axioms, statement), once known."""

    def __init__(self, kind: str, detail: str, stage: str | None = None) -> None:
        super().__init__(f"{stage + ':' if stage else ''}{kind}: {detail}")
        self.kind = kind
        self.detail = detail
        self.stage = stage

    def at_stage(self, stage: str) -> ReplFailure:
        return ReplFailure(self.kind, self.detail, stage)


@functools.cache
def sandbox_prefix() -> tuple[tuple[str, ...], str]:
    """The command prefix that takes network access away, and what it is (for the record).

    As root, `unshare --net`; otherwise a user namespace (`unshare --user --map-root-user
    --net`) where the kernel allows it; else no prefix, and the record says why.
    """
    if shutil.which("unshare") is None:
        return (), "none: unshare is not installed"
    candidates = [("unshare", "--net", "--")]
    if os.geteuid() != 0:
        candidates = [("unshare", "--user", "--map-root-user", "--net", "--")]
    for prefix in candidates:
        try:
            probe = subprocess.run([*prefix, "true"], capture_output=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return (), f"none: {exc}"
        if probe.returncode == 0:
            return prefix, " ".join(prefix[:-1])
    return (), f"none: unshare refused ({probe.stderr.decode(errors='replace').strip()[:200]})"


# glibc's arenas per process: two, not eight per core (each reserves 64 MiB of address space).
MALLOC_ARENA_MAX = "2"


@functools.cache
def memory_limit() -> str:
    """How a memory cap is enforced on this host: `cgroup` where `systemd-run --user --scope`
    can start a scope with `MemoryMax` (cgroup v2 delegated to the user), else `rlimit_as`."""
    if shutil.which("systemd-run") is None:
        return "rlimit_as"
    try:
        probe = subprocess.run(
            [*_cgroup_prefix(64), "true"], capture_output=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return "rlimit_as"
    return "cgroup" if probe.returncode == 0 else "rlimit_as"


def describe_memory_limit(cap_mb: int | None) -> dict[str, object]:
    """What a verdict records of its REPL's memory cap."""
    mechanism = "none" if cap_mb is None else memory_limit()
    described = {
        "cgroup": "cgroup MemoryMax (systemd-run --user --scope), swap off",
        "rlimit_as": "RLIMIT_AS (address space: mapped .oleans and malloc arenas count)",
        "none": "none: no memory_cap_mb",
    }[mechanism]
    return {"mechanism": mechanism, "how": described, "malloc_arena_max": int(MALLOC_ARENA_MAX)}


def _cgroup_prefix(cap_mb: int) -> tuple[str, ...]:
    # `--scope` runs the command itself (no fork): the REPL stays this process's child.
    return (
        "systemd-run", "--user", "--scope", "--quiet", "--collect",
        "-p", f"MemoryMax={cap_mb}M", "-p", "MemorySwapMax=0", "--",
    )  # fmt: skip


@dataclass
class ReplProcess:
    """One running REPL. Not thread-safe: one caller at a time (a pool worker)."""

    command: Sequence[str]
    cwd: Path | None = None
    memory_cap_mb: int | None = None
    sandbox: bool = True
    extra_env: Mapping[str, str] = field(default_factory=dict)
    commands_sent: int = 0
    _process: subprocess.Popen[bytes] | None = None
    _stdout_fd: int | None = None  # the pseudo-terminal's controlling side: the REPL's stdout
    _buffer: bytearray = field(default_factory=bytearray)
    _tmpdir: Path | None = None
    _stderr_path: Path | None = None

    def start(self) -> None:
        self._tmpdir = Path(tempfile.mkdtemp(prefix="lean-repl-"))
        self._stderr_path = self._tmpdir / "stderr.log"
        prefix: tuple[str, ...] = sandbox_prefix()[0] if self.sandbox else ()
        address_space_mb = self.memory_cap_mb
        if self.memory_cap_mb is not None and memory_limit() == "cgroup":
            prefix = (*_cgroup_prefix(self.memory_cap_mb), *prefix)
            address_space_mb = None
        env = {
            **os.environ,
            "MALLOC_ARENA_MAX": MALLOC_ARENA_MAX,
            **self.extra_env,
            "TMPDIR": str(self._tmpdir),
            "TMP": str(self._tmpdir),
            "TEMP": str(self._tmpdir),
        }
        controller, terminal = os.openpty()
        tty.setraw(terminal)  # no `\r\n` for `\n`, no echo
        try:
            with open(self._stderr_path, "wb") as stderr:
                self._process = spawn_tied(
                    [*prefix, *self.command],
                    cwd=self.cwd,
                    stdin=subprocess.PIPE,
                    stdout=terminal,
                    stderr=stderr,
                    env=env,
                    address_space_mb=address_space_mb,
                )
        except BaseException:
            os.close(controller)
            raise
        finally:
            os.close(terminal)  # the REPL holds it now: its last close is our EOF
        self._stdout_fd = controller
        self._buffer.clear()
        self.commands_sent = 0

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def send(self, request: Mapping[str, Any], timeout: float) -> dict[str, Any]:
        """Send one request and return its answer, or kill the process and raise ReplFailure."""
        if not self.alive:
            raise ReplFailure("crash", "the REPL is not running")
        assert self._process is not None
        assert self._process.stdin is not None
        line = json.dumps(request, ensure_ascii=False)
        try:
            self._process.stdin.write(line.encode() + b"\n\n")  # UTF-8
            self._process.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            self._fail("crash", f"writing the request failed: {exc}")
        self.commands_sent += 1
        return self._read(timeout)

    def _read(self, timeout: float) -> dict[str, Any]:
        assert self._process is not None
        assert self._stdout_fd is not None
        deadline = time.monotonic() + timeout
        fd = self._stdout_fd
        while True:
            text = take_answer(self._buffer)
            if text is not None:
                if not text.strip():
                    self._fail("empty", "the REPL answered with nothing")
                try:
                    answer = json.loads(text)
                except json.JSONDecodeError as exc:
                    self._fail("non_json", f"{exc}: {text[:200]!r}")
                if not isinstance(answer, dict):
                    self._fail("non_json", f"not a JSON object: {text[:200]!r}")
                return answer
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._fail("timeout", f"no answer within {timeout:.1f} s")
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                continue
            try:
                chunk = os.read(fd, _READ_CHUNK)
            except OSError:  # EIO: every holder of the terminal's side closed it (Linux)
                chunk = b""
            if not chunk:
                code = self._process.wait(timeout=5)
                self._fail("crash", f"EOF, exit code {code}; stderr: {self.stderr_tail()!r}")
            self._buffer.extend(chunk)

    def stderr_tail(self, limit: int = 2000) -> str:
        if self._stderr_path is None or not self._stderr_path.exists():
            return ""
        data = self._stderr_path.read_bytes()
        return data[-limit:].decode(errors="replace")  # UTF-8

    def _fail(self, kind: str, detail: str) -> None:
        self.kill()
        raise ReplFailure(kind, detail)

    def kill(self) -> None:
        """Kill the whole process group (the REPL's children too) and clean up."""
        process, self._process = self._process, None
        if process is not None:
            with contextlib.suppress(OSError):  # the group is gone, or is not ours
                os.killpg(process.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=10)
            forget_child(process)
            if process.stdin is not None:
                with contextlib.suppress(OSError):
                    process.stdin.close()
        if self._stdout_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._stdout_fd)
            self._stdout_fd = None
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None

    def close(self) -> None:
        """End the REPL politely (EOF on stdin), then make sure nothing of it is left."""
        process = self._process
        if process is not None and process.poll() is None and process.stdin is not None:
            with contextlib.suppress(OSError):
                process.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=5)
        self.kill()

    def _tree(self) -> list[psutil.Process]:
        if self._process is None:
            return []
        try:
            root = psutil.Process(self._process.pid)
            return [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def resident_mb(self) -> float:
        """Resident memory of the REPL's process and its descendants (lake and the repl)."""
        total = 0
        for process in self._tree():
            with contextlib.suppress(psutil.Error):  # it exited or changed owner meanwhile
                total += process.memory_info().rss
        return total / (1 << 20)

    def memory_report(self) -> dict[str, float]:
        """What the cap must allow: the largest address space of one process of the tree (what
        RLIMIT_AS, per process, limits) and the tree's resident memory (what a cgroup limits)."""
        largest = 0
        for process in self._tree():
            with contextlib.suppress(psutil.Error):
                largest = max(largest, process.memory_info().vms)
        return {
            "address_space_mb": round(largest / (1 << 20), 1),
            "resident_mb": round(self.resident_mb(), 1),
        }
