"""Where the theorem's tactic proof ends, by layout: nothing may follow it.

Lean reads a `by` block as tactics at one column (`sepByIndent`: each tactic at the column of the
first, its arguments further right or inside brackets). The first line that starts left of that
column, outside every bracket, not continuing an operator and not starting with a token no
command starts with (`|`, `_`, `<;>`), ends the block, and what stands there is another
command: a binder predicate, a unification hint, an attribute, a `#eval`, whatever Mathlib adds
next. The theorem is the only declaration a candidate's text may hold, so any token there is
refused as `banned:after_proof:<token>`, whatever its word. A block at column 0 leaves no column
to tell a tactic from a command by, and is refused as `banned:unindented_proof` (every honest
proof in the shipped data indents its tactics).

Lean does not need a new line to end the block: a tactic ends where its syntax does, and when the
next token is a command's leading keyword the block ends there, on the same line (`skip
compile_inductive% Nat`), and after a multi-line string on the string's last line. A command's
keyword is a token of Lean's table, never an identifier (`«lemma»` is one), and no tactic or term
takes it, so wherever it stands in the proof a command starts there: each keyword of the pinned
Mathlib's `command` category (`gate_data.COMMANDS`, read from source with its provenance) is
refused as `banned:after_proof:<keyword>`, inside brackets too, where Lean fails on it. Four are
also a tactic's (or a term's) leading token, which honest proofs write, and stay allowed
(`ALSO_TACTICS`, each with where that form is declared): what such a form wraps is a tactic, a
term, or a command that starts with a keyword of its own.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence

from prover_assets.lean.gate_data import COMMANDS
from prover_assets.lean.lexer import Token, TokenKind
from prover_assets.lean.signature import first_theorem_signature

__all__ = ["ALSO_TACTICS", "COMMAND_KEYWORDS", "block_end_reason", "proof_tokens"]

_OPENING = frozenset({"(", "[", "{", "⟨", "⦃", "@[", "#["})
_CLOSING = frozenset({")", "]", "}", "⟩", "⦄"})
_NEWLINE = re.compile("\n")
# Tokens no command starts with: a line they start continues the proof's syntax (a `match`
# alternative, a `calc` step, a trailing `<;>`) whatever its column.
_NEVER_COMMANDS = frozenset({"|", "_", "<;>"})
# Command keywords that are also the leading token of a tactic or a term at the pin, so that an
# honest proof writes them, each with where that form is declared. The command such a keyword
# starts after a tactic (`skip set_option ...`, `skip open ...`) is judged by the option and
# scope rules; the one it wraps (`count_heartbeats in <command>`) starts with its own keyword.
ALSO_TACTICS: dict[str, str] = {
    "open": "`open Foo in tacs` (Lean.Parser.Tactic.open) and `open Foo in e` "
    "(Lean.Parser.Term.open), in Lean core's src/Lean/Parser/Command.lean",
    "set_option": "`set_option opt val in tacs` (Lean.Parser.Tactic.set_option) and the term of "
    "the same shape, in Lean core's src/Lean/Parser/Command.lean",
    "count_heartbeats": "`count_heartbeats in tacs`, a tactic of Mathlib/Util/CountHeartbeats.lean "
    "at the pin",
    "count_heartbeats!": "`count_heartbeats! n in tacs`, a tactic of "
    "Mathlib/Util/CountHeartbeats.lean at the pin",
}
# The keywords refused wherever they stand in a proof, as the lexer reads them: an identifier, or
# (for `compile_inductive%`) an identifier right before `%`.
COMMAND_KEYWORDS = frozenset(c.name for c in COMMANDS if c.name not in ALSO_TACTICS)
_WORDS = frozenset(k for k in COMMAND_KEYWORDS if not k.endswith("%"))
_PERCENT_WORDS = frozenset(k.removesuffix("%") for k in COMMAND_KEYWORDS if k.endswith("%"))
_CANDIDATES = _WORDS | _PERCENT_WORDS  # a cheap first test on every token's text


def proof_tokens(tokens: Sequence[Token]) -> Sequence[Token] | None:
    """The tokens after the first theorem's `:= by` among `tokens` (None when its proof is not a
    tactic block: re-insertion refuses those)."""
    signature = first_theorem_signature(tokens)
    if signature is None:
        return None
    assign = next(i for i, t in enumerate(tokens) if t.start == signature.assign_start)
    if assign + 1 >= len(tokens) or tokens[assign + 1].text != "by":
        return None
    return tokens[assign + 2 :]


def _continues(previous: Token) -> bool:
    """Whether a line after `previous` continues its expression whatever its column: after an
    operator or separator (`<;>`, `,`, `:=`, `+`) the parser is inside a term, not between
    tactics. A closing bracket ends one, as an identifier or a literal may."""
    return previous.kind is TokenKind.SYMBOL and previous.text not in _CLOSING


def _line_starts(text: str) -> list[int]:
    return [0, *(found.end() for found in _NEWLINE.finditer(text))]


def _command_keyword(tokens: Sequence[Token], index: int) -> str | None:
    """The command keyword token `index` is (with the `%` glued right after it), if any."""
    token = tokens[index]
    if token.kind is not TokenKind.IDENT:
        return None
    if token.text in _WORDS:
        return token.text
    if token.text in _PERCENT_WORDS and index + 1 < len(tokens):
        glued = tokens[index + 1]
        if glued.text == "%" and glued.start == token.end:
            return f"{token.text}%"
    return None


def block_end_reason(text: str, tokens: Sequence[Token]) -> str | None:
    """Why the tactic block `tokens` (offsets into `text`) does not hold all of them: the first
    command keyword, wherever it stands; the first token left of the block's column at bracket
    depth 0 on a new line; or a closing bracket that no opening one matches. None when every
    token is in the block."""
    if not tokens:
        return None
    starts = _line_starts(text)

    def position(offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(starts, offset) - 1  # 0-based, as the comparisons need
        return line, offset - starts[line]

    block_line, column = position(tokens[0].start)
    if column == 0:
        return "banned:unindented_proof"
    depth = 0
    previous_line = block_line
    previous: Token | None = None
    for index, token in enumerate(tokens):
        if token.text in _CANDIDATES and (keyword := _command_keyword(tokens, index)) is not None:
            return f"banned:after_proof:{keyword}"
        line, token_column = position(token.start)
        starts_line = line > previous_line
        if (
            depth == 0
            and starts_line
            and token_column < column
            and token.text not in _NEVER_COMMANDS
            and not (previous is not None and _continues(previous))
        ):
            return f"banned:after_proof:{token.text}"
        if token.text in _OPENING:
            depth += 1
        elif token.text in _CLOSING:
            if depth == 0:
                return f"banned:after_proof:{token.text}"
            depth -= 1
        previous_line = position(token.end)[0]
        previous = token
    return None
