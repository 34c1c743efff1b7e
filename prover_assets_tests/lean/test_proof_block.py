"""The theorem's tactic block ends where Lean's layout or a command keyword ends it; nothing may
stand after it."""

import pytest

from prover_assets.lean.gate_data import COMMANDS
from prover_assets.lean.lexer import code_tokens
from prover_assets.lean.proof_block import (
    ALSO_TACTICS,
    COMMAND_KEYWORDS,
    block_end_reason,
    proof_tokens,
)

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


# A command needs no new line: Lean ends the tactic where its syntax ends, and a command keyword
# on the same line starts a command there. Expected reasons written by hand from the keywords'
# declarations at the pin (`prover_assets/data/gate/mathlib_commands.jsonl`).
@pytest.mark.parametrize(
    ("proof", "reason"),
    [
        (" positivity compile_inductive% Nat", "banned:after_proof:compile_inductive%"),
        # the `%` the text's last token: the keyword is still whole
        ("\n  positivity compile_inductive%", "banned:after_proof:compile_inductive%"),
        ("\n  positivity assert_not_exists Foo", "banned:after_proof:assert_not_exists"),
        ('\n  positivity library_note "a" /-- b -/', "banned:after_proof:library_note"),
        ("\n  positivity lemma u : True := trivial", "banned:after_proof:lemma"),
        ("\n  positivity proof_wanted u : False", "banned:after_proof:proof_wanted"),
        (
            "\n  nlinarith [sq_nonneg x] erase_aesop_rules [h]",
            "banned:after_proof:erase_aesop_rules",
        ),
        (
            "\n  positivity with_weak_namespace Real def s := 1",
            "banned:after_proof:with_weak_namespace",
        ),
        ("\n  positivity variable? [Fact (1 < 2)]", "banned:after_proof:variable?"),
        (
            "\n  positivity gen_injective_theorems% Nat",
            "banned:after_proof:gen_injective_theorems%",
        ),
        ("\n  positivity register_option o : Bool := {}", "banned:after_proof:register_option"),
        ("\n  positivity test_extern Nat.add 1 2", "banned:after_proof:test_extern"),
        ("\n  positivity include h₀", "banned:after_proof:include"),
        ("\n  positivity; unset_option maxHeartbeats", "banned:after_proof:unset_option"),
        (
            "\n  positivity\n  whatsnew in\n  example : True := trivial",
            "banned:after_proof:whatsnew",
        ),
    ],
    ids=[
        "compile_inductive_percent",
        "percent_as_the_last_token",
        "assert_not_exists",
        "library_note",
        "lemma",
        "proof_wanted",
        "aesop_after_a_bracket",
        "with_weak_namespace",
        "variable_question_mark",
        "core_percent_command",
        "register_option",
        "test_extern",
        "mathport_include",
        "after_a_semicolon",
        "at_the_tactics_column",
    ],
)
def test_a_command_keyword_on_the_proofs_line_ends_the_block(proof, reason):
    assert judged(proof) == reason


def test_a_command_after_a_multiline_string_stands_on_the_strings_last_line():
    # The string's second line starts at column 0 inside the literal: no new line of code starts.
    assert judged('\n  trace "a\n"assert_not_exists Foo') == "banned:after_proof:assert_not_exists"
    assert judged('\n  trace "a\n"\n  positivity') is None


def test_a_command_keyword_inside_brackets_is_refused_as_where_the_block_ends():
    # Lean fails there (a bracket wants a term); no honest proof writes it.
    assert judged("\n  nlinarith [sq_nonneg x, lemma]") == "banned:after_proof:lemma"


@pytest.mark.parametrize(
    "proof",
    [
        "\n  open Real in positivity",
        "\n  open Real in\n  positivity",
        "\n  set_option maxHeartbeats 400000 in positivity",
        "\n  count_heartbeats in\n  positivity",
        "\n  count_heartbeats! 3 in positivity",
        "\n  have lemma_1 : 0 < x := h₀\n  have h_include := lemma_1\n  positivity",
        "\n  have «lemma» : 0 < x := h₀\n  exact pow_pos «lemma» 2",
        "\n  have e : Function.End ℝ := id\n  positivity",
        "\n  have compile_inductive : 0 < x := h₀\n  exact pow_pos compile_inductive 2",
        "\n  have c := compile_inductive % 2\n  positivity",
        "\n  exact compile_inductive",
        '\n  have : "compile_inductive% Nat" = "compile_inductive% Nat" := rfl\n  positivity',
        "\n  -- library_note: positivity closes it\n  /- assert_not_exists Foo -/ positivity",
        "\n  have : (7 : ℕ) % 2 = 1 := by norm_num\n  positivity",
    ],
    ids=[
        "open_in_on_the_tactic_line",
        "open_in_line",
        "option_in_on_the_tactic_line",
        "count_heartbeats_tactic",
        "count_heartbeats_bang_tactic",
        "keyword_inside_identifiers",
        "quoted_keyword_is_an_identifier",
        "keyword_as_a_dotted_component",
        "percent_keyword_without_its_percent",
        "percent_keyword_spaced_from_a_percent",
        "percent_keyword_word_last",
        "keywords_in_a_string",
        "keywords_in_comments",
        "percent_operator",
    ],
)
def test_honest_proofs_that_write_a_command_keyword_lean_reads_as_no_command(proof):
    assert judged(proof) is None


def test_the_keywords_also_tactics_are_commands_of_the_data_and_stay_allowed():
    names = {command.name for command in COMMANDS}
    assert set(ALSO_TACTICS) == {"open", "set_option", "count_heartbeats", "count_heartbeats!"}
    assert set(ALSO_TACTICS) <= names
    assert names - set(ALSO_TACTICS) == COMMAND_KEYWORDS


@pytest.mark.parametrize("keyword", sorted(COMMAND_KEYWORDS))
def test_every_command_keyword_of_the_data_ends_the_block_on_the_tactics_line(keyword):
    assert judged(f"\n  positivity {keyword} x") == f"banned:after_proof:{keyword}"
