"""The self-test: a working instrument passes it; a REPL that accepts everything, a statement
check that does not look, or one that judges by type equality fails it, naming what did not
hold; and it runs under the batch's header, measuring each warmed worker."""

from prover_assets.lean.protocol import GOEDEL_HEADER
from prover_assets.verify.self_test import batch_header, self_test
from prover_assets_tests.lean_double import (
    double_backend,
    error_reply,
    repl_log,
    working_instrument,
)


def test_self_test_passes_on_a_working_instrument_and_fails_on_a_broken_one(tmp_path):
    with double_backend(tmp_path / "ok", working_instrument()) as backend:
        outcome = self_test(backend, 5.0, GOEDEL_HEADER.strip())
    assert outcome.passed, outcome.description
    with double_backend(tmp_path / "broken") as backend:  # accepts everything: broken
        outcome = self_test(backend, 5.0, GOEDEL_HEADER.strip())
    assert not outcome.passed
    assert "known-bad NOT rejected" in outcome.description
    assert not outcome.metadata["bad"]["held"]


def test_self_test_fails_when_the_statement_check_passes_a_changed_statement(tmp_path):
    # A REPL whose statement check answers without looking (every check elaborates).
    blind = {"match": {"regex": "(?s)^example .* <;> assumption$"}, "reply": {}}
    with double_backend(tmp_path, [*working_instrument(), blind]) as backend:
        outcome = self_test(backend, 5.0, GOEDEL_HEADER.strip())
    assert not outcome.passed
    assert "changed statement NOT refused by the statement check" in outcome.description


def test_self_test_fails_where_a_statement_relying_on_an_auto_bound_implicit_fails_its_check(
    tmp_path,
):
    # As a check of type equality would answer: `example : ∀ (h : a = 1), ...` binds `a` as its
    # own parameter, and `@t` then has another type.
    mismatch = {
        "match": {"regex": "^example \\(h : \\(a"},
        "reply": error_reply("type mismatch\n  @prover_assets_selftest_auto_bound", line=2),
    }
    with double_backend(tmp_path, [*working_instrument(), mismatch]) as backend:
        outcome = self_test(backend, 5.0, GOEDEL_HEADER.strip())
    assert not outcome.passed
    assert "auto-bound implicit NOT accepted" in outcome.description
    assert outcome.metadata["auto_bound"]["statement_errors"][0]["data"].startswith("type mis")


def test_the_self_test_runs_under_the_header_it_is_given(tmp_path):
    header = "import Mathlib\nset_option maxHeartbeats 400000"
    with double_backend(tmp_path, working_instrument()) as backend:
        outcome = self_test(backend, 5.0, header)
    assert outcome.passed
    # Both workers warmed, each measured for what a memory cap must allow.
    measured = outcome.metadata["warmed_repl_memory"]
    assert set(measured) == {"worker-0", "worker-1"}
    assert all(m["address_space_mb"] >= m["resident_mb"] > 0 for m in measured.values())
    imported = {e["request"]["cmd"] for e in repl_log(tmp_path) if "env" not in e["request"]}
    assert imported == {header}


def test_the_batch_header_is_the_one_most_problems_carry_ties_broken_by_text():
    assert batch_header([]) == GOEDEL_HEADER.strip()
    assert batch_header(["b", "a", "b"]) == "b"
    assert batch_header(["b", "a"]) == "a"
