"""Statement normalisation, shape checks and identity hashes."""

import json
import re
from pathlib import Path

import pytest

from prover_assets.lean.protocol import GOEDEL_HEADER
from prover_assets.lean.signature import theorem_signature
from prover_assets.lean.statement_identity import (
    signature_alpha_sha,
    signature_sha,
)
from prover_assets.lean.statements import (
    StatementError,
    alpha_sha,
    normalise_statement,
    parse_statement,
    statement_check_command,
    statement_sha,
)

DATA = Path(__file__).parents[2] / "prover_assets/data/goedel-prover-v2"
HEADER = "import Mathlib\nimport Aesop\n\nset_option maxHeartbeats 0\n\nopen BigOperators Real Nat Topology Rat\n\n"

# The statement check's tactic line, written out by hand.
APPLY = ":= by\n  apply _root_."
ASSUMPTION = " <;> assumption"


def minif2f_rows():
    return [json.loads(line) for line in (DATA / "minif2f.jsonl").read_text().splitlines()]


def test_normalisation_is_byte_identical_to_goedels_rule_on_all_minif2f():
    rows = minif2f_rows()
    assert len(rows) == 244
    for row in rows:
        goedel = row["lean4_code"].split(":= by")[0] + ":= by sorry"
        assert normalise_statement(row["lean4_code"]) == goedel, row["name"]


def mobench_rows():
    return [json.loads(line) for line in (DATA / "MOBench.jsonl").read_text().splitlines()]


def test_on_mobench_goedels_rule_holds_byte_for_byte_wherever_the_theorems_by_is_the_only_one():
    rows = mobench_rows()
    single = [r for r in rows if r["lean4_code"].count(":= by") == 1]
    assert len(rows) - len(single) == 7  # an `instance ... := by`, a lemma, ... in the preamble
    for row in single:
        goedel = row["lean4_code"].split(":= by")[0] + ":= by sorry"
        assert normalise_statement(row["lean4_code"]) == goedel, row["name"]


def test_a_by_in_the_preamble_is_kept_and_only_the_theorems_own_is_normalised():
    rows = [r for r in mobench_rows() if r["lean4_code"].count(":= by") > 1]
    for row in rows:
        code = row["lean4_code"]
        own = code.rindex(":= by")  # by hand: each of these ends with the theorem's `:= by sorry`
        assert code[own:].strip() == ":= by sorry"
        assert normalise_statement(code) == code[:own] + ":= by sorry", row["name"]
        assert parse_statement(normalise_statement(code)).supported, row["name"]


def test_normalisation_raises_where_goedel_would_cut_the_statement():
    text = "theorem t (h : ∀ x, (fun y => y) x = x := by simp) : True := by sorry"
    with pytest.raises(StatementError, match="exactly one"):
        normalise_statement(text)


def test_normalisation_accepts_the_line_broken_form():
    text = "theorem t (x : ℕ) : x = x :=\n  by sorry"
    assert normalise_statement(text) == "theorem t (x : ℕ) : x = x := by sorry"


def test_normalisation_raises_without_any_by():
    with pytest.raises(StatementError):
        normalise_statement("theorem t : True := trivial")


def test_parse_supported_statement_reports_header_and_name():
    parsed = parse_statement(HEADER + "/-- doc -/\ntheorem foo_bar (x : ℝ) : x = x := by sorry")
    assert parsed.supported
    assert parsed.reason is None
    assert parsed.theorem_name == "foo_bar"
    assert parsed.header_commands == (
        "import Mathlib",
        "import Aesop",
        "set_option maxHeartbeats 0",
        "open BigOperators Real Nat Topology Rat",
    )


@pytest.mark.parametrize(
    "declaration",
    [
        "def f : ℕ := 3",
        "noncomputable abbrev s : ℝ := 1",
        "structure P where\n  x : ℕ",
        "inductive C where\n  | a\nderiving DecidableEq",
        "variable (n : ℕ)",
        "universe u",
        "instance : Inhabited ℕ := ⟨0⟩",
        'notation "ℕ²" => ℕ × ℕ',
        "class K (α : Type) where\n  k : α",
        "@[simp] lemma l : 1 = 1 := rfl",
        "attribute [local instance] Classical.propDecidable",
        "noncomputable section",
        "namespace N\ndef f : ℕ := 3\nend N",
    ],
)
def test_a_preamble_declaration_is_supported_and_kept_as_the_source_has_it(declaration):
    text = HEADER + "\n/-- doc -/\n" + declaration + "\n\ntheorem t : True := by sorry"
    parsed = parse_statement(text)
    assert (parsed.supported, parsed.reason) == (True, None)
    assert parsed.preamble == "/-- doc -/\n" + declaration
    assert parsed.theorem_name == "t"


@pytest.mark.parametrize(
    ("declaration", "reason"),
    [
        ("lemma l : 1 = 1 := by sorry", "preamble:sorry"),
        ("axiom a : 1 = 2", "preamble:axiom"),
        ('macro "m" : tactic => `(tactic| rfl)', "preamble:macro"),
        ("def f : ℕ := 3\nopen Real in\ndef g : ℝ := π", "preamble:open"),
        ("def f : ℕ := 3\nset_option maxRecDepth 100 in\ndef g : ℕ := 3", "preamble:set_option"),
        ("def f : ℕ := by native_decide", "preamble:native_decide"),
        ("example : True := trivial", "preamble:example"),
        ("#eval 1\ndef f : ℕ := 3", "command:#eval"),
        ("namespace N\nend M", "preamble:end"),
        ("end N", "preamble:end"),
        ("namespace N\nsection S\nend N", "preamble:end"),
        ("namespace\ndef f : ℕ := 3", "preamble:namespace"),
        ("namespace N\nend N\nend N", "preamble:end"),
        ("private foo", "private"),
        ("theorem other : 1 = 1 := by sorry", "multiple_theorems"),
    ],
)
def test_parse_rejects_each_unsupported_declaration_with_its_reason(declaration, reason):
    if reason == "multiple_theorems":
        text = HEADER + "theorem t : True := by sorry\n" + declaration
    else:
        text = HEADER + declaration + "\n\ntheorem t : True := by sorry"
    parsed = parse_statement(text)
    assert not parsed.supported
    assert parsed.reason == reason
    assert parsed.namespace == ""


def test_the_namespace_a_preamble_leaves_open_qualifies_the_theorem():
    text = HEADER + "namespace A.B\nsection S\ndef f : ℕ := 3\nend S\ntheorem t : f = 3 := by sorry"
    parsed = parse_statement(text)
    assert (parsed.namespace, parsed.qualified_name) == ("A.B", "A.B.t")
    bare = parse_statement(HEADER + "theorem t : True := by sorry")
    assert (bare.qualified_name, bare.namespace, bare.preamble, bare.preamble_tokens) == (
        "t",
        "",
        "",
        (),
    )


def test_nested_namespaces_join_and_closed_sections_and_namespaces_leave_none():
    nested = "namespace A\nnamespace B\nsection\n@[simp] lemma l : 1 = 1 := rfl\nend\n"
    parsed = parse_statement(HEADER + nested + "theorem t : True := by sorry")
    assert (parsed.supported, parsed.qualified_name) == (True, "A.B.t")
    closed = "namespace A\ndef f : ℕ := 3\nend A\nsection S\nend S\n"
    parsed = parse_statement(HEADER + closed + "theorem t : f = 3 := by sorry")
    assert (parsed.supported, parsed.namespace, parsed.qualified_name) == (True, "", "t")


def test_a_preamble_without_a_header_is_the_text_before_the_theorem():
    parsed = parse_statement("def f : ℕ := 1\ntheorem t : f = 1 := by sorry")
    assert (parsed.supported, parsed.header, parsed.preamble) == (True, "", "def f : ℕ := 1")


@pytest.mark.parametrize(
    ("after", "reason"),
    [
        ("@[simp] theorem u : True := trivial", "attribute"),
        ("noncomputable def f : ℕ := 1", "def"),
        ("noncomputable foo", "noncomputable"),
        ("#check t", "command:#check"),
    ],
)
def test_anything_after_the_theorem_is_unsupported_with_its_reason(after, reason):
    parsed = parse_statement(HEADER + "theorem t : True := by sorry\n" + after)
    assert (parsed.supported, parsed.reason) == (False, reason)


def test_a_modifier_ending_a_text_without_a_theorem_is_its_own_reason():
    assert parse_statement(HEADER + "noncomputable").reason == "noncomputable"


def test_normalisation_without_a_theorem_keeps_goedels_rule():
    assert normalise_statement("lemma l : True := by trivial") == "lemma l : True := by sorry"


def test_a_statement_that_does_not_lex_has_no_hash_and_says_why():
    with pytest.raises(StatementError, match=r"^the statement does not lex: "):
        statement_sha("theorem t : True := by sorry /- never closed")


def test_the_identity_hash_is_sha256_of_the_kinded_token_texts_joined_by_unit_separators():
    import hashlib

    keys = ["symbol:(", "ident:x", "symbol::", "ident:ℕ", "symbol:)", "symbol::"]
    keys += ["ident:x", "symbol:=", "ident:x"]
    expected = hashlib.sha256("\x1f".join(keys).encode("utf-8")).hexdigest()
    assert statement_sha("theorem t (x : ℕ) : x = x := by sorry") == expected
    preamble = ["ident:def", "ident:f", "symbol::=", "number:1"]
    with_preamble = hashlib.sha256("\x1f".join([*preamble, "\x1e", *keys]).encode()).hexdigest()
    assert statement_sha("def f := 1\ntheorem t (x : ℕ) : x = x := by sorry") == with_preamble


def test_parse_rejects_two_by_markers_with_the_count():
    parsed = parse_statement("theorem t (h : True := by trivial) : True := by sorry")
    assert parsed.reason == "by_count:2"


def test_parse_rejects_open_in_in_the_header():
    parsed = parse_statement("open Real in\ntheorem t : π > 0 := by sorry")
    assert parsed.reason == "open_in"


def test_parse_rejects_text_without_a_theorem():
    assert parse_statement(HEADER).reason == "no_theorem"


BASE = "theorem a1 (x y : ℝ) (h₀ : 0 < x) (h₁ : x < y) : ∀ z : ℝ, z > y → x < z := by sorry"


def test_statement_sha_ignores_theorem_name_whitespace_and_comments():
    renamed = BASE.replace("a1", "completely_different")
    respaced = "theorem a1\n  (x y : ℝ)   (h₀ : 0 < x) -- a comment\n (h₁ : x < y) :\n ∀ z : ℝ, /- c -/ z > y → x < z := by sorry"
    assert statement_sha(renamed) == statement_sha(BASE)
    assert statement_sha(respaced) == statement_sha(BASE)


def test_consistent_renaming_keeps_alpha_sha_and_changes_statement_sha():
    renamed = "theorem a1 (p q : ℝ) (hp : 0 < p) (hpq : p < q) : ∀ w : ℝ, w > q → p < w := by sorry"
    assert alpha_sha(renamed) == alpha_sha(BASE)
    assert statement_sha(renamed) != statement_sha(BASE)


def test_alpha_sha_follows_binders_of_set_builder_sum_and_exists():
    one = "theorem a (n : ℕ) : ∑ i in Finset.range n, i = {k : ℕ | ∃ m, k = m}.ncard := by sorry"
    two = "theorem b (t : ℕ) : ∑ j in Finset.range t, j = {q : ℕ | ∃ r, q = r}.ncard := by sorry"
    assert alpha_sha(one) == alpha_sha(two)


def test_inconsistent_renaming_changes_alpha_sha():
    swapped = "theorem a1 (x y : ℝ) (h₀ : 0 < y) (h₁ : x < y) : ∀ z : ℝ, z > y → x < z := by sorry"
    assert alpha_sha(swapped) != alpha_sha(BASE)


@pytest.mark.parametrize(
    "variant",
    [
        BASE.replace("ℝ", "Real"),  # known limit: notation vs name
        "theorem a1 (x y : ℝ) (h₁ : x < y) (h₀ : 0 < x) : ∀ z : ℝ, z > y → x < z := by sorry",  # swapped
        "theorem a1 (x y : ℝ) (h₀ : 0 < x) (h₁ : x < y) (h₂ : 0 < y) : ∀ z : ℝ, z > y → x < z := by sorry",
    ],
    ids=["real_vs_R", "swapped_hypotheses", "extra_hypothesis"],
)
def test_known_limits_change_both_hashes(variant):
    assert statement_sha(variant) != statement_sha(BASE)
    assert alpha_sha(variant) != alpha_sha(BASE)


def test_hash_of_text_without_theorem_raises():
    with pytest.raises(StatementError):
        statement_sha("def f := 1")


def theorem(body: str) -> str:
    return f"theorem a (n : ℕ) : {body} := by sorry"


def test_the_prompt_statement_carries_the_preamble_exactly_as_the_source_has_it():
    (row,) = [r for r in mobench_rows() if r["problem_id"] == "Imo2006P3"]
    statement = normalise_statement(row["lean4_code"])
    parsed = parse_statement(statement)
    source = row["lean4_code"]
    start = source.index("/-!")
    assert parsed.preamble == source[start : source.index("theorem imo2006_p3")].strip()
    assert "noncomputable abbrev solution : ℝ := 9 * Real.sqrt 2 / 32" in parsed.preamble
    assert statement == source  # it already ends `:= by sorry`: the prompt is the source


def test_a_preamble_statement_is_checked_from_its_signature_at_the_root_of_its_namespace():
    statement = (
        HEADER
        + "variable {R : Type} [CommRing R]\nnamespace Game\ndef P (x : R) : R := x\n"
        + "theorem sym (x y : R) :\n    P x = P y ↔ x = y := by sorry"
    )
    assert statement_check_command(statement) == (
        "example (x y : R) :\n    P x = P y ↔ x = y := by\n  apply _root_.Game.sym <;> assumption"
    )


@pytest.mark.parametrize(
    ("one", "two"),
    [
        ("∃! k, k = n", "∃! m, m = n"),
        ("(fun _ x => x) 1 n = n", "(fun _ y => y) 1 n = n"),
        ("∀ (x y : ℕ), x + y = y + x + n", "∀ (p q : ℕ), p + q = q + p + n"),
        ("∀ x y : ℕ, x + y = n", "∀ p q : ℕ, p + q = n"),
        ("{x | x > n} = ∅", "{y | y > n} = ∅"),
        ("{x : ℕ | x > n} = ∅", "{y : ℕ | y > n} = ∅"),
        ("{(x, y) | x < y} = ∅", "{(p, q) | p < q} = ∅"),
        ("({A} : Set ℕ) ∪ {x | x > n} = ∅", "({A} : Set ℕ) ∪ {y | y > n} = ∅"),
    ],
    ids=[
        "exists_unique",
        "fun_with_placeholder",
        "forall_group",
        "forall_names",
        "set_builder",
        "typed_set_builder",
        "set_builder_of_pairs",
        "literal_then_builder",
    ],
)
def test_renaming_a_bound_name_keeps_alpha_sha(one, two):
    assert alpha_sha(theorem(one)) == alpha_sha(theorem(two))
    assert statement_sha(theorem(one)) != statement_sha(theorem(two))


@pytest.mark.parametrize(
    ("one", "two"),
    [
        ("∑ i in A, i = n", "∑ i in B, i = n"),
        ("{x : A | x > n} = ∅", "{x : B | x > n} = ∅"),
        ("({A, C} : Set ℕ) = {n}", "({B, C} : Set ℕ) = {n}"),
        ("({A} : Set ℕ) ∪ {x | x > C} = ∅", "({B} : Set ℕ) ∪ {x | x > C} = ∅"),
        ("{x | x > A ∨ x = n} = ∅", "{x | x > B ∨ x = n} = ∅"),
    ],
    ids=[
        "sum_over_a_constant",
        "set_builder_type",
        "set_literal",
        "literal_before_builder",
        "builder_body",
    ],
)
def test_a_free_name_is_never_taken_for_a_bound_one(one, two):
    assert alpha_sha(theorem(one)) != alpha_sha(theorem(two))


def test_normalisation_raises_where_goedel_would_cut_at_a_name_starting_with_by():
    """`:= byte` is no tactic block, but Goedel's literal split would cut there."""
    text = "theorem t (x : ℕ := byte) : x = x := by sorry"
    with pytest.raises(StatementError, match="found 2"):
        normalise_statement(text)


def test_a_parsed_statement_holds_its_header_commands_name_and_signature_offsets():
    text = (
        "import Mathlib\nimport Aesop\nset_option maxHeartbeats 400000\n"
        "open scoped BigOperators Real\n\ntheorem t (x : ℕ) : x = x := by sorry"
    )
    parsed = parse_statement(text)
    assert (parsed.supported, parsed.reason, parsed.theorem_name) == (True, None, "t")
    assert parsed.header_commands == (
        "import Mathlib",
        "import Aesop",
        "set_option maxHeartbeats 400000",
        "open scoped BigOperators Real",
    )
    assert parsed.header == "\n".join(parsed.header_commands)
    signature = parsed.signature
    assert [t.text for t in signature.tokens] == ["(", "x", ":", "ℕ", ")", ":", "x", "=", "x"]
    assert (signature.theorem_start, signature.assign_start) == (
        text.index("theorem"),
        text.index(":= by"),
    )


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("theorem (x : ℕ) : x = x := by sorry", "no_signature"),
        ("theorem : True := by sorry", "no_signature"),
        ("theorem", "no_signature"),
        ("open", "no_theorem"),
        ("#check Nat\ntheorem t : True := by sorry", "command:#check"),
        ("foo\ntheorem t : True := by sorry", "unexpected_token:foo"),
        ("noncomputable foo\ntheorem t : True := by sorry", "noncomputable"),
        ("theorem t : True := by sorry\nnoncomputable", "noncomputable"),
        ("theorem t : True := by sorry\nnoncomputable def", "def"),
        ("open Real in\ntheorem t : True := by sorry", "open_in"),
        ("noncomputable def", "no_theorem"),
    ],
    ids=[
        "no_name",
        "no_name_before_the_colon",
        "a_bare_theorem",
        "a_bare_open",
        "a_command_first",
        "a_stray_token_first",
        "noncomputable_name",
        "noncomputable_at_the_end",
        "noncomputable_def_at_the_end",
        "header_open_in",
        "a_modifier_and_its_command_without_a_theorem",
    ],
)
def test_each_unsupported_statement_says_why(text, reason):
    parsed = parse_statement(text)
    assert (parsed.supported, parsed.reason, parsed.namespace) == (False, reason, "")
    assert (parsed.theorem_name, parsed.signature) == (None, None)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("theorem broken : := by sorry", "empty_type"),
        ("theorem broken (x : ℕ) : := by sorry", "empty_type"),
        ("theorem binders_alone (x : ℕ) (h : x = x) := by sorry", "no_type"),
        ("theorem no_colon := by sorry", "no_type"),
    ],
)
def test_a_signature_that_states_nothing_is_unsupported_with_its_reason(text, reason):
    parsed = parse_statement(text)
    assert (parsed.supported, parsed.reason) == (False, reason)


def test_a_colon_inside_a_binder_is_not_the_statements_type():
    assert parse_statement("theorem t (x : ℕ) : x = x := by sorry").supported
    assert parse_statement("theorem t : ∀ x : ℕ, x = x := by sorry").supported


def test_a_statement_that_does_not_lex_is_unsupported_with_nothing_parsed():
    parsed = parse_statement("theorem t : True := by sorry /- never closed")
    assert (parsed.supported, parsed.theorem_name, parsed.header, parsed.header_commands) == (
        False,
        None,
        "",
        (),
    )
    assert parsed.reason.startswith("lex_error:")


def test_a_preamble_is_part_of_the_statements_identity_and_its_comments_are_not():
    theorem = "theorem t : solution = 9 := by sorry"
    trusted = HEADER + "abbrev solution : ℕ := 9\n" + theorem
    commented = HEADER + "/-- the answer -/\nabbrev solution : ℕ :=  -- nine\n  9\n" + theorem
    edited = HEADER + "abbrev solution : ℕ := 8\n" + theorem
    assert statement_sha(commented) == statement_sha(trusted) != statement_sha(edited)
    assert alpha_sha(commented) == alpha_sha(trusted) != alpha_sha(edited)
    assert statement_sha(trusted) != statement_sha(HEADER + theorem)
    parsed = parse_statement(trusted)
    assert (parsed.statement_sha, parsed.alpha_sha) == (statement_sha(trusted), alpha_sha(trusted))


def test_without_a_preamble_the_identity_is_the_signatures_alone_as_before():
    text = HEADER + "theorem t (x : ℕ) (h : 0 < x) : 0 < x ^ 2 := by sorry"
    signature = theorem_signature(text)
    assert statement_sha(text) == signature_sha(signature)
    assert alpha_sha(text) == signature_alpha_sha(signature)


def test_a_statement_without_a_theorem_has_no_hash_and_says_so():
    with pytest.raises(
        StatementError, match=r"^no `theorem <name> \.\.\. :=` found in the statement$"
    ):
        statement_sha("lemma l : True := trivial")


@pytest.mark.parametrize(
    ("statement", "command"),
    [
        (
            "theorem t (x : ℕ) (h : 0 < x) : 0 < x + 1 := by sorry",
            f"example (x : ℕ) (h : 0 < x) : 0 < x + 1 {APPLY}t{ASSUMPTION}",
        ),
        ("theorem t : 1 + 1 = 2 := by sorry", f"example : 1 + 1 = 2 {APPLY}t{ASSUMPTION}"),
        (
            "theorem t (h : (a : ℕ) = 1) : a + 1 = 2 := by sorry",
            f"example (h : (a : ℕ) = 1) : a + 1 = 2 {APPLY}t{ASSUMPTION}",
        ),
        (
            "theorem Foo.bar {y : ℕ} [NeZero y] (f : ℕ → (ℕ → ℕ)) : f y y = y := by sorry",
            f"example {{y : ℕ}} [NeZero y] (f : ℕ → (ℕ → ℕ)) : f y y = y {APPLY}Foo.bar{ASSUMPTION}",
        ),
        ("lemma l : True := trivial", None),
        ("theorem t : True := by sorry /- never closed", None),
        ("theorem t := by sorry", None),
        ("theorem t (x : ℕ) := by sorry", None),
    ],
    ids=[
        *["binders", "no_binders", "auto_bound", "implicit_instance_nested", "no_theorem"],
        *["no_lex", "no_colon", "binders_without_type"],
    ],
)
def test_the_statement_check_states_the_trusted_signature_as_an_axiom_the_theorem_must_match(
    statement, command
):
    assert statement_check_command(statement) == command


@pytest.mark.parametrize(
    ("one", "two"),
    [
        (
            "theorem a (n : ℕ) : ∀ (f : ℕ → (ℕ → ℕ)) (k : ℕ), f k k = n := by sorry",
            "theorem a (n : ℕ) : ∀ (g : ℕ → (ℕ → ℕ)) (m : ℕ), g m m = n := by sorry",
        ),
        (
            "theorem a (f : (ℕ → ℕ)) (k : ℕ) : f k = k := by sorry",
            "theorem a (g : (ℕ → ℕ)) (m : ℕ) : g m = m := by sorry",
        ),
        (
            "theorem a (x : ℕ × ℕ) : x.1 = x.2 := by sorry",
            "theorem a (y : ℕ × ℕ) : y.1 = y.2 := by sorry",
        ),
    ],
    ids=["quantified_group_after_nested_brackets", "binder_after_nested_brackets", "projection"],
)
def test_renaming_survives_nested_brackets_and_projections(one, two):
    assert alpha_sha(one) == alpha_sha(two)


def test_a_statement_without_header_lines_has_an_empty_header():
    parsed = parse_statement("theorem t : True := by sorry")
    assert (parsed.supported, parsed.header, parsed.header_commands) == (True, "", ())


def test_a_let_in_the_statements_type_does_not_end_its_signature():
    # MOBench's 2006_A4 and six others state `let T := ...` inside the theorem's type.
    statement = GOEDEL_HEADER + "theorem t (n : ℕ) :\n    let m := n + 1\n    0 < m := by sorry"
    parsed = parse_statement(statement)
    assert [t.text for t in parsed.signature.tokens] == [
        *["(", "n", ":", "ℕ", ")", ":", "let", "m", ":=", "n", "+", "1", "0", "<", "m"]
    ]
    assert statement_check_command(statement) == (
        f"example (n : ℕ) :\n    let m := n + 1\n    0 < m {APPLY}t{ASSUMPTION}"
    )


def test_a_theorem_name_in_guillemets_is_the_plain_name():
    parsed = parse_statement(GOEDEL_HEADER + "theorem «t» : True := by sorry")
    assert (parsed.supported, parsed.qualified_name) == (True, "t")


def test_a_theorem_name_lean_would_print_in_guillemets_is_unsupported():
    parsed = parse_statement(GOEDEL_HEADER + "theorem «a b» : True := by sorry")
    assert (parsed.supported, parsed.reason) == (False, "theorem_name")


def test_every_real_statement_is_checked_from_its_own_signature_bytes_at_the_root():
    # Independently of the lexer: the signature is the text between `theorem <name>` and the
    # statement's final `:= by sorry`, so the example's header is elaborated from the very bytes
    # the theorem's was (the same auto-bound implicits, the same section variables in scope).
    checked = 0
    for row in [*minif2f_rows(), *mobench_rows()]:
        statement = row["formal_statement"].rstrip()
        parsed = parse_statement(statement)
        if not parsed.supported:
            continue
        name = parsed.qualified_name.rsplit(".", 1)[-1]
        start = statement.rindex(f"theorem {name}") + len(f"theorem {name}")
        end = re.search(r":=\s*by(\s+sorry)?\s*$", statement).start()
        signature = statement[start:end].strip()
        while signature.startswith("--"):  # a comment before the first binder is no part of it
            signature = signature.split("\n", 1)[1].strip()
        assert statement_check_command(statement) == (
            f"example {signature} := by\n  apply _root_.{parsed.qualified_name} <;> assumption"
        ), row.get("name")
        checked += 1
    assert checked == 244 + 359
