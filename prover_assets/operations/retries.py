"""Each attempt of a streamed step, recorded beside its output (`attempts.jsonl`): a retry that
would start exactly where the run's attempt before it started has made no progress, and is
refused rather than run again. The record is a strict, resumable stream like every other: a
line torn by a kill is dropped, a malformed one is refused naming its file and line."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, NonNegativeInt

from prover_assets.records import Appender, read_records

__all__ = ["ATTEMPTS_FILE", "Attempt", "StalledRetry", "lines_in", "record_attempt"]

ATTEMPTS_FILE = "attempts.jsonl"


class Attempt(BaseModel):
    """One attempt of a step: its run, its retry number in that run, the records its stream
    held when it started, and when (seconds since the epoch)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    run_id: str
    retry_number: NonNegativeInt
    progress: NonNegativeInt
    at: float

    @property
    def key(self) -> tuple[str, int, float]:
        return (self.run_id, self.retry_number, self.at)


class StalledRetry(RuntimeError):
    """A retry that starts where the run's previous attempt started: it would fail the same."""

    def __init__(self, retry_number: int, progress: int, attempts: int) -> None:
        super().__init__(
            f"stalled: attempt {retry_number + 1} starts at {progress} done, exactly where "
            f"attempt {retry_number} started; not retrying a step that makes no progress "
            "(see the previous attempt's error)"
        )
        self.progress = progress
        self.attempts = attempts  # this run's attempts, this one included


def lines_in(path: Path) -> int:
    """How many records a stream holds (a cheap progress measure)."""
    if not path.exists():
        return 0
    with open(path, "rb") as handle:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))


def record_attempt(
    folder: Path,
    run_id: str,
    retry_number: int,
    progress: int,
    clock: Callable[[], float] = time.time,
) -> None:
    """Record the start of attempt `retry_number` of run `run_id` at `progress` records done;
    raise `StalledRetry`, recording nothing, when it is a retry that starts exactly where the
    run's previous attempt started."""
    path = folder / ATTEMPTS_FILE
    with Appender(path, Attempt) as appender:  # drops a line a kill tore, before it is read
        earlier = [a for a in read_records(path, Attempt) if a.run_id == run_id]
        if retry_number > 0 and earlier and earlier[-1].progress == progress:
            raise StalledRetry(retry_number, progress, attempts=len(earlier) + 1)
        appender.append(
            Attempt(run_id=run_id, retry_number=retry_number, progress=progress, at=clock())
        )
