"""An evaluation set's counts reconcile: every row in is supported or not, and every supported
row is written or cut by the configured limit, each count said."""

from __future__ import annotations

import pytest

from prover_assets.problems.stages import EvalSetResult
from prover_assets.problems.validity import check_counts_reconcile


def counts(*, rows_in: int, supported: int, unsupported: int, limited_out: int, written: int):
    return EvalSetResult(
        rows_in=rows_in,
        supported=supported,
        unsupported=unsupported,
        limited_out=limited_out,
        written=written,
        unsupported_reasons={"preamble": unsupported} if unsupported else {},
    )


def test_rows_cut_by_the_limit_are_counted_in_the_reconciliation():
    outcome = check_counts_reconcile(
        counts(rows_in=244, supported=244, unsupported=0, limited_out=220, written=24)
    )
    assert outcome.passed
    assert outcome.description == (
        "244 in = 244 supported + 0 unsupported; 24 written = 244 supported - 220 beyond the "
        "configured limit"
    )
    assert outcome.metadata["limited_out"] == 220


@pytest.mark.parametrize(
    ("rows_in", "supported", "unsupported", "limited_out", "written", "holds"),
    [
        (360, 359, 1, 0, 359, True),
        (360, 359, 0, 0, 359, False),  # a row neither supported nor unsupported
        (244, 244, 0, 220, 23, False),  # a supported row neither written nor cut
        (244, 244, 0, 0, 245, False),  # more written than supported
    ],
)
def test_counts_that_do_not_add_up_fail(
    rows_in, supported, unsupported, limited_out, written, holds
):
    found = counts(
        rows_in=rows_in,
        supported=supported,
        unsupported=unsupported,
        limited_out=limited_out,
        written=written,
    )
    assert check_counts_reconcile(found).passed is holds
