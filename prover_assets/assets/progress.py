"""Progress of long steps: counts, rate and ETA in the run's logs and as asset observations."""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import dagster as dg

from prover_assets.assets.metadata import display_number
from prover_assets.config import ConfigError
from prover_assets.records import OutputExistsError, RecordError
from prover_assets.records.outputs import (
    ChecksumError,
    EmptyOutputError,
    StaleOutputError,
    supersede,
)
from prover_assets.records.staleness import StaleVerdictError
from prover_assets.report.markdown import clock_time
from prover_assets.resources import LeanInstrumentError
from prover_assets.sft.stages import ReadBackError

__all__ = ["ProgressReporter", "guard_retry_progress", "lines_in", "start_attempt"]


def _eta(seconds: float | None) -> str:
    return "unknown" if seconds is None else clock_time(seconds)


class ProgressReporter:
    """Progress of one step, called as often as the step likes (each sample, each optimizer
    step): it logs the first call, then at most every `log_every_s` seconds, and the last
    (`final`, or the first to reach `total`); it records an observation (visible in the asset's timeline)
    at most every `observe_every_s` seconds and with the last."""

    def __init__(
        self,
        context: dg.AssetExecutionContext,
        what: str,
        *,
        log_every_s: float = 10.0,
        observe_every_s: float = 30.0,
    ) -> None:
        self.context = context
        self.what = what
        self.log_every_s = log_every_s
        self.observe_every_s = observe_every_s
        self._logged: float | None = None
        self._observed: float | None = None
        self._reached = False

    def __call__(
        self,
        done: int,
        total: int,
        rate: float | None,
        unit: str,
        extra: Mapping[str, Any] | None = None,
        *,
        final: bool = False,
    ) -> None:
        now = time.monotonic()
        # The last report: asked for, or the first to reach the total (later ones add nothing).
        last = final or (done >= total and not self._reached)
        self._reached |= done >= total
        eta = (total - done) / rate if rate else None
        if last or _elapsed(self._logged, now) >= self.log_every_s:
            self._logged = now
            summary = f"{self.what}: {done:,}/{total:,}" + (
                f" ({rate:,.2f} {unit}/s, ETA {_eta(eta)})" if rate else ""
            )
            if extra:
                summary += " " + ", ".join(f"{k} {v}" for k, v in extra.items())
            self.context.log.info(summary)
        if last or _elapsed(self._observed, now) >= self.observe_every_s:
            self._observed = now
            metadata: dict[str, Any] = {"done": done, "total": total, "eta": _eta(eta)}
            if rate:
                metadata[f"{unit}_per_s"] = display_number(rate)
            metadata.update(
                {
                    k: display_number(v) if isinstance(v, float) else v
                    for k, v in (extra or {}).items()
                    if isinstance(v, int | float | str)
                }
            )
            self.context.log_event(
                dg.AssetObservation(asset_key=self.context.asset_key, metadata=metadata)
            )


def _elapsed(since: float | None, now: float) -> float:
    """Seconds since `since`; infinite when nothing happened yet (the first call is due)."""
    return float("inf") if since is None else now - since


ATTEMPTS_FILE = "attempts.jsonl"


def lines_in(path: Path) -> int:
    """How many records a stream holds (a cheap progress measure)."""
    if not path.exists():
        return 0
    with open(path, "rb") as handle:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))


def guard_retry_progress(context: dg.AssetExecutionContext, folder: Path, progress: int) -> None:
    """Retry only what moves: on a retry, fail as stalled (and stop retrying) when the previous
    attempt of this run ended where it started; every attempt's starting count is recorded."""
    log = folder / ATTEMPTS_FILE
    entries = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    previous = [e for e in entries if e["run_id"] == context.run.run_id]
    if context.retry_number > 0 and previous and previous[-1]["progress"] == progress:
        raise dg.Failure(
            description=f"stalled: attempt {context.retry_number + 1} starts at {progress} done, exactly where "
            f"attempt {context.retry_number} started; not retrying a step that makes no progress "
            "(see the previous attempt's error)",
            metadata={"done": progress, "attempts": len(previous) + 1},
            allow_retries=False,
        )
    folder.mkdir(parents=True, exist_ok=True)
    with open(log, "a", encoding="utf-8") as handle:
        handle.write(
            json.dumps(
                {
                    "run_id": context.run.run_id,
                    "retry_number": context.retry_number,
                    "progress": progress,
                    "at": time.time(),
                }
            )
            + "\n"
        )


def start_attempt(
    context: dg.AssetExecutionContext, folder: Path, stream_file: str, *, recompute: bool = False
) -> None:
    """Begin an attempt of a streamed heavy step: move the previous output aside when the run
    config asks to recompute, then refuse a retry that made no progress."""
    if recompute and (moved := supersede(folder)) is not None:
        context.log.info(f"recompute: moved the previous output to {moved}")
    guard_retry_progress(context, folder, lines_in(folder / stream_file))


# Errors that a retry cannot fix: the same inputs and config give the same error. They fail the
# step at once, with their message on top; only infrastructure errors are retried.
DETERMINISTIC_ERRORS: tuple[type[BaseException], ...] = (
    ConfigError,
    StaleOutputError,
    StaleVerdictError,
    ChecksumError,
    EmptyOutputError,
    RecordError,
    OutputExistsError,
    ReadBackError,
    LeanInstrumentError,
)


def fail_fast(compute: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap an asset's compute function: a deterministic error becomes a `Failure` that skips
    the asset's retry policy."""

    @functools.wraps(compute)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        try:
            return compute(*args, **kwargs)
        except DETERMINISTIC_ERRORS as exc:
            raise dg.Failure(
                description=f"{type(exc).__name__}: {exc}", allow_retries=False
            ) from exc

    return wrapped
