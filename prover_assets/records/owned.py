"""Folders a process makes outside an output's staging (the preflight's work folder, each REPL's
temporary folder), named for their owner, and the sweep of those whose owner is gone.

A name ends `-h<host>-p<pid>-<random>`: the host as the first 8 hex digits of its name's
sha256 (a host name may hold dashes and dots), the pid of the process that made it. A folder is
removed only when it was made on this host by a process that no longer exists: another host's
(a shared file system) and a live process's are left alone, and a reused pid keeps a folder
rather than losing a live one. What is removed is said with its size.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import secrets
import shutil
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "HOST",
    "RUN_HOST_TAG",
    "Removed",
    "owned_name",
    "owner_is_gone",
    "remove_dead_owners",
    "size_bytes",
]

log = logging.getLogger(__name__)

HOST = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]
# The run tag naming the host whose processes execute a run (`HOST`): its pids mean something
# there only, so a reaper on another host sharing the instance leaves the run alone.
RUN_HOST_TAG = "prover_assets/host"
_OWNED = re.compile(r"-h(?P<host>[0-9a-f]{8})-p(?P<pid>\d+)-(?P<tag>[0-9a-f]+)$")


@dataclass(frozen=True)
class Removed:
    """A folder (or file) a sweep removed, and how many bytes it held."""

    path: Path
    size_bytes: int

    def describe(self) -> str:
        return f"{self.path} ({self.size_bytes / (1 << 20):.1f} MiB)"


def owned_name(prefix: str) -> str:
    """A new folder name that says this process, on this host, made it."""
    return f"{prefix}-h{HOST}-p{os.getpid()}-{secrets.token_hex(4)}"


def owner_is_gone(name: str) -> bool:
    """Whether `name` is an owned name of this host whose process no longer exists."""
    found = _OWNED.search(name)
    if found is None or found["host"] != HOST:
        return False
    try:
        os.kill(int(found["pid"]), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    return False


def size_bytes(path: Path) -> int:
    """The bytes of the files under `path` (a file's own size)."""
    if not path.is_dir():
        return path.stat().st_size if path.exists() else 0
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):  # removed meanwhile: nothing to count
                total += (Path(folder) / name).lstat().st_size
    return total


def remove_dead_owners(
    folder: Path,
    prefix: str,
    *,
    keep: Callable[[Path], bool] = lambda path: False,
    finished: Callable[[Path], bool] = lambda path: False,
) -> list[Removed]:
    """Remove the owned folders `<prefix>-...` in `folder` whose owner is gone, or that
    `finished` says their owner is done with, unless `keep` keeps them; returns what was
    removed, with sizes."""
    if not folder.is_dir():
        return []
    removed = []
    for path in sorted(folder.glob(f"{prefix}-*")):
        if _OWNED.search(path.name) is None or keep(path):
            continue
        if not (finished(path) or owner_is_gone(path.name)):
            continue
        size = size_bytes(path)
        shutil.rmtree(path, ignore_errors=True)
        log.warning("removed %s (%d bytes), left by a process that is gone", path, size)
        removed.append(Removed(path, size))
    return removed
