"""A tactic's configuration may hold data only: no code of the candidate's runs through it.

A tactic's `(config := e)` is elaborated and then evaluated (`declare_config_elab`,
`elabConfig`), and some configurations at the pinned Mathlib have fields whose type is a tactic
or a meta computation (`LinarithConfig.discharger : TacticM Unit`, its `oracle`), so a `do`
block there runs at elaboration with no banned word in sight. Rather than list such fields, the
value of every configuration argument (`config`, `simp_config`, any `<name>_config`) must be
data by its shape:

    value  := name | .name | number | -number | string | char
            | { [name with] field* [: name] }  (fields separated by `,` or by layout)
            | [value, ...] | ⟨value, ...⟩ | (value) | ()
    field  := name := value

A name applied to arguments is code, as are `do`, `fun`/`λ`, `←`, `by`, `·` (the anonymous
function's dot), quotations and antiquotations: the first token that is not data is refused as
`banned:config:<field>:<token>`, the field being the innermost one holding it (the configuration
argument's own name at the top).
"""

from __future__ import annotations

from collections.abc import Sequence

from prover_assets.lean.lexer import Token, TokenKind

__all__ = ["config_reasons", "is_config_name"]

_ATOMS = frozenset({TokenKind.NUMBER, TokenKind.STRING, TokenKind.CHAR})
# Identifiers that are keywords of code, never names of data.
_CODE_WORDS = frozenset(
    {"do", "fun", "by", "let", "have", "show", "match", "if", "then", "else", "return", "with"}
)
_CLOSING = {"{": "}", "[": "]", "⟨": "⟩", "(": ")"}


class _NotData(Exception):
    """The configuration value is not data at `token`, in `field`."""

    def __init__(self, field: str, token: Token | None) -> None:
        super().__init__(field)
        self.field = field
        self.token = token


def is_config_name(text: str) -> bool:
    """Whether a named argument `(text := ...)` is a configuration (`config`, `simp_config`)."""
    return text == "config" or text.endswith("_config")


def config_reasons(tokens: Sequence[Token]) -> list[str]:
    """`banned:config:<field>:<token>` for each configuration argument among `tokens` whose
    value is not data (see the module docstring), in order."""
    reasons: list[str] = []
    for index in range(len(tokens) - 2):
        name = tokens[index + 1]
        if (
            tokens[index].text != "("
            or name.kind is not TokenKind.IDENT
            or not is_config_name(name.text)
            or tokens[index + 2].text != ":="
        ):
            continue
        try:
            end = _value(tokens, index + 3, name.text)
            _expect(tokens, end, ")", name.text)
        except _NotData as exc:
            what = exc.token.text if exc.token is not None else "the end of the code"
            reason = f"banned:config:{exc.field}:{what}"
            if reason not in reasons:
                reasons.append(reason)
    return reasons


def _at(tokens: Sequence[Token], index: int) -> Token | None:
    return tokens[index] if index < len(tokens) else None


def _expect(tokens: Sequence[Token], index: int, text: str, field: str) -> int:
    token = _at(tokens, index)
    if token is None or token.text != text:
        raise _NotData(field, token)
    return index + 1


def _value(tokens: Sequence[Token], index: int, field: str) -> int:
    """The index after the data value starting at `index`; raises _NotData."""
    token = _at(tokens, index)
    if token is None:
        raise _NotData(field, None)
    if token.kind in _ATOMS:
        return index + 1
    if token.kind is TokenKind.IDENT and token.text not in _CODE_WORDS:
        return index + 1
    following = _at(tokens, index + 1)
    if (
        token.text == "."
        and following is not None
        and following.kind is TokenKind.IDENT
        and following.start == token.end
    ):
        return _value(tokens, index + 1, field)  # `.reducible`; a spaced `.` is the cdot
    if token.text == "-" and following is not None and following.kind is TokenKind.NUMBER:
        return index + 2
    if token.text == "{":
        return _structure(tokens, index + 1, field)
    if token.text in ("[", "⟨", "("):
        return _sequence(tokens, index + 1, _CLOSING[token.text], field)
    raise _NotData(field, token)


def _sequence(tokens: Sequence[Token], index: int, closing: str, field: str) -> int:
    """Values separated by `,` up to `closing` (none is allowed: `[]`, `()`)."""
    token = _at(tokens, index)
    if token is not None and token.text == closing:
        return index + 1
    while True:
        index = _value(tokens, index, field)
        token = _at(tokens, index)
        if token is not None and token.text == ",":
            index += 1
            continue
        return _expect(tokens, index, closing, field)


def _structure(tokens: Sequence[Token], index: int, field: str) -> int:
    """`[name with] (name := value)*` up to `}`, fields separated by `,` or by layout."""
    token = _at(tokens, index)
    following = _at(tokens, index + 1)
    if (
        token is not None
        and token.kind is TokenKind.IDENT
        and following
        and following.text == "with"
    ):
        index += 2  # `{ cfg with ... }`: a name, then the fields it updates
    while True:
        token = _at(tokens, index)
        if token is not None and token.text == "}":
            return index + 1
        if token is not None and token.text == ":":  # `{ zeta := false : Simp.Config }`
            return _expect(tokens, _value(tokens, index + 1, field), "}", field)
        # A field is a name and `:=`: anything else after a value (`pure ()`, `f x`) applies it.
        if token is None or token.kind is not TokenKind.IDENT or token.text in _CODE_WORDS:
            raise _NotData(field, token)
        assign = _at(tokens, index + 1)
        if assign is None or assign.text != ":=":
            raise _NotData(field, token)
        field = token.text
        index = _value(tokens, index + 2, field)
        separator = _at(tokens, index)
        if separator is not None and separator.text == ",":
            index += 1
