"""Code extraction, statement re-insertion, the compile view, and displayed-statement faithfulness."""

import hashlib

import pytest

from prover_assets.lean.extract import (
    ReinsertionError,
    compile_view,
    displayed_statement_faithful,
    displayed_theorem,
    dropped_command_tokens,
    extract_lean_code,
    reinsert_statement,
    reinsertion_keeps_statement,
)
from prover_assets.lean.lexer import code_tokens
from prover_assets.lean.protocol import GOEDEL_HEADER

STATEMENT = (
    GOEDEL_HEADER
    + "/-- Show that 2 + 2 = 4. -/\ntheorem mathd_algebra_1 (x : ℝ) (h₀ : x = 2) : x + x = 4 := by sorry"
)

LONG_COMPLETION = """### Detailed Proof Plan

1. Substitute `x = 2` using `h₀`.
2. Normalise numerals.

A first sketch of the tactics:

```tactics
subst h₀
norm_num
```

Here is an attempt in Lean 3 style that we discard:

```lean
theorem old : true := trivial
```

### Lean 4 Proof

```lean4
import Mathlib
import Aesop
set_option maxHeartbeats 400000
open BigOperators Real Nat Topology Rat

/-- Show that 2 + 2 = 4. -/
theorem mathd_algebra_1 (x : ℝ) (h₀ : x = 2) : x + x = 4 := by
  -- substitute and compute
  subst h₀
  norm_num
```

### Final check

```lean4
theorem mathd_algebra_1 (x : ℝ) (h₀ : x = 2) : x + x = 4 := by
  rw [h₀]; norm_num
```
"""


def test_last_lean4_block_wins_over_earlier_blocks_and_other_languages():
    code = extract_lean_code(LONG_COMPLETION)
    assert code == GOEDEL_HEADER + (
        "theorem mathd_algebra_1 (x : ℝ) (h₀ : x = 2) : x + x = 4 := by\n  rw [h₀]; norm_num"
    )


def test_lean_block_is_used_only_when_there_is_no_lean4_block():
    completion = "plan\n```lean\ntheorem a : True := trivial\n```\nmore"
    assert extract_lean_code(completion) == GOEDEL_HEADER + "theorem a : True := trivial\n"


def test_lean4_block_closed_without_newline_matches_the_second_pattern():
    completion = "```lean4\ntheorem a : True := trivial```"
    assert extract_lean_code(completion) == GOEDEL_HEADER + "theorem a : True := trivial"


def test_block_without_closing_fence_is_no_code():
    completion = "plan\n```lean4\ntheorem a : True := by\n  simp [very_long_proof_that_was_cut"
    assert extract_lean_code(completion) is None


def test_completion_without_block_is_no_code():
    assert extract_lean_code("I think the answer is 4.") is None


def test_reinsertion_keeps_the_problems_statement_and_the_proof_after_by():
    code = extract_lean_code(
        LONG_COMPLETION.replace(
            "(x : ℝ) (h₀ : x = 2) : x + x = 4 := by\n  rw", "(y : ℝ) : y = y := by\n  rw"
        )
    )
    result = reinsert_statement(STATEMENT, code)
    assert result == (
        "import Mathlib\nimport Aesop\n\nset_option maxHeartbeats 0\n\nopen BigOperators Real Nat Topology Rat\n\n\n"
        "theorem mathd_algebra_1 (x : ℝ) (h₀ : x = 2) : x + x = 4 := by \n  rw [h₀]; norm_num"
    )


def test_reinsertion_removes_comments_like_goedel():
    code = (
        GOEDEL_HEADER
        + "theorem mathd_algebra_1 (x : ℝ) (h₀ : x = 2) : x + x = 4 := by\n  /- a\n  block -/ subst h₀ -- done\n  norm_num"
    )
    assert reinsert_statement(STATEMENT, code).endswith(":= by \n   subst h₀ \n  norm_num")


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        (GOEDEL_HEADER + "theorem a : True := by\n  apply?", "apply?_or_exact?"),
        (GOEDEL_HEADER + "theorem a : True := by\n  exact?", "apply?_or_exact?"),
        (GOEDEL_HEADER + "lemma a : True := by trivial", "code_has_no_theorem"),
    ],
)
def test_reinsertion_failures_raise_with_a_reason(code, reason):
    with pytest.raises(ReinsertionError) as failure:
        reinsert_statement(STATEMENT, code)
    assert failure.value.reason == str(failure.value) == reason


def test_sorry_inside_a_statement_signature_is_mangled_by_goedels_rule():
    """Goedel deletes every `sorry` of the statement: such a problem is unwinnable (filtered)."""
    statement = "theorem s (sorry_free : ℕ) : sorry_free = sorry_free := by sorry"
    result = reinsert_statement(statement, GOEDEL_HEADER + "theorem s (x : ℕ) : x = x := by\n  rfl")
    assert result == "theorem s (_free : ℕ) : _free = _free := by \n  rfl"


def test_compile_view_drops_header_lines_and_indented_set_option():
    code = "import Mathlib\n  open Real in\nset_option maxHeartbeats 0\ntheorem a : True := by\n  set_option maxRecDepth 100 in\n  trivial\n"
    assert compile_view(code) == "theorem a : True := by\n  trivial\n"


def test_faithful_display_ignores_name_comments_and_whitespace():
    code = (
        GOEDEL_HEADER
        + "theorem other_name (x : ℝ)\n   (h₀ : x = 2) : -- c\n x + x = 4 := by\n  norm_num"
    )
    assert displayed_statement_faithful(code, STATEMENT)


def test_changed_display_is_not_faithful():
    code = (
        GOEDEL_HEADER + "theorem mathd_algebra_1 (x : ℝ) (h₀ : x = 2) : x + x ≤ 4 := by\n  norm_num"
    )
    assert not displayed_statement_faithful(code, STATEMENT)


def test_a_statement_without_a_theorem_sorry_cannot_take_a_proof():
    with pytest.raises(ReinsertionError) as failure:
        reinsert_statement(
            "lemma s : True := trivial", GOEDEL_HEADER + "theorem s : True := by\n  trivial"
        )
    assert str(failure.value) == "statement_has_no_theorem_sorry"


def test_a_line_comment_is_cut_at_its_first_dashes():
    code = (
        GOEDEL_HEADER
        + "theorem mathd_algebra_1 (x : ℝ) (h₀ : x = 2) : x + x = 4 := by\n  norm_num -- a -- b"
    )
    assert reinsert_statement(STATEMENT, code).endswith(":= by \n  norm_num")


def test_code_without_a_displayed_theorem_is_not_faithful():
    assert not displayed_statement_faithful(GOEDEL_HEADER + "lemma x : True := trivial", STATEMENT)


def sha_of_tokens(*tokens: str) -> str:
    return hashlib.sha256("\x1f".join(tokens).encode("utf-8")).hexdigest()


def test_the_proof_sha_covers_the_tokens_from_the_theorems_assignment_on():
    code = GOEDEL_HEADER + "theorem t (x : ℕ) : x = x := by\n  -- a comment\n  rfl"
    displayed = displayed_theorem(code)
    assert displayed.proof_sha == sha_of_tokens(":=", "by", "rfl")
    assert displayed.signature is not None and displayed.signature.name == "t"


def test_without_a_theorem_the_proof_sha_covers_the_code_after_the_protocols_header():
    code = GOEDEL_HEADER + "example : True := trivial"
    displayed = displayed_theorem(code)
    assert displayed.signature is None
    assert displayed.proof_sha == sha_of_tokens("example", ":", "True", ":=", "trivial")


def test_code_that_does_not_lex_has_the_sha_of_its_text_and_no_theorem():
    code = 'theorem t : True := by\n  exact "unterminated'
    displayed = displayed_theorem(code)
    assert displayed.signature is None
    assert displayed.proof_sha == hashlib.sha256(code.encode("utf-8")).hexdigest()
    assert not displayed.faithful_to(STATEMENT)


def test_faithfulness_ignores_the_theorems_name_but_not_its_signature():
    same = GOEDEL_HEADER + "theorem renamed (x : ℝ) (h₀ : x = 2) : x + x = 4 := by linarith"
    weaker = (
        GOEDEL_HEADER + "theorem mathd_algebra_1 (x : ℝ) (h₀ : x = 2) : x + x ≤ 4 := by linarith"
    )
    assert displayed_theorem(same).faithful_to(STATEMENT)
    assert not displayed_theorem(weaker).faithful_to(STATEMENT)
    assert not displayed_theorem(same).faithful_to("example : True := by sorry")


# Preamble problems: what the completion displays before its theorem, and re-insertion's
# fidelity to the trusted statement.

PREAMBLE_TRUSTED = GOEDEL_HEADER + "abbrev s : ℕ := 9\n\ntheorem t : s = 9 := by sorry"


def test_the_displayed_theorem_records_the_tokens_between_its_header_and_its_theorem():
    block = "import Mathlib\nopen Real\n\nabbrev s : ℕ := 9\nlemma l : s = 9 := rfl\ntheorem t : s = 9 := by\n  rfl"
    displayed = displayed_theorem(GOEDEL_HEADER + block)
    assert [t.text for t in displayed.before_theorem] == [
        "abbrev",
        "s",
        ":",
        "ℕ",
        ":=",
        "9",
        "lemma",
        "l",
        ":",
        "s",
        "=",
        "9",
        ":=",
        "rfl",
    ]
    assert displayed.faithful_to(PREAMBLE_TRUSTED)


def test_a_display_whose_preamble_differs_is_not_faithful_though_its_signature_matches():
    displayed = displayed_theorem(
        GOEDEL_HEADER + "abbrev s : ℕ := 8\ntheorem t : s = 9 := by\n  rfl"
    )
    assert displayed.signature_matches(PREAMBLE_TRUSTED)
    assert not displayed.faithful_to(PREAMBLE_TRUSTED)


def test_nothing_is_faithful_to_a_statement_without_a_theorem():
    displayed = displayed_theorem(GOEDEL_HEADER + "theorem t : s = 9 := by\n  rfl")
    assert not displayed.signature_matches("lemma l : True := trivial")
    assert not displayed.faithful_to("lemma l : True := trivial")


@pytest.mark.parametrize(
    ("statement", "keeps"),
    [
        (PREAMBLE_TRUSTED, True),
        (GOEDEL_HEADER + "theorem t (x : ℕ) : x = x := by sorry", True),
        # Goedel's comment removal is not Lean-aware: it cuts the string at `--`.
        (GOEDEL_HEADER + 'def s : String := "a -- b"\ntheorem t : s.length = 6 := by sorry', False),
        # Re-insertion deletes every `sorry` of the head, inside a name too.
        (GOEDEL_HEADER + "theorem t (sorry_x : ℕ) : sorry_x = sorry_x := by sorry", False),
        # The compile view drops a line that starts with `open`.
        (
            GOEDEL_HEADER
            + "def f : ℕ := 1\nopen Nat in\ndef g : ℕ := f\ntheorem t : g = 1 := by sorry",
            False,
        ),
        (GOEDEL_HEADER + "lemma l : True := by sorry", False),  # no theorem to re-insert into
        (GOEDEL_HEADER + "theorem t : True := by sorry /- never closed", False),
    ],
    ids=[
        "preamble",
        "bare",
        "dashes_in_a_string",
        "sorry_in_a_name",
        "open_line",
        "no_theorem",
        "no_lex",
    ],
)
def test_reinsertion_keeps_a_statement_exactly_when_lean_gets_its_own_code(statement, keeps):
    assert reinsertion_keeps_statement(statement) is keeps


# --- Protocol differentials: the exact reasons, hand-derived from Lean's reading and Goedel's.
DIFF_SIGNATURE = "theorem t (x : ℝ) (h₀ : 0 < x) : 0 < x ^ 2 := by"


def candidate(proof: str, before: str = "") -> str:
    return GOEDEL_HEADER + before + DIFF_SIGNATURE + "\n" + proof


@pytest.mark.parametrize(
    ("code", "reasons"),
    [
        (candidate("  positivity"), []),
        (candidate("  /-/- a -/ -/\n  positivity"), ["nested_comment", "comment_removal"]),
        (candidate("  /-- doc -/\n  positivity"), []),
        (candidate("  -- divide by (-20)/-10\n  positivity"), []),
        (
            candidate("  -- a /- b\n  positivity\n  -- -/"),
            ["comment_opener_in_line_comment", "comment_removal"],
        ),
        (
            candidate('  have : "a--b" = "a--b" := rfl\n  positivity'),
            ["comment_marker_in_string", "comment_removal"],
        ),
        (
            candidate('  have : r"a--b" = r"a--b" := rfl\n  positivity'),
            ["comment_marker_in_raw_string", "comment_removal"],
        ),
        (
            candidate("  have «a/-b» : True := trivial\n  positivity\n  -- -/"),
            ["comment_marker_in_quoted_name", "comment_removal"],
        ),
        (candidate("  exact (x -/- c -/- x)"), ["comment_removal"]),
        (candidate("  positivity", before="def mytheorem := 1\n"), []),
        (candidate("  exact my_theorem_about x"), []),
        (candidate(""), []),
        (candidate("  positivity").replace(":= by", ":=\n  by"), []),
        (
            GOEDEL_HEADER + "theorem t (h : 0 < 1 := by norm_num) : True :=",
            ["theorem"],
        ),
        (
            GOEDEL_HEADER + 'def s := "a theorem s := by"\nexample : True := trivial',
            ["theorem"],
        ),
        (
            candidate("  positivity", before='def s := " theorem t (x : ℝ) : 0 < 1 := by"\n'),
            ["theorem"],
        ),
        (candidate("  positivity\n  open_lemma h₀ x"), ["dropped_line"]),
    ],
    ids=[
        "none",
        "nested_right_after_the_opener",
        "doc_comment_is_no_nesting",
        "opener_in_a_line_comment_that_nothing_closes",
        "opener_in_a_line_comment_closed_later",
        "dashes_in_a_string",
        "dashes_in_a_raw_string",
        "opener_in_a_quoted_name",
        "two_dashes_joined_by_removal",
        "a_theorem_substring_before_the_theorem",
        "a_theorem_substring_in_the_proof",
        "an_empty_proof",
        "by_on_the_next_line",
        "the_signature_ends_the_text",
        "theorem_only_in_a_string",
        "theorem_in_a_string_first",
        "a_tactic_line_that_starts_with_open",
    ],
)
def test_protocol_differentials_name_each_disagreement(code, reasons):
    from prover_assets.lean.extract import protocol_differentials

    assert protocol_differentials(code) == [f"protocol_differential:{r}" for r in reasons]


@pytest.mark.parametrize(
    ("lines", "differs"),
    [
        ("set_option maxHeartbeats 400000 in\npositivity", False),
        ("x\ny\nset_option maxHeartbeats 400000 in\npositivity", False),
        ("set_option maxHeartbeats 400000\npositivity", False),
        ("set_option pp.all true in\npositivity", False),
        ("open Real in\npositivity", False),
        ("open Real Nat\npositivity", False),
        ("import Mathlib.Tactic\npositivity", False),
        ("import\npositivity", True),
        ("import A B\npositivity", True),
        ("open Real 1\npositivity", True),
        ("open\npositivity", True),
        ("set_option maxHeartbeats\npositivity", True),
        ('set_option maxHeartbeats "x"\npositivity', True),
        ("set_option maxHeartbeats 400000 in positivity\npositivity", True),
        ("opening_lemma\npositivity", True),
        ('set_option maxHeartbeats 400000 in "\nrun_tac x\n"\npositivity', True),
    ],
    ids=[
        "option_in",
        "option_after_short_lines",
        "option",
        "option_with_an_ident_value",
        "open_in",
        "open_names",
        "import",
        "bare_import",
        "import_of_two",
        "open_a_number",
        "bare_open",
        "option_without_value",
        "option_with_a_string",
        "option_carrying_a_tactic",
        "a_word_starting_with_open",
        "option_opening_a_string",
    ],
)
def test_a_dropped_line_must_be_one_plain_command_even_at_column_zero(lines, differs):
    from prover_assets.lean.extract import protocol_differentials

    # At column 0, a line's tokens touch its neighbours' lines: an off-by-one in the line
    # spans would take a neighbour's token for this line's.
    reasons = protocol_differentials(candidate(lines))
    assert (reasons == ["protocol_differential:dropped_line"]) is differs, reasons
    assert reasons in ([], ["protocol_differential:dropped_line"])


def test_a_statement_whose_last_line_the_compile_view_drops_cannot_carry_a_proof():
    from prover_assets.lean.extract import ReinsertionError, lean_input

    statement = GOEDEL_HEADER + "theorem t (h : True)\nopen_goal : True := by sorry"
    with pytest.raises(ReinsertionError) as refused:
        lean_input(statement, statement.replace("sorry", "trivial"))
    assert refused.value.reason == "statement_line_dropped"


def test_the_lean_input_is_the_compile_view_of_the_reinsertion_split_at_the_trusted_by():
    from prover_assets.lean.extract import lean_input

    statement = GOEDEL_HEADER + DIFF_SIGNATURE + " sorry"
    code = candidate("  set_option maxHeartbeats 400000 in\n  positivity")
    given = lean_input(statement, code)
    # By hand: the header's lines go, `sorry` goes, the option line goes.
    assert given.body == "\n\n\n" + DIFF_SIGNATURE + " \n  positivity"
    assert given.proof == "\n  positivity"  # the space after `by` is the trusted head's


def test_the_tokens_on_whole_plain_command_lines_are_those_the_compile_view_drops():
    code = (
        "theorem t : True := by\n  open Real in\n  set_option maxRecDepth 100 in\n"
        "  open_lemma a b\n  trivial"
    )
    tokens = code_tokens(code)
    unread = sorted(tokens[i].text for i in dropped_command_tokens(code, tokens))
    assert unread == sorted(["open", "Real", "in", "set_option", "maxRecDepth", "100", "in"])
    assert "trivial" in compile_view(code)
