"""Retries of the asset steps: a deterministic error fails its step at once (`fail_fast`); a
retry that made no progress is refused (`start_attempt`, over `operations.retries`)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dagster as dg

from prover_assets.assets.metadata import StepContext
from prover_assets.config import ConfigError
from prover_assets.operations.retries import StalledRetry, lines_in, record_attempt
from prover_assets.records import OutputExistsError, RecordError
from prover_assets.records.outputs import (
    ChecksumError,
    EmptyOutputError,
    StaleOutputError,
    supersede,
)
from prover_assets.records.staleness import StaleVerdictError
from prover_assets.resources import LeanInstrumentError
from prover_assets.sft.stages import ReadBackError
from prover_assets.verify.stages import GenerationFailed

__all__ = ["DETERMINISTIC_ERRORS", "fail_fast", "guard_retry_progress", "start_attempt"]


def guard_retry_progress(context: StepContext, folder: Path, progress: int) -> None:
    """Retry only what moves: on a retry, fail as stalled (and stop retrying) when the previous
    attempt of this run ended where it started; every attempt's starting count is recorded."""
    try:
        record_attempt(folder, context.run.run_id, context.retry_number, progress)
    except StalledRetry as stalled:
        raise dg.Failure(
            description=str(stalled),
            metadata={"done": stalled.progress, "attempts": stalled.attempts},
            allow_retries=False,
        ) from stalled


def start_attempt(
    context: StepContext, folder: Path, stream_file: str, *, recompute: bool = False
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
    # The generation a verify op followed failed for good: a retry meets the same failed step.
    GenerationFailed,
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
