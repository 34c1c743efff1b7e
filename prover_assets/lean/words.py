"""Words no candidate may use, and the declaration words a trusted preamble may hold.

Both the gate (what a candidate writes) and the statement parser (what a benchmark's trusted
preamble may contain) read these, so that a word is banned in one place.
"""

from __future__ import annotations

__all__ = ["BANNED_NAMESPACES", "BANNED_WORDS", "PREAMBLE_DECLARATIONS", "banned_word"]

# Identifiers (or a component of a dotted identifier) that reject wherever they are.
BANNED_WORDS = frozenset(
    {
        "sorry",
        "admit",
        "sorryAx",
        "native_decide",
        "ofReduceBool",
        "trustCompiler",
        "apply?",
        "exact?",
        "axiom",
        "opaque",
        "unsafe",
        "implemented_by",
        "extern",
        "run_tac",
        "run_cmd",
        "run_elab",
        "elab",
        "elab_rules",
        "macro",
        "macro_rules",
        "syntax",
        "notation",
        "infix",
        "infixl",
        "infixr",
        "prefix",
        "postfix",
        "declare_syntax_cat",
        "prelude",
        "modifyEnv",
        "addDecl",
        "addDeclCore",
        "instance",
    }
)
# Namespaces whose constants reach the elaborator or the environment itself.
BANNED_NAMESPACES = ("Lean.",)
# Banned in anything a candidate adds, but a benchmark's preamble may declare them (MOBench has
# `notation "ℝ+" => PosReal`, `instance : Fintype (fiber α k) := ...`): the preamble is trusted
# text that the candidate must repeat token for token, and Lean compiles the trusted copy.
PREAMBLE_DECLARATIONS = frozenset(
    {"instance", "notation", "infix", "infixl", "infixr", "prefix", "postfix"}
)


def banned_word(name: str) -> bool:
    """Whether identifier `name` (or a component of it) is banned wherever it stands."""
    components = name.split(".")
    return (
        name.startswith(BANNED_NAMESPACES)
        or any(part in BANNED_WORDS for part in components)
        or any(part.startswith("unsafe") for part in components)  # unsafeCast, unsafeIO, ...
    )
