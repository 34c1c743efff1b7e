"""A displayed theorem's signature: its name and the tokens between the name and its `:=`,
found in a statement or a candidate's code; its claim's colon, its binders, and whether a
decimal literal in it would elaborate as `Float`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from prover_assets.lean.lexer import LexError, Token, TokenKind, code_tokens

__all__ = [
    "BRACKETS",
    "CLOSING_BRACKETS",
    "Signature",
    "claim_colon",
    "first_theorem_signature",
    "float_numerals",
    "signature_from",
    "theorem_signature",
]

_TYPE_BINDINGS = frozenset({"let", "have"})


BRACKETS = {"(": ")", "{": "}", "[": "]", "⦃": "⦄", "⟨": "⟩"}


CLOSING_BRACKETS = frozenset(BRACKETS.values())


@dataclass(frozen=True)
class Signature:
    """The displayed theorem: its name and the tokens between the name and its `:=`."""

    name: str
    tokens: tuple[Token, ...]
    theorem_start: int  # offset of the `theorem` keyword
    assign_start: int  # offset of the `:=` that ends the signature


def signature_from(tokens: Sequence[Token], theorem_index: int) -> Signature | None:
    """The signature of the `theorem` at `tokens[theorem_index]`: its name and the tokens up to
    the `:=` at depth 0 that is not a `let`'s or `have`'s inside its type; None when there is
    no name or no such `:=`."""
    if theorem_index + 1 >= len(tokens) or tokens[theorem_index + 1].kind is not TokenKind.IDENT:
        return None
    depth = 0
    # A `let`/`have` in the type whose `:=` is still to come (each comes before the next).
    binding = False
    for j in range(theorem_index + 2, len(tokens)):
        text = tokens[j].text
        if text in BRACKETS:
            depth += 1
        elif text in CLOSING_BRACKETS:
            depth -= 1
        elif depth == 0 and text in _TYPE_BINDINGS and tokens[j].kind is TokenKind.IDENT:
            binding = True
        elif text == ":=" and depth == 0 and binding:
            binding = False  # `let T := ...` inside the statement's type (MOBench has seven)
        elif text == ":=" and depth == 0:
            return Signature(
                name=tokens[theorem_index + 1].text,
                tokens=tuple(tokens[theorem_index + 2 : j]),
                theorem_start=tokens[theorem_index].start,
                assign_start=tokens[j].start,
            )
    return None


def claim_colon(tokens: Sequence[Token]) -> int | None:
    """The index among a signature's `tokens` of its `:` outside every bracket (what comes
    before it binds, what comes after is claimed); None when there is none."""
    depth = 0
    for index, token in enumerate(tokens):
        if token.text in BRACKETS:
            depth += 1
        elif token.text in CLOSING_BRACKETS:
            depth -= 1
        elif token.text == ":" and depth == 0:
            return index
    return None


def theorem_signature(text: str) -> Signature | None:
    """The signature of the first `theorem` in `text` (code or statement); None if there is none."""
    try:
        tokens = code_tokens(text)
    except LexError:
        return None
    return first_theorem_signature(tokens)


def first_theorem_signature(tokens: Sequence[Token]) -> Signature | None:
    """The signature of the first `theorem` among `tokens`, or None when there is none."""
    for index, token in enumerate(tokens):
        if token.kind is TokenKind.IDENT and token.text == "theorem":
            return signature_from(tokens, index)
    return None


# Types a decimal literal (`2.5`, `1e-3`) elaborates in when the term it stands in has one.
_DECIMAL_TYPES = frozenset({"ℝ", "ℚ", "ℂ", "Real", "Rat", "Complex", "NNReal", "EReal", "ENNReal"})


def float_numerals(statement: str) -> bool:
    """Whether a decimal literal of the statement's theorem would elaborate as `Float`.

    Lean gives a decimal literal that nothing types the `Float` default instance: `(h : (1 -
    0.3) * 0.8 = 0.56)` is a hypothesis about floats however real the rest of the theorem is. A
    lexical reading, per binder and for the claim: a part with a decimal literal and neither a
    decimal type (`ℝ`, `ℚ`, `Real.sqrt`, ...) nor a variable bound to one is flagged. It misses
    what only elaboration knows (a literal typed by a function whose type is stated elsewhere).
    """
    signature = theorem_signature(statement)
    if signature is None:
        return False
    binders, claim = _binder_groups(signature.tokens)
    typed_names: set[str] = set()
    for group in binders:
        colons = [i for i, t in enumerate(group) if t.text == ":"]
        if colons and any(_decimal_type(t) for t in group[colons[0] + 1 :]):
            typed_names |= {t.text for t in group[: colons[0]] if t.kind is TokenKind.IDENT}
    return any(
        _has_decimal_literal(part)
        and not any(_decimal_type(t) or t.text.split(".")[0] in typed_names for t in part)
        for part in [*binders, claim]
    )


def _binder_groups(tokens: Sequence[Token]) -> tuple[list[list[Token]], list[Token]]:
    """The signature's top-level bracketed binders (their inner tokens) and its claim (the
    tokens after the top-level `:`)."""
    groups: list[list[Token]] = []
    depth = 0
    for index, token in enumerate(tokens):
        if depth == 0 and token.text == ":":
            return groups, list(tokens[index + 1 :])
        if token.text in BRACKETS:
            depth += 1
            if depth == 1:
                groups.append([])
                continue
        elif token.text in CLOSING_BRACKETS:
            depth -= 1
            if depth == 0:
                continue
        if depth > 0:
            groups[-1].append(token)
    return groups, []


def _has_decimal_literal(tokens: Sequence[Token]) -> bool:
    previous: Token | None = None
    for token in tokens:
        # `p.2.1` lexes as `p`, `.`, `2.1`: a projection right after a dot, not a literal.
        projection = previous is not None and previous.text == "." and previous.end == token.start
        previous = token
        if token.kind is not TokenKind.NUMBER or projection or token.text[:2].lower() == "0x":
            continue
        if "." in token.text or "e" in token.text.lower():
            return True
    return False


def _decimal_type(token: Token) -> bool:
    return token.kind is TokenKind.IDENT and token.text.split(".")[0] in _DECIMAL_TYPES
