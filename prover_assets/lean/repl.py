"""The Lean REPL protocol: one process, one JSON request at a time, and reading its answers.

`ReplProcess` starts the REPL (the workspace's binary, `lean/launch.py`, or any command) in its
own session, killed if this process dies (`spawn_tied`), under a memory cap (`memory_limit`), and
contained (`containment`) where the host allows it. A request is ONE JSON line plus one blank
line; an answer is read as bytes until a complete JSON text is followed by a blank line,
whatever the pieces it arrives in. Any fault (timeout, crash, EOF, an empty or non-JSON
answer) kills the whole process group and raises a `ReplFailure`; the caller restarts.

Answers are bound to their commands. The pinned REPL (7df77c0, `REPL/Main.lean`) writes only
answers on its stdout, each `IO.println` of one JSON text then `IO.println ""`, and allocates
env ids in order (`recordCommandSnapshot`: the size of an array that is only pushed to), one per
answered command, none for an error answer (`Unknown environment.`, a caught exception); it
never reuses one. Its frontend (`IO.processCommands`) does not isolate what elaborated code
prints, and the project does not depend on whether Lean would: text a proof prints lands in the
same stream, ahead of Lean's answer. So each process counts the ids it has been given, and an
answer with another `env` is `forged_output`; after a job's last command the caller sends the
canary (`canary`, `lean/canary.py`), whose answer must come next and name its fresh nonce.

Containment: bubblewrap where it runs (no network, `/` read-only so the workspace and the
toolchain are, /tmp with them, a private writable TMPDIR, each folder of `hidden` (the data
root: verdicts, cache, manifests) replaced by an empty read-only one); else `unshare --net` (the network only);
else nothing. `describe_containment` is what a verdict records of it.

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

The memory cap (`lean/memory_cap.py`) is a cgroup's `MemoryMax` (a transient systemd scope)
where a probe inside such a scope reads the cap back, else RLIMIT_AS; the REPL runs with
`MALLOC_ARENA_MAX` set either way. `memory_report` measures what a warmed REPL maps and holds
(the self-test records it).

`read_answer` is Goedel's reading made strict: errors are messages of severity `error`;
complete means no errors, no sorries, no warning `declaration uses 'sorry'` in either quoting
(v4.9 and v4.28+), and no warning containing `failed`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import select
import shutil
import signal
import subprocess
import tempfile
import time
import tty
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from prover_assets.children import forget_child, spawn_tied
from prover_assets.lean.canary import answers_canary, canary_command, new_nonce
from prover_assets.lean.containment import contained_argv
from prover_assets.lean.memory_cap import MALLOC_ARENA_MAX, cgroup_prefix, memory_limit
from prover_assets.records.owned import Removed, owned_name, remove_dead_owners

__all__ = [
    "AnswerBuffer",
    "ReplFailure",
    "ReplOutcome",
    "ReplProcess",
    "read_answer",
    "sweep_repl_folders",
]

log = logging.getLogger(__name__)

_SORRY_WARNINGS = ("declaration uses 'sorry'", "declaration uses `sorry`")
# Each REPL's private TMPDIR, named for the process that started it (`records/owned.py`): a
# kill leaves one per REPL, removed by the next verifier on this host and by the reaper.
REPL_TMP_PREFIX = "lean-repl"
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


class AnswerBuffer:
    """The bytes read from the REPL's stdout, and the answers complete in them: each answer's
    text ends at a blank line; leading whitespace is skipped; a buffer of nothing but whitespace
    that holds a blank line is an empty answer ("").

    Every byte is examined once: `feed` appends, and `take` resumes where its last search
    stopped, so an answer of n bytes read in small pieces costs O(n), not O(n^2 / piece)."""

    def __init__(self) -> None:
        self._data = bytearray()
        self._scanned = 0  # bytes before this offset have been searched
        self._start: int | None = None  # the answer's first non-whitespace byte, once seen
        self._newlines = 0  # newlines in the whitespace before it

    def __bytes__(self) -> bytes:
        return bytes(self._data)

    def feed(self, chunk: bytes) -> None:
        self._data.extend(chunk)

    def clear(self) -> None:
        self._data.clear()
        self._restart()

    def _restart(self) -> None:
        self._scanned, self._start, self._newlines = 0, None, 0

    def take(self) -> str | None:
        """The text of the first complete answer, removed with its blank line; None while no
        answer is complete."""
        data = self._data
        if self._start is None:
            index = self._scanned
            while index < len(data) and data[index] in b" \t\r\n":
                self._newlines += data[index] == ord("\n")
                index += 1
            self._scanned = index
            if index == len(data):
                if self._newlines >= 2:
                    self.clear()
                    return ""
                return None
            self._start = index
        # A blank line split between two reads starts one byte before the last search's end.
        end = data.find(b"\n\n", max(self._start, self._scanned - 1))
        if end == -1:
            self._scanned = len(data)
            return None
        text = data[self._start : end].decode(errors="replace")  # UTF-8
        del data[: end + 2]
        self._restart()
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


def sweep_repl_folders() -> list[Removed]:
    """Remove the temporary folders of REPLs whose verifier process is gone (on this host)."""
    return remove_dead_owners(Path(tempfile.gettempdir()), REPL_TMP_PREFIX)


@dataclass
class ReplProcess:
    """One running REPL. Not thread-safe: one caller at a time (a pool worker)."""

    command: Sequence[str]
    cwd: Path | None = None
    memory_cap_mb: int | None = None
    sandbox: bool = True
    hidden: Sequence[Path] = ()  # folders the sandbox empties (the data root)
    extra_env: Mapping[str, str] = field(default_factory=dict)
    commands_sent: int = 0
    next_env: int = 0  # the env id the next answer that allocates one must carry
    _process: subprocess.Popen[bytes] | None = None
    _stdout_fd: int | None = None  # the pseudo-terminal's controlling side: the REPL's stdout
    _buffer: AnswerBuffer = field(default_factory=AnswerBuffer)
    _tmpdir: Path | None = None
    _stderr_path: Path | None = None

    def start(self) -> None:
        self._tmpdir = Path(tempfile.gettempdir()) / owned_name(REPL_TMP_PREFIX)
        self._tmpdir.mkdir(mode=0o700)
        self._stderr_path = self._tmpdir / "stderr.log"
        argv = list(self.command)
        if self.sandbox:
            argv = contained_argv(argv, tmpdir=self._tmpdir, hidden=self.hidden, cwd=self.cwd)
        address_space_mb = self.memory_cap_mb
        if self.memory_cap_mb is not None and memory_limit() == "cgroup":
            argv = [*cgroup_prefix(self.memory_cap_mb), *argv]
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
                    argv,
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
        assert self._process.stdin is not None
        # Requests are written by `_write`, never by the buffered file: it must not block.
        os.set_blocking(self._process.stdin.fileno(), False)
        self._buffer.clear()
        self.commands_sent = 0
        self.next_env = 0

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def send(self, request: Mapping[str, Any], timeout: float) -> dict[str, Any]:
        """Send one request and return its answer, or kill the process and raise ReplFailure:
        `forged_output` for an answer whose `env` is not the next id this process allocates."""
        if not self.alive:
            # A REPL that could not start may be gone before its first request: say why.
            why = f"; {self._exit_detail()}" if self._process is not None else ""
            raise ReplFailure("crash", f"the REPL is not running{why}")
        line = json.dumps(request, ensure_ascii=False)
        deadline = time.monotonic() + timeout
        self._write(line.encode() + b"\n\n", deadline, timeout)  # UTF-8
        self.commands_sent += 1
        answer = self._read(deadline, timeout)
        if "env" in answer:
            env = answer["env"]
            if type(env) is not int or env != self.next_env:  # bool is an int to isinstance
                self._fail("forged_output", f"an answer with env {env!r}, expected {self.next_env}")
            self.next_env += 1
        return answer

    def canary(self, env: int, timeout: float) -> None:
        """Send the canary in `env` (one the proof cannot have changed: the header's); its
        answer must be the next one read and name a nonce drawn now, else `forged_output`."""
        nonce = new_nonce()
        answer = self.send({"cmd": canary_command(nonce), "env": env}, timeout)
        if not answers_canary(answer, nonce):
            self._fail("forged_output", f"the canary's answer was not Lean's: {str(answer)[:200]}")

    def _write(self, data: bytes, deadline: float, timeout: float) -> None:
        """Write a request by the deadline: a REPL that stopped reading (its stdin pipe full,
        64 KiB on Linux) fails as a timeout instead of blocking the worker for good."""
        assert self._process is not None
        assert self._process.stdin is not None
        fd = self._process.stdin.fileno()
        view = memoryview(data)
        while view:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._fail("timeout", f"the request was not taken within {timeout:.1f} s")
            _, ready, _ = select.select([], [fd], [], remaining)
            if not ready:
                continue
            try:
                view = view[os.write(fd, view) :]
            except BlockingIOError:  # another writer filled the pipe between select and write
                continue
            except OSError as exc:  # BrokenPipeError: the REPL is gone
                self._fail("crash", f"writing the request failed: {exc}; {self._exit_detail()}")

    def _read(self, deadline: float, timeout: float) -> dict[str, Any]:
        assert self._process is not None
        assert self._stdout_fd is not None
        fd = self._stdout_fd
        while True:
            text = self._buffer.take()
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
                self._process.wait(timeout=5)
                self._fail("crash", f"EOF, {self._exit_detail()}")
            self._buffer.feed(chunk)

    def _exit_detail(self) -> str:
        assert self._process is not None
        code = self._process.poll()
        state = "still running" if code is None else f"exit code {code}"
        return f"{state}; stderr: {self.stderr_tail()!r}"

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

    def _summed(self, read: Callable[[psutil.Process], int]) -> float:
        total = 0
        for process in self._tree():
            with contextlib.suppress(psutil.Error):  # it exited or changed owner meanwhile
                total += read(process)
        return total / (1 << 20)

    def resident_mb(self) -> float:
        """Resident memory of the REPL's process tree: the `.olean` pages every REPL maps (about
        5 GB for Mathlib, one copy on the host) counted in each."""
        return self._summed(lambda process: process.memory_info().rss)

    def anonymous_mb(self) -> float:
        """The anonymous memory of the REPL's process tree (`Anonymous:` of
        /proc/<pid>/smaps_rollup): its own heap, which grows as proofs are elaborated and
        which one more worker adds to the host. Not the mapped `.olean` files, which a lone
        REPL maps privately and many REPLs share: psutil's USS would count them in the first
        case and not in the second."""
        return self._summed(_anonymous_bytes)

    def memory_report(self) -> dict[str, float]:
        """What the cap and the host must allow: the largest address space of one process of
        the tree (what RLIMIT_AS, per process, limits), the tree's resident memory (what a
        cgroup limits), its anonymous memory (its own), and the rest of the resident memory,
        mapped from files (the `.oleans`: one copy for every REPL of the host)."""
        largest = 0
        for process in self._tree():
            with contextlib.suppress(psutil.Error):
                largest = max(largest, process.memory_info().vms)
        resident, anonymous = self.resident_mb(), self.anonymous_mb()
        return {
            "address_space_mb": round(largest / (1 << 20), 1),
            "resident_mb": round(resident, 1),
            "anonymous_mb": round(anonymous, 1),
            "mapped_mb": round(max(0.0, resident - anonymous), 1),
        }


def _anonymous_bytes(process: psutil.Process) -> int:
    """`Anonymous:` of the process's smaps_rollup (Linux 4.14 and later), in bytes."""
    try:
        text = Path(f"/proc/{process.pid}/smaps_rollup").read_text(encoding="ascii")
    except (FileNotFoundError, ProcessLookupError) as exc:
        raise psutil.NoSuchProcess(process.pid) from exc
    found = re.search(r"^Anonymous:\s+(\d+) kB$", text, re.MULTILINE)
    if found is None:
        raise psutil.AccessDenied(process.pid, msg="no Anonymous line in smaps_rollup")
    return int(found[1]) << 10
