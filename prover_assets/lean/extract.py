"""From a completion to the code the REPL compiles, exactly as the Goedel protocol does it.

- `extract_lean_code`: the last fenced block of the first pattern that matches, after the header.
- `reinsert_statement`: Goedel's `problem_check`: the problem's own statement, then the proof
  after the displayed theorem's `:= by`. Failures raise `ReinsertionError` (Goedel returned an
  error string that was then compiled as if it were code).
- `compile_view`: ONE function for what the REPL receives and what error positions index.
- `displayed_statement_faithful`: whether the theorem the completion displays is the problem's.
"""

from __future__ import annotations

import re

from prover_assets.lean.protocol import GOEDEL_HEADER
from prover_assets.lean.statements import signature_sha, theorem_signature

__all__ = [
    "ReinsertionError",
    "compile_view",
    "displayed_statement_faithful",
    "extract_lean_code",
    "reinsert_statement",
    "remove_comments",
]

_CODE_PATTERNS = (
    re.compile(r"```lean4\n(.*?)\n```", re.DOTALL),
    re.compile(r"```lean4\n(.*?)```", re.DOTALL),
    re.compile(r"```lean\n(.*?)```", re.DOTALL),
)
_STATEMENT_THEOREM = re.compile(r"((?:theorem).*?:=\s*by\s*sorry)", re.DOTALL)
_PROOF_THEOREM = re.compile(r"((?:^|\s)theorem\s+.*?:=\s*by)", re.DOTALL)
_BLOCK_COMMENT = re.compile(r"/-.*?-/", re.DOTALL)
_COMPILE_VIEW_DROPPED = ("import", "set_option", "open")


class ReinsertionError(ValueError):
    """The statement cannot be re-inserted; `reason` is recorded as `lean_code_error`."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def extract_lean_code(completion: str) -> str | None:
    """The header plus the LAST match of the first pattern that matches; None without a block."""
    for pattern in _CODE_PATTERNS:
        matches = pattern.findall(completion)
        if matches:
            return GOEDEL_HEADER + matches[-1]
    return None


def remove_comments(text: str) -> str:
    """Goedel's comment removal: `/- ... -/` blocks (non-greedy), then `--` to line end, strip.

    Not Lean-aware on purpose: it is the protocol's own rule (a `--` inside a string is cut).
    """
    text = _BLOCK_COMMENT.sub("", text)
    return "\n".join(line.split("--", 1)[0] for line in text.split("\n")).strip()


def reinsert_statement(statement: str, code: str) -> str:
    """The problem's statement with the proof that follows the displayed theorem's `:= by`."""
    if "apply?" in code or "exact?" in code:
        raise ReinsertionError("apply?_or_exact?")
    cleaned_statement = remove_comments(statement)
    statement_match = _STATEMENT_THEOREM.search(cleaned_statement)
    if statement_match is None:
        raise ReinsertionError("statement_has_no_theorem_sorry")
    cleaned_code = remove_comments(code)
    proof_match = _PROOF_THEOREM.search(cleaned_code)
    if proof_match is None:
        raise ReinsertionError("code_has_no_theorem")
    head = cleaned_statement[: statement_match.end()].replace("sorry", "")
    return head + cleaned_code[proof_match.end() :]


def compile_view(code: str) -> str:
    """The text the REPL compiles against the header env: lines whose stripped text starts with
    `import`, `set_option` or `open` are dropped (including indented `set_option ... in`)."""
    return "\n".join(
        line for line in code.split("\n") if not line.strip().startswith(_COMPILE_VIEW_DROPPED)
    )


def displayed_statement_faithful(code: str, statement: str) -> bool:
    """Whether the first theorem displayed in `code` has the problem's signature tokens (the
    theorem's name ignored). A proof of a different displayed theorem is judged by Goedel's
    protocol on the re-inserted original, so it is accepted but must not become training data."""
    displayed = theorem_signature(code)
    expected = theorem_signature(statement)
    if displayed is None or expected is None:
        return False
    return signature_sha(displayed) == signature_sha(expected)
