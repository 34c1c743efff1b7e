"""Statement normalisation, shape checks and identity hashes."""

import json
from pathlib import Path

import pytest

from prover_assets.lean.statements import (
    StatementError,
    alpha_sha,
    normalise_statement,
    parse_statement,
    statement_sha,
)

DATA = Path(__file__).parents[1] / "prover_assets/data/goedel-prover-v2"
HEADER = "import Mathlib\nimport Aesop\n\nset_option maxHeartbeats 0\n\nopen BigOperators Real Nat Topology Rat\n\n"


def minif2f_rows():
    return [json.loads(line) for line in (DATA / "minif2f.jsonl").read_text().splitlines()]


def test_normalisation_is_byte_identical_to_goedels_rule_on_all_minif2f():
    rows = minif2f_rows()
    assert len(rows) == 244
    for row in rows:
        goedel = row["lean4_code"].split(":= by")[0] + ":= by sorry"
        assert normalise_statement(row["lean4_code"]) == goedel, row["name"]


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
    ("declaration", "reason"),
    [
        ("def f : ℕ := 3", "def"),
        ("noncomputable abbrev s : ℝ := 1", "abbrev"),
        ("structure P where\n  x : ℕ", "structure"),
        ("inductive C where\n  | a", "inductive"),
        ("variable (n : ℕ)", "variable"),
        ("instance : Inhabited ℕ := ⟨0⟩", "instance"),
        ('notation "ℕ²" => ℕ × ℕ', "notation"),
        ("class K (α : Type) where\n  k : α", "class"),
        ("@[simp] lemma l : 1 = 1 := rfl", "attribute"),
        ("lemma l : 1 = 1 := by sorry", "lemma"),
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
