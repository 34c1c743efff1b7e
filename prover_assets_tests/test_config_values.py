"""A configuration argument holds data only: each shape of data passes, each piece of code is
named with its field."""

import pytest

from prover_assets.lean.config_values import config_reasons, is_config_name
from prover_assets.lean.lexer import code_tokens


def reasons(text):
    return config_reasons(code_tokens(text))


@pytest.mark.parametrize(
    "text",
    [
        "simp (config := {})",
        "simp (config := { decide := true })",
        "simp (config := {decide := true, zeta := false})",
        "simp (config := { zeta := false\n  beta := true })",
        "simp (config := { Simp.neutralConfig with arith := true })",
        "simp (config := { zeta := false : Simp.Config })",
        "linarith (config := { transparency := .reducible })",
        "linarith (config := { a := -1, b := 2.5, c := \"s\", d := 'c' })",
        "linarith (config := { a := [1, 2], b := ⟨1, 2⟩, c := (3), d := (), e := [] })",
        "linarith (config := { a := { b := { c := 1 } } })",
        "linarith (config := cfg)",
        "linarith (config := .default)",
        "aesop (simp_config := { zeta := false })",
    ],
)
def test_data_passes(text):
    assert reasons(text) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("linarith (config := { discharger := do pure () })", "banned:config:discharger:do"),
        ("linarith (config := { oracle := fun _ => x })", "banned:config:oracle:fun"),
        ("linarith (config := { oracle := λ _ => x })", "banned:config:oracle:λ"),
        ("linarith (config := { d := by simp })", "banned:config:d:by"),
        ("linarith (config := { d := ← g })", "banned:config:d:←"),
        ("linarith (config := { d := (· + 1) })", "banned:config:d:·"),
        ("linarith (config := { d := (. + 1) })", "banned:config:d:."),
        ("linarith (config := { d := `(tactic| simp) })", "banned:config:d:`"),
        ("linarith (config := { d := $x })", "banned:config:d:$"),
        ("linarith (config := { d := pure () })", "banned:config:d:("),
        ("linarith (config := { d := f x })", "banned:config:d:x"),
        ("linarith (config := { d := let x := 1; x })", "banned:config:d:let"),
        ("linarith (config := { a := 1, b := { c := fun x => x } })", "banned:config:c:fun"),
        ("linarith (config := do pure {})", "banned:config:config:do"),
        ("linarith (config := { a := 1 }", "banned:config:config:the end of the code"),
        ("linarith (config := { a := 1 } x)", "banned:config:config:x"),
        ("aesop (simp_config := { zeta := fun _ => true })", "banned:config:zeta:fun"),
    ],
)
def test_code_is_named_with_its_field(text, expected):
    assert reasons(text) == [expected]


def test_each_configuration_argument_is_judged_once_per_reason():
    text = "simp (config := { a := do x }) (simp_config := { b := fun x => x })"
    assert reasons(text) == ["banned:config:a:do", "banned:config:b:fun"]


def test_named_arguments_that_are_not_configurations_are_not_judged():
    # `(f := fun i => i)` is an ordinary named argument of a term, elaborated, never evaluated.
    assert reasons("exact Finset.sum_congr (f := fun i => i) rfl") == []
    assert not is_config_name("configuration")
    assert is_config_name("simp_config")
