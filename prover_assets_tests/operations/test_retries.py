"""The record of a step's attempts: a retry is refused exactly when it starts where the run's
previous attempt started; the record survives a torn line and refuses a malformed one."""

from __future__ import annotations

import pytest

from prover_assets.operations.retries import (
    ATTEMPTS_FILE,
    Attempt,
    StalledRetry,
    lines_in,
    record_attempt,
)
from prover_assets.records import RecordError, read_records


def at(seconds: float):
    return lambda: seconds


# (attempts recorded before: (run, retry, progress)), this attempt, refused?
STALL_TABLE = [
    ((), ("r1", 0, 0), False),  # a first attempt is never a stall
    ((("r1", 0, 5),), ("r1", 1, 5), True),  # the retry starts where the attempt before did
    ((("r1", 0, 5),), ("r1", 1, 6), False),  # it moved
    ((("r1", 0, 5), ("r1", 1, 6)), ("r1", 2, 6), True),  # compared with the last one only
    ((("r1", 0, 5), ("r1", 1, 6)), ("r1", 2, 5), False),
    ((("r0", 3, 5),), ("r1", 1, 5), False),  # another run's attempts do not count
    ((("r1", 0, 5),), ("r1", 0, 5), False),  # not a retry: a step run again by hand
]


@pytest.mark.parametrize(("before", "now", "refused"), STALL_TABLE)
def test_a_retry_is_refused_exactly_when_it_starts_where_the_runs_last_attempt_did(
    tmp_path, before, now, refused
):
    for index, (run, retry, progress) in enumerate(before):
        record_attempt(tmp_path, run, retry, progress, clock=at(float(index)))
    run, retry, progress = now
    if refused:
        with pytest.raises(StalledRetry, match=f"attempt {retry + 1} starts at {progress} done"):
            record_attempt(tmp_path, run, retry, progress, clock=at(99.0))
    else:
        record_attempt(tmp_path, run, retry, progress, clock=at(99.0))
    recorded = read_records(tmp_path / ATTEMPTS_FILE, Attempt) if before or not refused else []
    expected = [*before, *(() if refused else (now,))]
    assert [(a.run_id, a.retry_number, a.progress) for a in recorded] == list(expected)


def test_a_stalled_retry_counts_the_runs_attempts_it_would_have_made(tmp_path):
    record_attempt(tmp_path, "r1", 0, 2, clock=at(1.0))
    record_attempt(tmp_path, "r1", 1, 3, clock=at(2.0))
    with pytest.raises(StalledRetry) as stalled:
        record_attempt(tmp_path, "r1", 2, 3, clock=at(3.0))
    assert (stalled.value.progress, stalled.value.attempts) == (3, 3)
    assert str(stalled.value) == (
        "stalled: attempt 3 starts at 3 done, exactly where attempt 2 started; not retrying a "
        "step that makes no progress (see the previous attempt's error)"
    )


def test_a_line_torn_by_a_kill_is_dropped_and_the_attempts_before_it_kept(tmp_path):
    record_attempt(tmp_path, "r1", 0, 4, clock=at(1.0))
    with open(tmp_path / ATTEMPTS_FILE, "ab") as handle:
        handle.write(b'{"run_id": "r1", "retry_nu')  # killed mid-write
    with pytest.raises(StalledRetry):  # the kept attempt is still the one compared
        record_attempt(tmp_path, "r1", 1, 4, clock=at(2.0))
    record_attempt(tmp_path, "r1", 1, 7, clock=at(3.0))
    recorded = read_records(tmp_path / ATTEMPTS_FILE, Attempt)
    assert [(a.retry_number, a.progress, a.at) for a in recorded] == [(0, 4, 1.0), (1, 7, 3.0)]


def test_a_malformed_attempt_line_is_refused_naming_its_file_and_line(tmp_path):
    record_attempt(tmp_path, "r1", 0, 4, clock=at(1.0))
    with open(tmp_path / ATTEMPTS_FILE, "ab") as handle:
        handle.write(b'{"run_id": "r1", "retry_number": -1, "progress": 0, "at": 2.0}\n')
    with pytest.raises(RecordError, match=f"{ATTEMPTS_FILE}:2"):
        record_attempt(tmp_path, "r1", 1, 5, clock=at(3.0))


def test_lines_in_counts_records_of_a_missing_or_partial_stream(tmp_path):
    path = tmp_path / "s.jsonl"
    assert lines_in(path) == 0
    path.write_bytes(b'{"a": 1}\n{"b": 2}\n{"torn')
    assert lines_in(path) == 2
