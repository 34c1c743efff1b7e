"""From a completion to the code the REPL compiles, exactly as the Goedel protocol does it.

- `extract_lean_code`: the last fenced block of the first pattern that matches, after the header.
- `reinsert_statement`: Goedel's `problem_check`: the problem's own statement, then the proof
  after the displayed theorem's `:= by`. Failures raise `ReinsertionError` (Goedel returned an
  error string that was then compiled as if it were code).
- `compile_view`: ONE function for what the REPL receives and what error positions index.
- `displayed_theorem`: the theorem the completion displays (and the preamble it repeats) and its
  proof's sha, from one lexing pass; `displayed_statement_faithful`: whether that theorem, and
  its preamble, are the problem's. The verifier computes it once per sample, hands it to the
  gate, and records it in the verdict, where the SFT builder reads it.
- `reinsertion_keeps_statement`: whether re-insertion and the compile view hand Lean the
  statement's own code (checked when a problem is loaded).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from prover_assets.lean.lexer import LexError, Token, code_tokens
from prover_assets.lean.protocol import GOEDEL_HEADER
from prover_assets.lean.statements import (
    Signature,
    StatementError,
    first_theorem_signature,
    header_end,
    preamble_difference,
    signature_sha,
    statement_parts,
)

__all__ = [
    "DisplayedTheorem",
    "ReinsertionError",
    "compile_view",
    "displayed_statement_faithful",
    "displayed_theorem",
    "extract_lean_code",
    "reinsert_statement",
    "reinsertion_keeps_statement",
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


@dataclass(frozen=True)
class DisplayedTheorem:
    """What a completion's code displays: its first theorem's signature (None when it has none
    or does not lex), the tokens between its header and that theorem (where a preamble problem's
    trusted declarations must stand), and the sha256 of its proof's tokens (everything after the
    theorem's `:=`), so that comments and layout do not make two proofs distinct."""

    signature: Signature | None
    proof_sha: str
    before_theorem: tuple[Token, ...] = ()

    def signature_matches(self, statement: str) -> bool:
        """Whether the displayed theorem has the signature tokens of the trusted `statement`'s
        theorem (the theorem's name ignored)."""
        try:
            _, trusted = statement_parts(statement)
        except StatementError:
            return False
        return self._same_signature(trusted)

    def faithful_to(self, statement: str) -> bool:
        """Whether the displayed theorem is the trusted `statement`'s: its preamble repeated
        token for token before the theorem, then the same signature."""
        try:
            preamble, trusted = statement_parts(statement)
        except StatementError:
            return False
        return (
            self._same_signature(trusted)
            and preamble_difference(preamble, self.before_theorem) is None
        )

    def _same_signature(self, trusted: Signature) -> bool:
        return self.signature is not None and signature_sha(self.signature) == signature_sha(
            trusted
        )


def displayed_theorem(code: str) -> DisplayedTheorem:
    """The displayed theorem of `code`, from one lexing pass."""
    # The protocol's fixed header carries no theorem: skip lexing it (a third of the text).
    body = code.removeprefix(GOEDEL_HEADER)
    try:
        tokens = code_tokens(body)
    except LexError:
        return DisplayedTheorem(None, hashlib.sha256(code.encode("utf-8")).hexdigest())
    signature = first_theorem_signature(tokens)
    proof = [t.text for t in tokens if signature is None or t.start >= signature.assign_start]
    body_start = header_end(tokens)[0]
    before = [
        t for t in tokens[body_start:] if signature is None or t.start < signature.theorem_start
    ]
    return DisplayedTheorem(
        signature,
        hashlib.sha256("\x1f".join(proof).encode("utf-8")).hexdigest(),
        tuple(before),
    )


def displayed_statement_faithful(code: str, statement: str) -> bool:
    """Whether the first theorem displayed in `code` has the signature tokens of `statement`'s
    theorem, after its preamble (if it has one) repeated token for token. A proof of a different displayed theorem is judged by Goedel's protocol on the
    re-inserted original, so it is accepted but must not become training data."""
    return displayed_theorem(code).faithful_to(statement)


def reinsertion_keeps_statement(statement: str) -> bool:
    """Whether re-insertion and the compile view hand Lean the statement's own code.

    The statement re-inserted with itself as the proof, in the compile view, must have the code
    tokens of the statement after its header. Goedel's comment removal is not Lean-aware (a
    `--` inside a string cuts the line) and the compile view drops every line that starts with
    `open` or `set_option`, so a preamble could otherwise reach Lean other than it was trusted.
    """
    try:
        rebuilt = code_tokens(compile_view(reinsert_statement(statement, statement)))
        tokens = code_tokens(statement)
    except (ReinsertionError, LexError):
        return False
    trusted = tokens[header_end(tokens)[0] :]
    return [(t.kind, t.text) for t in rebuilt] == [(t.kind, t.text) for t in trusted]
