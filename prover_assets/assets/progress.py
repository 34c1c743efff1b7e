"""Progress of long steps: counts, rate and ETA in the run's logs and as asset observations."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import dagster as dg

from prover_assets.assets.metadata import StepContext, display_number
from prover_assets.report.markdown import clock_time

__all__ = ["ProgressReporter"]


def _eta(seconds: float | None) -> str:
    return "unknown" if seconds is None else clock_time(seconds)


class ProgressReporter:
    """Progress of one step, called as often as the step likes (each sample, each optimizer
    step): it logs the first call, then at most every `log_every_s` seconds, and the last
    (`final`, or the first to reach `total`); it records an observation (visible in the asset's timeline)
    at most every `observe_every_s` seconds and with the last."""

    def __init__(
        self,
        context: StepContext,
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
                dg.AssetObservation(
                    asset_key=self.context.asset_key_for_output(), metadata=metadata
                )
            )


def _elapsed(since: float | None, now: float) -> float:
    """Seconds since `since`; infinite when nothing happened yet (the first call is due)."""
    return float("inf") if since is None else now - since
