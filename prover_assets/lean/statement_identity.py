"""A statement's identity as hashes of its tokens: its preamble and signature (`identity_sha`,
`signature_sha`), and the same up to renaming the signature's bound names
(`signature_alpha_sha`); and where a candidate stops repeating a trusted preamble. Comments,
whitespace and the theorem's name never count."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from prover_assets.lean.lexer import Token, TokenKind
from prover_assets.lean.signature import BRACKETS, CLOSING_BRACKETS, Signature

__all__ = [
    "identity_sha",
    "preamble_difference",
    "signature_alpha_sha",
    "signature_sha",
]

_BINDER_KEYWORDS = frozenset({"∀", "∃", "λ", "fun", "∑", "∏", "⋃", "⋂", "⨆", "⨅", "Π", "Σ", "∫"})

# Separates a preamble's tokens from the signature's in the identity hash.
_PREAMBLE_END = "\x1e"


def preamble_difference(trusted: Sequence[Token], displayed: Sequence[Token]) -> int | None:
    """The index of the first token of the `trusted` preamble that `displayed` (the tokens a
    candidate has after its header) does not repeat, kind and text; None when it repeats them
    all. Comments and whitespace are not tokens, so they never count."""
    for index, token in enumerate(trusted):
        if index >= len(displayed) or _token_key(displayed[index]) != _token_key(token):
            return index
    return None


def _hash_tokens(texts: Sequence[str]) -> str:
    return hashlib.sha256("\x1f".join(texts).encode("utf-8")).hexdigest()


_KIND_PREFIX = {kind: f"{kind.value}:" for kind in TokenKind}


def _token_key(token: Token) -> str:
    return _KIND_PREFIX[token.kind] + token.text


def identity_sha(preamble: Sequence[Token], signature: Signature, *, alpha: bool) -> str:
    """sha256 of a statement's preamble and signature tokens (`alpha`: the signature's bound
    names renamed in order of appearance); without a preamble, of the signature's alone, as
    before preambles were supported, so that miniF2F's hashes do not move."""
    keys = _alpha_keys(signature) if alpha else [_token_key(t) for t in signature.tokens]
    if not preamble:
        return _hash_tokens(keys)
    return _hash_tokens([*(_token_key(t) for t in preamble), _PREAMBLE_END, *keys])


def signature_sha(signature: Signature) -> str:
    """The sha256 of a theorem's signature, comments and whitespace aside: the statement's
    identity when it has no preamble."""
    return _hash_tokens([_token_key(t) for t in signature.tokens])


def _is_simple_ident(token: Token) -> bool:
    return token.kind is TokenKind.IDENT and "." not in token.text and token.text != "_"


def _group_names(tokens: Sequence[Token], start: int) -> tuple[list[int], int]:
    """Indices of the names bound by the bracket group opening at `start` (`(a b : T)`,
    `⟨x, hx⟩`), and the index after its closing bracket. Names stop at the group's own `:`."""
    closing = BRACKETS[tokens[start].text]
    names: list[int] = []
    depth = 0
    collecting = True
    for j in range(start, len(tokens)):
        text = tokens[j].text
        if text in BRACKETS:
            depth += 1
        elif text in CLOSING_BRACKETS:
            depth -= 1
            if depth == 0:
                return names, j + 1
        elif depth == 1 and text == ":" and closing != "⟩":
            collecting = False
        elif depth >= 1 and collecting and _is_simple_ident(tokens[j]):
            names.append(j)
    return names, len(tokens)


def _quantified_names(tokens: Sequence[Token], keyword_index: int) -> list[int]:
    """Names after a binder keyword: `∀ x y : T,`, `∃! n > 0,`, `∑ i in s,`, `fun ⟨a, b⟩ =>`."""
    names: list[int] = []
    j = keyword_index + 1
    if j < len(tokens) and tokens[j].text == "!":
        j += 1
    while j < len(tokens):
        token = tokens[j]
        if _is_simple_ident(token) and token.text != "in":
            names.append(j)
            j += 1
        elif token.text == "_":
            j += 1
        elif token.text in BRACKETS:
            group, j = _group_names(tokens, j)
            names.extend(group)
        else:
            break
    return names


def _set_builder_names(tokens: Sequence[Token], brace_index: int) -> list[int]:
    """`{x | p x}`, `{x : T | p x}`, `{(a, b) | ...}`: the names before the `|`."""
    names: list[int] = []
    depth = 0
    typed = False
    for j in range(brace_index, len(tokens)):
        text = tokens[j].text
        if text in BRACKETS:
            depth += 1
        elif text in CLOSING_BRACKETS:
            depth -= 1
            if depth == 0:
                return []
        elif depth == 1 and text == "|":
            return names
        elif depth == 1 and text == ":":
            typed = True
        elif not typed and _is_simple_ident(tokens[j]):
            names.append(j)
        elif not typed and text != ",":
            return []
    return []


def _binder_names(tokens: Sequence[Token]) -> list[str]:
    """Bound variable and hypothesis names, in order of their first binding occurrence."""
    bound: set[int] = set()
    depth = 0
    before_type = True
    for i, token in enumerate(tokens):
        text = token.text
        if before_type and depth == 0 and text in BRACKETS and text != "⟨":
            bound.update(_group_names(tokens, i)[0])
        if text == ":" and depth == 0:
            before_type = False
        if text in _BINDER_KEYWORDS:
            bound.update(_quantified_names(tokens, i))
        elif text == "{":
            bound.update(_set_builder_names(tokens, i))
        if text in BRACKETS:
            depth += 1
        elif text in CLOSING_BRACKETS:
            depth -= 1
    order: list[str] = []
    for index in sorted(bound):
        if tokens[index].text not in order:
            order.append(tokens[index].text)
    return order


def signature_alpha_sha(signature: Signature) -> str:
    """As `signature_sha`, with bound names renamed in order: a statement's identity up to
    renaming when it has no preamble."""
    return _hash_tokens(_alpha_keys(signature))


def _alpha_keys(signature: Signature) -> list[str]:
    tokens = signature.tokens
    renaming = {name: f"\x00{index}" for index, name in enumerate(_binder_names(tokens))}
    keys = []
    for token in tokens:
        if token.kind is TokenKind.IDENT:
            head, dot, rest = token.text.partition(".")
            if head in renaming:
                keys.append(_KIND_PREFIX[token.kind] + renaming[head] + dot + rest)
                continue
        keys.append(_token_key(token))
    return keys
