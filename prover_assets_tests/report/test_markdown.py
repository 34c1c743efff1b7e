"""The report's Markdown helpers: shares, differences, durations, tables and the HTML page."""

from __future__ import annotations

import pytest

from prover_assets.report.markdown import (
    clock_time,
    markdown_table,
    percent,
    png_image,
    points,
    render_html,
)


@pytest.mark.parametrize(
    ("share", "text"), [(None, "null"), (0.0, "0.0%"), (0.125, "12.5%"), (1.0, "100.0%")]
)
def test_a_share_is_a_percentage_to_a_tenth(share, text):
    assert percent(share) == text


@pytest.mark.parametrize(
    ("difference", "text"), [(0.041, "+4.1"), (-0.008, "-0.8"), (0.0, "+0.0"), (0.5, "+50.0")]
)
def test_a_difference_is_signed_percentage_points(difference, text):
    assert points(difference) == text


@pytest.mark.parametrize(
    ("seconds", "text"), [(0, "0:00:00"), (125.4, "0:02:05"), (48000, "13:20:00")]
)
def test_a_duration_is_hours_minutes_seconds(seconds, text):
    assert clock_time(seconds) == text


def test_a_table_has_its_header_rule_and_one_line_per_row():
    assert markdown_table(["a", "b"], [[1, "x"], [2, "y"]]).splitlines() == [
        "| a | b |",
        "|---|---|",
        "| 1 | x |",
        "| 2 | y |",
    ]


def test_a_cell_is_null_a_float_to_four_figures_and_text_kept_on_one_line():
    table = markdown_table(["v"], [[None], [0.123456], [12345.678], [3], ["a|b\nc"]])
    assert table.splitlines()[2:] == [
        "| null |",
        "| 0.1235 |",
        "| 1.235e+04 |",
        "| 3 |",
        "| a\\|b c |",
    ]


def test_inline_html_of_the_document_passes_into_the_page_as_html():
    page = render_html('<span style="color:red">**INVALID**</span>', title="r")
    assert '<span style="color:red">' in page
    assert "&lt;span" not in page


def test_the_html_page_renders_the_tables_under_its_title():
    page = render_html("# Report\n\n" + markdown_table(["a"], [[1]]), title="R & <D>")
    assert "<title>R &amp; &lt;D&gt;</title>" in page
    assert "<h1>Report</h1>" in page
    assert "<th>a</th>" in page and "<td>1</td>" in page


def test_a_png_is_an_inline_image_of_its_bytes_in_base64():
    assert png_image(b"\x89PNG", "solved@8") == "![solved@8](data:image/png;base64,iVBORw==)"
