"""Markdown rendering shared by the report and the asset metadata: tables, clock times,
percentages and points, the report's plots, linked as files beside it (`plots/<name>`) or
embedded as data URIs, and the document as one HTML page."""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "CURVE_PLOT",
    "LIFT_PLOT",
    "PLOTS_DIR",
    "SPREAD_PLOT",
    "TIME_PLOT",
    "clock_time",
    "embedded_plots",
    "file_image",
    "markdown_table",
    "percent",
    "plot_name",
    "png_image",
    "points",
    "render_html",
]

PLOTS_DIR = "plots"  # beside report.md in the bundle


def clock_time(seconds: float) -> str:
    """A duration as h:mm:ss, rounded to the second (`0:02:05`, `13:20:00`)."""
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


def percent(share: float | None) -> str:
    """A share as a percentage to a tenth (`12.5%`); `null` for a share not computed."""
    return "null" if share is None else f"{100 * share:.1f}%"


def points(difference: float) -> str:
    """A difference of shares in percentage points, signed (`+4.1`, `-0.8`)."""
    return f"{100 * difference:+.1f}"


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


def _data_uri(png: bytes) -> str:
    return f"data:image/png;base64,{base64.b64encode(png).decode('ascii')}"


def png_image(png: bytes, alt: str) -> str:
    """A PNG as an inline image (a data URI), which the Dagster UI renders in markdown."""
    return f"![{alt}]({_data_uri(png)})"


def plot_name(kind: str, eval_set: str, cap: int) -> str:
    """The file name of one plot of one eval set and cap (e.g. `pass_at_k_minif2f_c256.png`)."""
    return f"{kind}_{eval_set}_c{cap}.png"


LIFT_PLOT = "correction_lift.png"
CURVE_PLOT = "iteration_curve.png"
TIME_PLOT = "round_time.png"
SPREAD_PLOT = "seed_spread.png"


def file_image(name: str, alt: str) -> str:
    """A plot as the file beside the report (`plots/<name>`)."""
    return f"![{alt}]({PLOTS_DIR}/{name})"


_PLOT_LINK = re.compile(rf"\]\({PLOTS_DIR}/([^)]+)\)")


def embedded_plots(markdown: str, plots: Mapping[str, bytes]) -> str:
    """`markdown` with each plot it links (`plots/<name>`) embedded as a data URI: the document
    stands alone (the HTML page, the UI's markdown). A link to a plot not in `plots` is refused."""

    def embedded(link: re.Match[str]) -> str:
        name = link.group(1)
        if name not in plots:
            raise ValueError(f"the report links {PLOTS_DIR}/{name}, which is not among its plots")
        return f"]({_data_uri(plots[name])})"

    return _PLOT_LINK.sub(embedded, markdown)


_HTML_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 72rem; margin: 2rem auto; padding: 0 1rem;
       line-height: 1.45; color: #222; }}
table {{ border-collapse: collapse; margin: 0.8rem 0; font-size: 0.85rem; }}
th, td {{ border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: left; }}
th {{ background: #f4f4f4; }}
img {{ max-width: 100%; }}
code {{ font-size: 0.85em; }}
</style></head><body>
{body}
</body></html>
"""


def render_html(markdown: str, title: str) -> str:
    """The Markdown document as one self-contained HTML page (its images already embedded)."""
    from markdown_it import MarkdownIt

    body = MarkdownIt("commonmark").enable("table").render(markdown)  # its preset passes HTML
    return _HTML_PAGE.format(title=html.escape(title), body=body)
