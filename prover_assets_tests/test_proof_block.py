"""The theorem's tactic block ends where Lean's layout ends it; nothing may stand after it."""

import pytest

from prover_assets.lean.lexer import code_tokens
from prover_assets.lean.proof_block import block_end_reason, proof_tokens

SIGNATURE = "theorem t (x : ℝ) (h₀ : 0 < x) : 0 < x ^ 2 := by"


def judged(proof):
    text = SIGNATURE + proof
    return block_end_reason(text, proof_tokens(code_tokens(text)))


@pytest.mark.parametrize(
    "proof",
    [
        "\n  positivity",
        " positivity",
        "\n  have h : 0 < x := by\n    exact h₀\n  positivity",
        "\n  nlinarith [sq_nonneg (x - 1),\nsq_nonneg (x + 1)]",
        "\n  cases' le_total x 1 with h h <;>\n nlinarith",
        "\n  nlinarith [sq_nonneg x]\n  <;> linarith",
        "\n  -- a comment at column 0 is no token\n-- nor this one\n  positivity",
        "\n  rcases h₀.lt_or_lt with h | h\n  match x with\n| _ => positivity",
        "\n  calc 0 < x := h₀\n_ ≤ x := le_rfl",
        "\n  positivity\n<;> simp",
        "",
    ],
    ids=[
        "plain",
        "on_the_by_line",
        "nested_block",
        "inside_brackets",
        "after_an_operator",
        "operator_at_the_column",
        "comments",
        "match_alternative_at_column_0",
        "calc_step_at_column_0",
        "sequence_at_column_0",
        "empty",
    ],
)
def test_a_block_that_holds_every_token(proof):
    assert judged(proof) is None


@pytest.mark.parametrize(
    ("proof", "reason"),
    [
        ("\n  positivity\nbinder_predicate x", "banned:after_proof:binder_predicate"),
        ("\n  positivity\n attribute [simp] t", "banned:after_proof:attribute"),
        (" positivity\n  exact h₀", "banned:after_proof:exact"),
        ("\n  (positivity))\n  exact h₀", "banned:after_proof:)"),
        ("\n  positivity\n@[simp] theorem u : True := trivial", "banned:after_proof:@["),
        ("\npositivity", "banned:unindented_proof"),
    ],
    ids=["column_0", "left_of_the_column", "left_of_the_by_line", "unmatched", "attr", "col_0"],
)
def test_what_stands_after_the_block_is_named(proof, reason):
    assert judged(proof) == reason


def test_a_term_proof_has_no_tactic_block():
    assert proof_tokens(code_tokens("theorem t : True := trivial")) is None
    assert proof_tokens(code_tokens("def f := 1")) is None


def test_a_text_cut_off_at_its_proof_has_no_block_or_an_empty_one():
    # A sample truncated right after `:=` (the generation's token limit) is no tactic block.
    assert proof_tokens(code_tokens("theorem t : True :=")) is None
    block = proof_tokens(code_tokens("theorem t : True := by"))
    assert block is not None and len(block) == 0


def test_a_block_on_the_by_line_has_the_column_of_its_first_tactic():
    # `positivity` stands one column right of the signature's last character.
    column = len(SIGNATURE) + 1
    assert judged(" positivity\n" + " " * column + "exact h₀") is None
    assert judged(" positivity\n" + " " * (column - 1) + "exact h₀") == "banned:after_proof:exact"


def test_a_line_that_continues_the_proof_keeps_its_later_tokens_whatever_their_column():
    # The alternative's `=>` stands left of the tactics' column, on a line `|` continues: Lean's
    # `match` reads it whatever its column.
    assert judged("\n      match x with\n| y => positivity") is None
