"""The reference elaboration of evaluation problems, preamble problems included (the REPL
double answers; what is sent is read from its log)."""

from prover_assets.lean.canary import canary_name
from prover_assets.verify.elaboration import ElaborationStatus, elaborate_references
from prover_assets_tests.factories import PREAMBLE, PREAMBLE_STATEMENT, make_problem
from prover_assets_tests.lean_double import double_backend, error_reply, repl_log


def test_a_preamble_problem_elaborates_with_its_preamble_and_only_its_theorem_renamed(tmp_path):
    problem = make_problem(statement=PREAMBLE_STATEMENT)
    with double_backend(tmp_path) as backend:
        (result,) = elaborate_references([problem], backend, budget_s=5.0)
    assert result.status is ElaborationStatus.ELABORATED
    in_header_env = [
        e["request"]["cmd"] for e in repl_log(tmp_path) if e["request"].get("env") == 0
    ]
    (sent,) = [cmd for cmd in in_header_env if canary_name(cmd) is None]  # the canary: env 0 too
    assert sent.lstrip("\n").startswith(PREAMBLE)
    assert "noncomputable abbrev solution : ℝ := 9 * Real.sqrt 2 / 32" in sent
    assert "theorem _ref (x : ℝ) (hx : f x = solution) : 0 < f x := by sorry" in sent


def test_a_preamble_that_does_not_elaborate_is_an_error_with_lean_s_message(tmp_path):
    problem = make_problem(statement=PREAMBLE_STATEMENT)
    rules = [{"match": {"substring": "def f (x"}, "reply": error_reply("unknown identifier")}]
    with double_backend(tmp_path, rules) as backend:
        (result,) = elaborate_references([problem], backend, budget_s=5.0)
    assert result.status is ElaborationStatus.ERROR
    assert result.errors[0]["data"] == "unknown identifier"
