"""The measured Lean-time history that orders the verifier's work."""

import math
from pathlib import Path

import pytest

from prover_assets.records import RecordError
from prover_assets.records.hashing import sha256_text
from prover_assets.verify.history import CostHistory, LeanCost

HARD = "theorem hard : True"
EASY = "theorem easy : True"


def cost(seq: int, statement: str, lean_s: float, code_chars: int = 100) -> LeanCost:
    return LeanCost(
        seq=seq,
        statement_sha256=sha256_text(statement),
        code_chars=code_chars,
        lean_s=lean_s,
        timed_out=False,
    )


def test_a_known_statement_is_predicted_at_its_runs_geometric_mean_scaled_by_relative_length():
    history = CostHistory(
        [
            cost(0, HARD, 1.0, code_chars=100),
            cost(1, HARD, 16.0, code_chars=400),
            cost(2, EASY, 3.0),
        ]
    )
    # geometric means: 4 s over 200 characters
    assert history.predicted_s(HARD, 200) == pytest.approx(4.0)
    assert history.predicted_s(HARD, 400) == pytest.approx(8.0)  # twice as long, twice the time
    assert history.predicted_s(EASY, 10_000) == pytest.approx(300.0)


def test_an_unknown_statement_is_predicted_from_its_length_at_the_median_seconds_per_char():
    # seconds per character 0.01, 0.2, 0.02: median 0.02
    history = CostHistory(
        [cost(0, HARD, 1.0, code_chars=100), cost(1, HARD, 4.0, code_chars=20), cost(2, EASY, 2.0)]
    )
    assert history.predicted_s("theorem new : True", 50) == pytest.approx(1.0)
    assert not history.knows("theorem new : True") and history.knows(HARD)


def test_without_history_the_length_alone_orders():
    history = CostHistory()
    assert [history.predicted_s(HARD, n) for n in (3, 70)] == [3.0, 70.0]


def test_a_run_measured_at_zero_seconds_still_ranks_below_a_longer_one():
    history = CostHistory([cost(0, HARD, 0.0), cost(1, EASY, 0.01)])
    assert 0 < history.predicted_s(HARD, 100) < history.predicted_s(EASY, 100)


def test_what_one_verifier_records_the_next_one_reads_each_from_its_own_file(tmp_path):
    first = CostHistory.open(tmp_path)
    first.record(HARD, 100, 2.0, timed_out=False)
    first.record(HARD, 400, 8.0, timed_out=True)
    second = CostHistory.open(tmp_path)  # open while the first still writes
    second.record(EASY, 40, 0.5, timed_out=False)
    first.close()
    second.close()
    assert len(list(tmp_path.glob("*.jsonl"))) == 2
    third = CostHistory.open(tmp_path)
    assert third.earlier_runs == 3 and third.statements == 2
    assert third.predicted_s(HARD, 200) == pytest.approx(math.sqrt(2.0 * 8.0))
    assert third.predicted_s(EASY, 40) == pytest.approx(0.5)


def test_a_history_without_a_folder_records_nothing(tmp_path):
    history = CostHistory()
    history.record(HARD, 10, 1.0, timed_out=False)
    assert history.recorded == 0 and not history.knows(HARD)


def one_run_recorded(folder) -> Path:
    """The file of a verifier that measured one run (3 s) of HARD."""
    history = CostHistory.open(folder)
    history.record(HARD, 10, 3.0, timed_out=False)
    history.close()
    (path,) = folder.glob("*.jsonl")
    return path


def test_a_line_a_killed_writer_left_unterminated_is_not_read(tmp_path):
    path = one_run_recorded(tmp_path)
    with open(path, "ab") as handle:
        handle.write(cost(1, HARD, 300.0).model_dump_json().encode()[:-3])
    reread = CostHistory.open(tmp_path)
    assert reread.earlier_runs == 1 and reread.predicted_s(HARD, 10) == pytest.approx(3.0)


def test_a_corrupt_history_line_is_refused_naming_its_file_and_line(tmp_path):
    path = one_run_recorded(tmp_path)
    with open(path, "ab") as handle:
        handle.write(b'{"seq": 1, "lean_s": -1}\n')
    with pytest.raises(RecordError, match=rf"{path.name}:2"):
        CostHistory.open(tmp_path)
