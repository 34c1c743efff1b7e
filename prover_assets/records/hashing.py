"""sha256 helpers: files, text, and the code pin that ties a verdict to the code it judged."""

from __future__ import annotations

import hashlib
from pathlib import Path

__all__ = ["code_sha256", "sha256_bytes", "sha256_file", "sha256_text"]

_CHUNK = 1 << 20


def sha256_bytes(data: bytes) -> str:
    """The hex sha256 of `data`."""
    return hashlib.sha256(data).hexdigest()


def sha256_text(text: str) -> str:
    """The hex sha256 of `text`, encoded as UTF-8."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha256_file(path: str | Path) -> str:
    """The hex sha256 of a file's bytes, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def code_sha256(lean_code: str | None) -> str:
    """The pin of a verdict: sha256 of the generation's extracted code.

    A generation without code hashes to a value no code can have, so a verdict of `no_code`
    is also pinned and goes stale if the completion later yields code.
    """
    if lean_code is None:
        return hashlib.sha256(b"\x00no_code").hexdigest()
    return sha256_text(lean_code)
