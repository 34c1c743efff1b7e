"""How much of a host the Lean workers hold, in the unit that matters.

A warmed REPL's resident memory is mostly Mathlib's `.olean` files, mapped from disk: file-backed
pages that every REPL of the host shares, one copy in the page cache. What one more worker adds
is its unique memory (USS: its private pages, the elaborator's heap). Summing resident memory
over eight workers counts the ~5 GB of `.oleans` eight times.
"""

from __future__ import annotations

__all__ = ["lean_host_mb"]


def lean_host_mb(workers: int, *, spare: bool, unique_mb: float, shared_mb: float) -> float:
    """The host memory `workers` REPLs hold (and the warm spare, a REPL like them, when there
    is one): each process's unique memory, and the shared pages once."""
    if workers == 0:
        return 0.0
    processes = workers + (1 if spare else 0)
    return processes * unique_mb + shared_mb
