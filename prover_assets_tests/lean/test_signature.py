"""A theorem's signature: a decimal literal that nothing types is read as `Float`."""

import pytest

from prover_assets.lean.signature import float_numerals


@pytest.mark.parametrize(
    ("statement", "floats"),
    [
        ("theorem t : 2.5 * 2 = 5 := by sorry", True),
        ("theorem t : (2.5 : ℝ) * 2 = 5 := by sorry", False),
        ("theorem t (x : ℝ) (h : x = 2.5) : 2 * x = 5 := by sorry", False),
        ("theorem t (x : ℝ) (h : (1 - 0.3) * 0.8 = 0.56) : x = x := by sorry", True),
        ("theorem t (f : ℝ → ℝ) (h : f 1 = 1.5) : f 1 > 1 := by sorry", False),
        ("theorem t : Real.sqrt 2 < 1.5 := by sorry", False),
        ("theorem t (q : ℚ) (h : q = 1e-3) : q < 1 := by sorry", False),
        ("theorem t (h : 1e-3 < 1) : True := by sorry", True),
        ("theorem t (p : ℕ × ℕ × ℕ) (h : p.2.1 = 1) : True := by sorry", False),
        ("theorem t (n : ℕ) (h : n = 0x1E) : True := by sorry", False),
        ("theorem t (n : ℕ) (h : n = 15) : n * 2 = 30 := by sorry", False),
        ("theorem t {x : ℝ} [Fact (0 < x)] : x ^ 2 > 0.0 := by sorry", False),
        ("theorem t : (2.5 * 2 = 5) := by sorry", True),
        ("theorem t (x : ℝ) (y : ℝ) (h : x = 2.5) : y = y := by sorry", False),
        ("theorem t (z : ℂ) (h : z.re = 0.5) : True := by sorry", False),
        ("theorem t (h : (1 + 1) * 0.5 = 1) : True := by sorry", True),
        ("theorem t (n : ℕ) (h : n = 0b101) : True := by sorry", False),
        ("lemma l : 2.5 = 2.5 := by sorry", False),
    ],
    ids=[
        "bare_decimals",
        "ascribed",
        "real_variable",
        "untyped_hypothesis",
        "real_function",
        "real_constant",
        "scientific_rational",
        "untyped_scientific",
        "projection",
        "hex",
        "integers",
        "implicit_binder",
        "parenthesised",
        "second_of_two_typed_binders",
        "typed_name_with_a_field",
        "after_a_nested_group",
        "binary",
        "no_theorem",
    ],
)
def test_a_decimal_literal_nothing_types_is_read_as_float(statement, floats):
    assert float_numerals(statement) is floats
