"""Markdown rendering shared by the report and the asset metadata."""

from __future__ import annotations

import base64
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["clock_time", "markdown_table", "png_image"]


def clock_time(seconds: float) -> str:
    """A duration as h:mm:ss, rounded to the second (`0:02:05`, `13:20:00`)."""
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


def _cell(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A Markdown table of `rows` under `headers`."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(_cell(value) for value in row) + " |" for row in rows]
    return "\n".join(lines)


def png_image(png: bytes, alt: str) -> str:
    """A PNG as an inline image (a data URI), which the Dagster UI renders in markdown."""
    return f"![{alt}](data:image/png;base64,{base64.b64encode(png).decode('ascii')})"
