"""A Lean 4 lexer good enough to judge text: what is code, what is comment, what is string.

It follows the character classes of Lean's own tokenizer (`Lean.Parser.Basic`: `isIdFirst`,
`isIdRest`, `isLetterLike`, `isSubScriptAlnum`), nests block comments, and understands string,
raw-string and char literals, so that a word inside a comment or a string never counts as code.
It does not know Lean's dynamic token table (notations added by Mathlib); multi-character
symbols are split by a fixed longest-match list, which is stable under whitespace changes.
"""

from __future__ import annotations

import functools
import re
from enum import StrEnum
from typing import NamedTuple

__all__ = [
    "TRIVIA",
    "LexError",
    "Token",
    "TokenKind",
    "code_tokens",
    "is_plain_identifier",
    "line_col",
    "name_components",
    "tokenize",
]


class TokenKind(StrEnum):
    """The kinds of Lean tokens the lexer tells apart."""

    IDENT = "ident"
    NUMBER = "number"
    STRING = "string"
    CHAR = "char"
    SYMBOL = "symbol"
    HASH_COMMAND = "hash_command"  # `#eval`, `#exit`, `#print`, ...
    LINE_COMMENT = "line_comment"
    BLOCK_COMMENT = "block_comment"  # includes doc comments `/-- -/` and `/-! -/`
    WHITESPACE = "whitespace"


TRIVIA = frozenset({TokenKind.LINE_COMMENT, TokenKind.BLOCK_COMMENT, TokenKind.WHITESPACE})


class Token(NamedTuple):
    """One token: its kind, its text and its offsets in the source."""

    kind: TokenKind
    text: str
    start: int  # character offset into the lexed text
    end: int


class LexError(ValueError):
    """The text cannot be lexed (an unterminated comment or literal)."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(f"{message} at offset {offset}")
        self.offset = offset


# Lean's `isIdFirst` (ASCII letters, `_`, `isLetterLike`) and `isIdRest` (plus digits, `'!?`
# and `isSubScriptAlnum`).
_ID_FIRST = (
    "A-Za-z_\u03b1-\u03ba\u03bc-\u03c9\u0391-\u039f\u03a1\u03a2\u03a4-\u03a9\u03ca-\u03fb"
    "\u1f00-\u1ffe\u2100-\u214f\U0001d49c-\U0001d59f"
)
_ID_REST = _ID_FIRST + "0-9'!?\u2080-\u2089\u2090-\u209c\u1d62-\u1d6a\u2c7c"
_ATOM = rf"(?:«[^»]*»|[{_ID_FIRST}][{_ID_REST}]*)"
_NAME = rf"{_ATOM}(?:\.(?=[{_ID_FIRST}«]){_ATOM})*"
# Longest first: regex alternation takes the first alternative that matches.
_MULTI_SYMBOLS = (
    "...",
    "<;>",
    "<|>",
    "<->",
    "|>.",
    ":=",
    "::",
    "=>",
    "->",
    "<-",
    "<|",
    "|>",
    "..",
    "++",
    "&&",
    "||",
    "==",
    "!=",
    "<=",
    ">=",
    "^^",
    "@[",
    "#[",
)

_CODE_ALTERNATIVES = rf"""
    (?P<block_comment>/-)
    |(?P<string>"(?:[^"\\]|\\.)*")
    |(?P<raw_string>r(?P<hashes>\#*)")
    |(?P<ident>{_NAME})
    |(?P<number>0[xX][0-9a-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+
        |[0-9][0-9_]*(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)
    |(?P<char>'(?:\\(?:x[0-9a-fA-F]{{2}}|u[0-9a-fA-F]{{4}}|.)|[^\\'\n])')
    |(?P<hash_command>\#{_NAME})
    |(?P<bad>["«])
    |(?P<symbol>{"|".join(re.escape(s) for s in _MULTI_SYMBOLS)}|.)
"""
_MASTER = re.compile(
    rf"(?P<whitespace>\s+)|(?P<line_comment>--[^\n]*)|{_CODE_ALTERNATIVES}",
    re.VERBOSE | re.DOTALL,
)
# Code-only scanning absorbs leading whitespace and line comments into each match (about half
# the matches of the full scan); the token itself starts where the named group starts.
_CODE_ONLY = re.compile(
    rf"(?:\s+|--[^\n]*)*(?:{_CODE_ALTERNATIVES}|$)",
    re.VERBOSE | re.DOTALL,
)


def _block_comment_end(text: str, start: int) -> int:
    """Offset just past the `-/` closing the comment opened at `start` (nesting counted)."""
    depth = 1
    i = start + 2
    while True:
        close = text.find("-/", i)
        if close < 0:
            raise LexError("unterminated block comment", start)
        opening = text.find("/-", i, close)
        if opening >= 0:
            depth += 1
            i = opening + 2
            continue
        depth -= 1
        i = close + 2
        if depth == 0:
            return i


def tokenize(text: str, *, keep_trivia: bool = True) -> list[Token]:
    """Split Lean source into tokens; trivia (comments, whitespace) kept unless asked not to."""
    tokens: list[Token] = []
    append = tokens.append
    kinds = _KINDS
    pattern = _MASTER if keep_trivia else _CODE_ONLY
    position = 0
    length = len(text)
    while position < length:
        # finditer is contiguous here (`symbol` matches any character); it is restarted only
        # after the constructs whose end a regex cannot find (nested comments, raw strings).
        for found in pattern.finditer(text, position):
            group = found.lastgroup
            if group is None:  # trailing trivia in code-only mode
                position = length
                break
            start = found.start(group)
            if group in _MANUAL_GROUPS:
                end = _manual_end(text, found)
                if keep_trivia or group != "block_comment":
                    kind = TokenKind.BLOCK_COMMENT if group == "block_comment" else TokenKind.STRING
                    append(Token(kind, text[start:end], start, end))
                position = end
                break
            end = found.end()
            append(Token(kinds[group], text[start:end], start, end))
        else:
            position = length
    return tokens


def _manual_end(text: str, found: re.Match[str]) -> int:
    group = found.lastgroup
    start = found.start(group)
    if group == "block_comment":
        return _block_comment_end(text, start)
    if group == "raw_string":
        closing = '"' + found.group("hashes")
        close = text.find(closing, found.end())
        if close < 0:
            raise LexError("unterminated raw string literal", start)
        return close + len(closing)
    raise LexError(f"unterminated {found.group()!r} literal", start)


_MANUAL_GROUPS = frozenset({"block_comment", "raw_string", "bad"})
_KINDS = {
    "whitespace": TokenKind.WHITESPACE,
    "line_comment": TokenKind.LINE_COMMENT,
    "block_comment": TokenKind.BLOCK_COMMENT,
    "string": TokenKind.STRING,
    "ident": TokenKind.IDENT,
    "number": TokenKind.NUMBER,
    "char": TokenKind.CHAR,
    "hash_command": TokenKind.HASH_COMMAND,
    "symbol": TokenKind.SYMBOL,
}


def code_tokens(text: str) -> list[Token]:
    """The tokens that are code: comments and whitespace removed (a list of its own: the
    caller may change it)."""
    return list(_recent_code_tokens(text))


# One statement is read by several rules in turn (the pool's screen lexes each row three times
# or more): the last few texts' tokens are kept. A text that does not lex raises every time.
@functools.lru_cache(maxsize=8)
def _recent_code_tokens(text: str) -> tuple[Token, ...]:
    return tuple(tokenize(text, keep_trivia=False))


_PLAIN_ATOM = re.compile(rf"[{_ID_FIRST}][{_ID_REST}]*")
_NAME_ATOM = re.compile(rf"«([^»]*)»|([{_ID_FIRST}][{_ID_REST}]*)")


def name_components(name: str) -> tuple[str, ...]:
    """The components of an identifier token as Lean reads them: `«Lean».«addDecl»` and
    `Lean.addDecl` are both `("Lean", "addDecl")`, and `«a.b»` is one component."""
    components = []
    position = 0
    while position < len(name):
        atom = _NAME_ATOM.match(name, position)
        if atom is None:
            raise ValueError(f"{name!r} is not an identifier")
        components.append(atom.group(1) if atom.group(1) is not None else atom.group(2))
        position = atom.end() + 1  # past the `.` between components
    return tuple(components)


def is_plain_identifier(component: str) -> bool:
    """Whether a name component needs no «» quotes (Lean prints it bare)."""
    return _PLAIN_ATOM.fullmatch(component) is not None


def line_col(text: str, offset: int) -> tuple[int, int]:
    """1-based line and 0-based column (in characters) of `offset`, as the Lean REPL counts."""
    line = text.count("\n", 0, offset) + 1
    line_start = text.rfind("\n", 0, offset) + 1
    return line, offset - line_start
