"""Words no candidate may use, and the declaration words a trusted preamble may hold.

Both the gate (what a candidate writes) and the statement parser (what a benchmark's trusted
preamble may contain) read these, so that a word is banned in one place. A name is compared
as Lean reads it, component by component with «» quotes removed: `«Lean».«addDecl»` is
`Lean.addDecl`. The runners read from Mathlib's source (`gate_data.RUNNERS`) are banned words
too; `BANNED_WORDS` holds the rest.
"""

from __future__ import annotations

from prover_assets.lean.gate_data import RUNNERS
from prover_assets.lean.lexer import name_components

__all__ = [
    "BANNED_NAMESPACE",
    "BANNED_WORDS",
    "PREAMBLE_DECLARATIONS",
    "RUNNER_WORDS",
    "banned_word",
    "in_meta_namespace",
]

# Identifiers (or a component of a dotted identifier) that reject wherever they are.
BANNED_WORDS = frozenset(
    {
        "sorry",
        "admit",
        "sorryAx",
        "native_decide",
        "ofReduceBool",
        "trustCompiler",
        "exact?",
        "axiom",
        "opaque",
        "unsafe",
        "implemented_by",
        "extern",
        # Code run by the elaborator from a term, a tactic or a command (Lean core and Mathlib;
        # those read from Mathlib's source are in `gate_data.RUNNERS`).
        "run_elab",
        "run_meta",
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
        # Mathlib commands that declare or define syntax under a name of their own choosing.
        "alias",
        "notation3",
        "irreducible_def",
        "simproc",
        "dsimproc",
        "initialize",
        "builtin_initialize",
        # Discards the rest of a proof (`repeat sorry`).
        "stop",
    }
)
# The runners that are identifiers (`eval%` is matched by the gate, as a word glued to `%`).
RUNNER_WORDS = frozenset(runner.name for runner in RUNNERS if not runner.percent)
# The namespace whose constants reach the elaborator or the environment itself: the meta API.
BANNED_NAMESPACE = "Lean"
_ROOT = "_root_"
# Banned in anything a candidate adds, but a benchmark's preamble may declare them (MOBench has
# `notation "ℝ+" => PosReal`, `instance : Fintype (fiber α k) := ...`): the preamble is trusted
# text that the candidate must repeat token for token, and Lean compiles the trusted copy.
PREAMBLE_DECLARATIONS = frozenset(
    {"instance", "notation", "infix", "infixl", "infixr", "prefix", "postfix"}
)


def banned_word(name: str) -> bool:
    """Whether identifier `name` (or a component of it, «» removed) is banned wherever it
    stands; a name in the meta API (`Lean.…`, `_root_.Lean.…`) is banned whole."""
    components = name_components(name)
    return (
        (in_meta_namespace(name) and _unrooted(components) != (BANNED_NAMESPACE,))
        or any(part in BANNED_WORDS or part in RUNNER_WORDS for part in components)
        or any(part.startswith("unsafe") for part in components)  # unsafeCast, unsafeIO, ...
    )


def in_meta_namespace(name: str) -> bool:
    """Whether `name` is the meta namespace or in it (`Lean`, `Lean.Elab`, `_root_.Lean.x`)."""
    unrooted = _unrooted(name_components(name))
    return bool(unrooted) and unrooted[0] == BANNED_NAMESPACE


def _unrooted(components: tuple[str, ...]) -> tuple[str, ...]:
    return components[1:] if components[0] == _ROOT else components
