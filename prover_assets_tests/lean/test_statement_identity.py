"""The identity hashes of signatures and where a candidate stops repeating a trusted
preamble."""

from prover_assets.lean.lexer import code_tokens
from prover_assets.lean.signature import theorem_signature
from prover_assets.lean.statement_identity import preamble_difference, signature_sha


def test_the_displayed_theorem_after_a_lemma_has_its_own_signature():
    alone = "theorem t (x : ℕ) : x = x := by sorry"
    after_a_lemma = "lemma l : True := trivial\n" + alone
    assert signature_sha(theorem_signature(after_a_lemma)) == signature_sha(
        theorem_signature(alone)
    )


def test_a_preamble_is_repeated_exactly_when_every_trusted_token_comes_first_in_order():
    trusted = code_tokens("def f : ℕ := 1")
    assert preamble_difference(trusted, code_tokens("def f : ℕ := -- one\n 1\nlemma l")) is None
    assert preamble_difference(trusted, code_tokens("def f : ℕ := 2")) == 5
    assert preamble_difference(trusted, code_tokens("def g : ℕ := 1")) == 1
    assert preamble_difference(trusted, code_tokens("def f : ℕ :=")) == 5  # ends early
    assert preamble_difference(trusted, code_tokens('def f : ℕ := "1"')) == 5  # kind differs
    assert preamble_difference((), code_tokens("theorem t")) is None
