"""Child processes that never outlive their run, and folders that only one process works on.

- `spawn_tied` starts a child in its own session (so that it and its own children can be
  signalled as a group) that the kernel kills when this process dies (`PR_SET_PDEATHSIG`).
  The death signal follows the *thread* that forked, so every child is forked from one
  long-lived spawner thread: a REPL started by a pool thread that has since ended must live on.
  Each child is recorded (pid and start time, keyed by this process's pid and start time) so that
  the dead-run reaper can end any that escaped (a grandchild of `lake exe`), by pid and start
  time, never by name.
- `hold_folder` is an exclusive `flock` on a folder for a process's lifetime: a second trainer
  on the same folder waits for the holder to exit, then refuses, naming the holder's pid.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psutil

from prover_assets.records.store import publish_text

__all__ = [
    "CHILDREN_DIR_ENV",
    "ChildRecord",
    "FolderBusyError",
    "die_with_parent",
    "end_orphans",
    "forget_child",
    "hold_folder",
    "process_start_time",
    "spawn_tied",
]

CHILDREN_DIR_ENV = "PROVER_ASSETS_CHILDREN_DIR"
LOCK_NAME = ".lock"
_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="child-spawner")


class FolderBusyError(RuntimeError):
    """Another live process holds the folder."""


@dataclass(frozen=True)
class ChildRecord:
    """A child process as recorded for the dead-run reaper: its parent's and its own pid and start
    time."""

    parent_pid: int
    parent_start: float
    child_pid: int
    child_start: float
    argv: list[str]


def process_start_time(pid: int) -> float | None:
    """When `pid` started (seconds since the epoch), or None if it is gone or a zombie."""
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return None
        return process.create_time()
    except psutil.NoSuchProcess:
        return None


def _same_process(pid: int, started: float) -> bool:
    now = process_start_time(pid)
    return now is not None and abs(now - started) < 1.0


def children_dir() -> Path:
    """The folder of the child records (`PROVER_ASSETS_CHILDREN_DIR`, else one per user under the
    temp dir)."""
    default = Path(tempfile.gettempdir()) / f"prover-assets-children-{os.getuid()}"
    return Path(os.environ.get(CHILDREN_DIR_ENV, default))


# Run in the child between fork and the real program, as a program of its own: Python's
# `preexec_fn` is unsafe in a process with threads (the pools'), so the child execs this first.
# It asks for SIGKILL when its parent dies, exits if the parent is already gone, caps its
# address space if asked (0: no cap), then becomes the command; both settings survive exec.
_EXEC_TIED = """
import ctypes, os, resource, signal, sys
parent, cap, argv = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)
if os.getppid() != parent:
    os._exit(1)
if cap:
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
try:
    os.execvp(argv[0], argv)
except OSError as exc:
    sys.stderr.write(f"cannot run {argv[0]!r}: {exc}\\n")
    os._exit(127)
"""


def _tied_argv(argv: Sequence[str], parent: int, address_space_mb: int | None) -> list[str]:
    """The command line that runs `argv` tied to `parent`, under the address-space cap."""
    cap = (address_space_mb << 20) if address_space_mb else 0
    return [sys.executable, "-I", "-S", "-c", _EXEC_TIED, str(parent), str(cap), *argv]


def die_with_parent() -> None:
    """Ask for SIGKILL when this process's parent dies (Linux), and exit now if it already has:
    for a process a launcher started in a session of its own (torchrun starts each rank so),
    which a kill of the launcher's session would not reach."""
    parent = os.getppid()
    ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    if parent == 1 or os.getppid() != parent:  # orphaned before the request took hold
        os._exit(1)


def spawn_tied(
    argv: Sequence[str], *, address_space_mb: int | None = None, **popen: Any
) -> subprocess.Popen[bytes]:
    """`subprocess.Popen(argv, **popen)` in its own session, killed when this process dies.

    `address_space_mb` caps the child's virtual memory (RLIMIT_AS), inherited by its children.
    A command that cannot be run exits 127 with the reason on its stderr.
    """
    me = os.getpid()
    child = _SPAWNER.submit(
        subprocess.Popen,
        _tied_argv(argv, me, address_space_mb),
        start_new_session=True,
        **popen,
    ).result()
    record = ChildRecord(
        me,
        process_start_time(me) or 0.0,
        child.pid,
        process_start_time(child.pid) or time.time(),
        list(argv),
    )
    # Atomic: a sweep (or a reader) that lists the folder mid-write must never see half a record.
    publish_text(children_dir() / f"{me}-{child.pid}.json", json.dumps(asdict(record)))
    return child


def forget_child(child: subprocess.Popen[bytes]) -> None:
    """The child has been waited for: drop its record."""
    with contextlib.suppress(FileNotFoundError):
        (children_dir() / f"{os.getpid()}-{child.pid}.json").unlink()


def _records() -> Iterator[tuple[Path, ChildRecord]]:
    folder = children_dir()
    if not folder.exists():
        return
    for path in sorted(folder.glob("*.json")):
        try:
            yield path, ChildRecord(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            continue  # a record being written: the next sweep reads it


def _group_members(pgid: int, since: float) -> list[int]:
    """The live (not zombie) processes of group `pgid` started after `since` (less a second)."""
    members = []
    for pid in psutil.pids():
        try:
            in_group = os.getpgid(pid) == pgid
        except (ProcessLookupError, PermissionError):
            continue
        started = process_start_time(pid) if in_group else None
        if started is not None and started >= since - 1.0:
            members.append(pid)
    return members


def end_orphans() -> list[ChildRecord]:
    """Kill the process groups of recorded children whose parent is gone (matched by pid and
    start time, never by name); returns what was ended. Records of finished children go too."""
    ended = []
    for path, record in _records():
        if _same_process(record.parent_pid, record.parent_start):
            continue
        leader = process_start_time(record.child_pid)
        if leader is not None and abs(leader - record.child_start) >= 1.0:
            path.unlink(missing_ok=True)  # the pid is another process's now: never touched
            continue
        # With the leader gone (a `lake exe` whose REPL lives on), its group is what is left.
        members = _group_members(record.child_pid, record.child_start)
        if members:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(record.child_pid, signal.SIGKILL)
            ended.append(record)
        path.unlink(missing_ok=True)
    return ended


def _holder(lock_path: Path) -> str:
    with contextlib.suppress(OSError):
        return lock_path.read_text().strip() or "unknown"
    return "unknown"


@contextlib.contextmanager
def hold_folder(folder: Path, *, wait_s: float = 60.0) -> Iterator[None]:
    """Hold an exclusive lock on `folder` while the block runs (released when this process
    ends, however it ends). Waits up to `wait_s` for another holder to exit, then refuses."""
    folder.mkdir(parents=True, exist_ok=True)
    lock_path = folder / LOCK_NAME
    with open(lock_path, "a+") as handle:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise FolderBusyError(
                        f"{folder} is in use by another process (pid {_holder(lock_path)}); "
                        "it works on the same output. Wait for it to finish or stop it."
                    ) from None
                time.sleep(0.2)
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        try:
            yield
        finally:
            handle.seek(0)
            handle.truncate()
            fcntl.flock(handle, fcntl.LOCK_UN)
