"""Where a training loop stands, as its progress callbacks are told: one shape for the demo's
format tuning in process and for the LoRA trainer's child (read back from its metrics log)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["LineTail", "TrainingProgress", "TrainingProgressCallback"]


@dataclass(frozen=True)
class TrainingProgress:
    """Optimizer step `step` of `steps` done; the loss at that step; the tokens trained and the
    seconds spent since this run (or resume) began at step `first_step`."""

    step: int
    steps: int
    loss: float | None
    tokens: int
    elapsed_s: float
    first_step: int = 0

    def steps_per_s(self) -> float | None:
        done = self.step - self.first_step
        return done / self.elapsed_s if done > 0 and self.elapsed_s > 0 else None

    def tokens_per_s(self) -> float | None:
        return self.tokens / self.elapsed_s if self.tokens and self.elapsed_s > 0 else None

    def extra(self) -> dict[str, Any]:
        """The figures shown beside step/total: loss and tokens/s, rounded for reading."""
        shown: dict[str, Any] = {}
        if self.loss is not None:
            shown["loss"] = round(self.loss, 4)
        if (rate := self.tokens_per_s()) is not None:
            shown["tokens_per_s"] = round(rate, 1)
        return shown


TrainingProgressCallback = Callable[[TrainingProgress], None]


class LineTail:
    """The complete lines appended to a file since the last call (a line still being written
    waits for its newline); a missing file has none yet."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0

    def new_lines(self) -> list[str]:
        if not self.path.exists():
            return []
        with open(self.path, "rb") as handle:
            handle.seek(self._offset)
            data = handle.read()
        complete = data[: data.rfind(b"\n") + 1]
        self._offset += len(complete)
        return complete.decode("utf-8").splitlines()
