"""What every part of the report's summary is: a frozen model that refuses unknown fields; and
the McNemar cell a problem falls in."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

__all__ = ["Cell", "SummaryModel"]

Cell = Literal["both", "baseline_only", "candidate_only", "neither"]


class SummaryModel(BaseModel):
    """A part of `summary.json`: frozen, and a field it does not know is refused on reading."""

    model_config = ConfigDict(extra="forbid", frozen=True)
