"""sha256 helpers: files, text, and the code pin that ties a verdict to the code it judged."""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "FileStamp",
    "code_sha256",
    "settled_stamp",
    "sha256_bytes",
    "sha256_file",
    "sha256_text",
    "sha256_unless_unchanged",
]

log = logging.getLogger(__name__)

_CHUNK = 1 << 20
_PROGRESS_EVERY = 1 << 30  # bytes between two progress lines of one file's hashing
# More than a coarse file-time tick (jiffies: 1 to 10 ms): a write after the stamp then moves
# the mtime past the recorded one.
_SETTLE_NS = 20_000_000


def sha256_bytes(data: bytes) -> str:
    """The hex sha256 of `data`."""
    return hashlib.sha256(data).hexdigest()


def sha256_text(text: str) -> str:
    """The hex sha256 of `text`, encoded as UTF-8."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha256_file(path: str | Path) -> str:
    """The hex sha256 of a file's bytes, read in chunks; a file over `_PROGRESS_EVERY` logs its
    progress (bytes, rate, ETA) as it goes: an 8B model's shards are 16 GB."""
    digest = hashlib.sha256()
    total = os.stat(path).st_size
    started, next_report, done = time.monotonic(), _PROGRESS_EVERY, 0
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
            done += len(chunk)
            if done >= next_report and done < total:
                next_report += _PROGRESS_EVERY
                rate = done / max(time.monotonic() - started, 1e-9)
                log.info(
                    "hashing %s: %.1f of %.1f GiB, %.0f MiB/s, %.0f s left",
                    path,
                    done / 2**30,
                    total / 2**30,
                    rate / 2**20,
                    (total - done) / rate,
                )
    return digest.hexdigest()


@dataclass(frozen=True)
class FileStamp:
    """What a write to a file changes without reading it: size, mtime (ns) and inode. A file
    whose stamp is the one recorded with its sha256 is taken to be unchanged, as git and make
    take it; a stamp is recorded only once the file's mtime is in the past (`settled_stamp`),
    so that a later write, even in the same clock tick as the first, changes it."""

    size: int
    mtime_ns: int
    inode: int

    @classmethod
    def of(cls, path: str | Path) -> FileStamp:
        stat = os.stat(path)
        return cls(stat.st_size, stat.st_mtime_ns, stat.st_ino)

    @classmethod
    def parse(cls, recorded: Mapping[str, Any] | None) -> FileStamp | None:
        return None if recorded is None else cls(**recorded)


def settled_stamp(path: str | Path, wait_s: float = 1.0) -> FileStamp | None:
    """`path`'s stamp once the clock is past its mtime by more than a file-time tick (waiting up
    to `wait_s`), or None when it never is (a file server's clock ahead of ours): such a file is
    always re-hashed."""
    deadline = time.monotonic() + wait_s
    while True:
        stamp = FileStamp.of(path)
        ahead_ns = stamp.mtime_ns + _SETTLE_NS - time.time_ns()
        if ahead_ns <= 0:
            return stamp
        if time.monotonic() + ahead_ns / 1e9 > deadline:
            return None
        time.sleep(ahead_ns / 1e9)


def sha256_unless_unchanged(path: str | Path, sha256: str, stamp: FileStamp | None) -> str:
    """`sha256` when `path` still has `stamp`, else the file hashed again (with progress)."""
    if stamp is not None and FileStamp.of(path) == stamp:
        return sha256
    log.info("hashing %s: it changed (size, mtime or inode) since its sha256 was recorded", path)
    return sha256_file(path)


def code_sha256(lean_code: str | None) -> str:
    """The pin of a verdict: sha256 of the generation's extracted code.

    A generation without code hashes to a value no code can have, so a verdict of `no_code`
    is also pinned and goes stale if the completion later yields code.
    """
    if lean_code is None:
        return hashlib.sha256(b"\x00no_code").hexdigest()
    return sha256_text(lean_code)
