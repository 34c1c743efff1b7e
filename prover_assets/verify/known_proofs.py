"""The self-test's proofs, whose verdicts are known: one good and one bad, a preamble problem
with its proof and a theorem of another statement under its name, a statement relying on an
auto-bound implicit, and one under section variables with an honest proof and one that assumes
what the statement does not give. The self-test judges them (`verify.self_test`); the
simulated Lean answers them as the pinned Lean does (`verify.simulator`)."""

from __future__ import annotations

__all__ = [
    "SELF_TEST_AUTO_BOUND_GOOD",
    "SELF_TEST_AUTO_BOUND_STATEMENT",
    "SELF_TEST_BAD",
    "SELF_TEST_GOOD",
    "SELF_TEST_PREAMBLE_CHANGED",
    "SELF_TEST_PREAMBLE_GOOD",
    "SELF_TEST_PREAMBLE_STATEMENT",
    "SELF_TEST_VARIABLE_GOOD",
    "SELF_TEST_VARIABLE_STATEMENT",
    "SELF_TEST_VARIABLE_WEAKER",
]


SELF_TEST_GOOD = "theorem prover_assets_selftest_good : (2 : ℕ) + 2 = 4 := by\n  norm_num"


SELF_TEST_BAD = "theorem prover_assets_selftest_bad : (2 : ℕ) + 2 = 5 := by\n  norm_num"


# A preamble problem for the self-test: its trusted statement, the proof of it, and a theorem of
# another statement under its name (which the statement check must refuse).
SELF_TEST_PREAMBLE = "abbrev prover_assets_selftest_answer : ℕ := 4\n\n"


SELF_TEST_PREAMBLE_STATEMENT = (
    SELF_TEST_PREAMBLE
    + "theorem prover_assets_selftest_preamble : prover_assets_selftest_answer = 2 + 2 := by sorry"
)


SELF_TEST_PREAMBLE_GOOD = (
    SELF_TEST_PREAMBLE
    + "theorem prover_assets_selftest_preamble : prover_assets_selftest_answer = 2 + 2 := by\n  rfl"
)


SELF_TEST_PREAMBLE_CHANGED = (
    SELF_TEST_PREAMBLE + "theorem prover_assets_selftest_preamble : True := by\n  trivial"
)


# The statement check under the pinned Lean's rules (`statement_check_command`): a signature
# that relies on an auto-bound implicit (`a`), and a section variable (`hn`) the signature does
# not mention, which the proof uses (Lean 4.9 then makes it a hypothesis of the theorem, as
# MOBench's imo_sl_2009_N3 needs); a theorem that also assumes what the statement does not
# give (`h : 1 = 2`) must not pass.
SELF_TEST_AUTO_BOUND_STATEMENT = (
    "theorem prover_assets_selftest_auto_bound (h : (a : ℕ) = 1) : a + 1 = 2 := by sorry"
)


SELF_TEST_AUTO_BOUND_GOOD = SELF_TEST_AUTO_BOUND_STATEMENT.replace("by sorry", "by\n  omega")


SELF_TEST_VARIABLES = "variable (n : ℕ) (hn : 0 < n)\n\n"


SELF_TEST_VARIABLE_STATEMENT = (
    SELF_TEST_VARIABLES + "theorem prover_assets_selftest_variable : 0 < n := by sorry"
)


SELF_TEST_VARIABLE_GOOD = SELF_TEST_VARIABLE_STATEMENT.replace("by sorry", "by\n  exact hn")


SELF_TEST_VARIABLE_WEAKER = SELF_TEST_VARIABLE_GOOD.replace(
    "_variable :", "_variable (_h : 1 = 2) :"
)
