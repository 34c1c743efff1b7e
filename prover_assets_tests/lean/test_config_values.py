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


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("linarith (config :=", "banned:config:config:the end of the code"),
        ("linarith (config := {", "banned:config:config:the end of the code"),
        ("linarith (config := { a :=", "banned:config:a:the end of the code"),
        ("linarith (config := { a := [1,", "banned:config:a:the end of the code"),
    ],
    ids=["no_value", "open_structure", "no_field_value", "open_list"],
)
def test_a_configuration_cut_off_is_refused_at_the_end_of_the_code(text, expected):
    assert reasons(text) == [expected]


def test_only_a_parenthesised_named_argument_is_a_configuration():
    # A local named `config` is a `let`, not a named argument: nothing is evaluated as one.
    assert reasons("let config := { zeta := false }\n  simp (config := config)") == []


def test_a_negative_number_ends_after_its_digits():
    assert reasons("linarith (config := { a := -1 })") == []
    assert reasons("linarith (config := -1)") == []
    assert reasons("linarith (config := { a := -1 x })") == ["banned:config:a:x"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("linarith (config := { d := .fun })", "banned:config:d:fun"),
        ("linarith (config := { do pure () })", "banned:config:config:do"),
        ("linarith (config := { d := (pure ()) })", "banned:config:d:("),
        ("linarith (config := { d := [1 x] })", "banned:config:d:x"),
        ("simp (config := { : Simp.Config x })", "banned:config:config:x"),
        ("simp (config := { : by simp })", "banned:config:config:by"),
    ],
    ids=["dotted_code_word", "structure_start", "applied_in_parens", "list", "type", "type_code"],
)
def test_code_inside_a_shape_is_named_with_the_field_holding_it(text, expected):
    assert reasons(text) == [expected]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("linarith (config := { 1 := 2 })", "banned:config:config:1"),
        ("linarith (config := { do := 2 })", "banned:config:config:do"),
    ],
    ids=["number", "code_word"],
)
def test_a_field_is_assigned_only_to_a_name(text, expected):
    assert reasons(text) == [expected]
