"""The report's contract: `summary.json` is the typed summary, written and read back whole; one
of another shape is refused saying what to do; the markdown is rendered once and the HTML and
the UI embed that one document's plots."""

from __future__ import annotations

import base64
import json
import re

import pytest

from prover_assets.report.markdown import PLOTS_DIR, embedded_plots
from prover_assets.report.stages import build_report
from prover_assets.report.summary import ReportSummary, read_summary
from prover_assets_tests.report.test_analysis import settings, written_pair


@pytest.fixture
def built(tmp_path) -> tuple[ReportSummary, str, dict[str, bytes]]:
    return build_report([written_pair(tmp_path / "runs")], [], None, settings())


def test_a_written_summary_reads_back_equal_to_what_was_computed(built, tmp_path):
    summary, _, _ = built
    path = tmp_path / "summary.json"
    path.write_text(summary.model_dump_json(indent=1))
    assert read_summary(path) == summary


def test_a_summary_of_another_shape_is_refused_naming_the_file_and_what_to_do(built, tmp_path):
    summary, _, _ = built
    older = json.loads(summary.model_dump_json())
    older["systems"]["minif2f cap 64"][0]["nominal_cap"] = 64  # a field of an older version
    path = tmp_path / "summary.json"
    path.write_text(json.dumps(older))
    with pytest.raises(ValueError, match="move its folder aside to rebuild") as refused:
        read_summary(path)
    assert str(path) in str(refused.value) and "nominal_cap" in str(refused.value)


def test_the_embedded_document_is_the_markdown_with_each_plot_it_links_inlined(built):
    _, markdown, plots = built
    linked = re.findall(rf"\]\({PLOTS_DIR}/([^)]+)\)", markdown)
    embedded = embedded_plots(markdown, plots)
    inlined = re.findall(r"\]\(data:image/png;base64,([^)]+)\)", embedded)
    assert linked and [base64.b64decode(data) for data in inlined] == [
        plots[name] for name in linked
    ]
    # nothing else changed: putting the links back gives the markdown again
    names = iter(linked)
    restored = re.sub(
        r"\]\(data:image/png;base64,[^)]+\)", lambda _: f"]({PLOTS_DIR}/{next(names)})", embedded
    )
    assert restored == markdown


def test_a_link_to_a_plot_that_was_not_drawn_is_refused():
    with pytest.raises(ValueError, match=r"plots/missing\.png, which is not among its plots"):
        embedded_plots("![a plot](plots/missing.png)", {"drawn.png": b"png"})
