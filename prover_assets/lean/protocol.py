"""Byte-exact constants of the Goedel-Prover-V2 protocol (PROTOCOL.md); pinned by golden tests."""

__all__ = ["GOEDEL_HEADER", "STANDARD_AXIOMS"]

# The header the model's protocol prepends to extracted code and sends as the REPL's first command.
GOEDEL_HEADER = (
    "import Mathlib\nimport Aesop\n\nset_option maxHeartbeats 0\n\n"
    "open BigOperators Real Nat Topology Rat\n\n"
)

# The axioms an accepted theorem may depend on; anything else (sorryAx, Lean.ofReduceBool,
# a user axiom) rejects.
STANDARD_AXIOMS = frozenset({"propext", "Classical.choice", "Quot.sound"})
