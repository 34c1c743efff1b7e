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
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence

from prover_assets.lean.lexer import Token, TokenKind
from prover_assets.lean.statements import first_theorem_signature

__all__ = ["block_end_reason", "proof_tokens"]

_OPENING = frozenset({"(", "[", "{", "⟨", "⦃", "@[", "#["})
_CLOSING = frozenset({")", "]", "}", "⟩", "⦄"})
_NEWLINE = re.compile("\n")
# Tokens no command starts with: a line they start continues the proof's syntax (a `match`
# alternative, a `calc` step, a trailing `<;>`) whatever its column.
_NEVER_COMMANDS = frozenset({"|", "_", "<;>"})


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


def block_end_reason(text: str, tokens: Sequence[Token]) -> str | None:
    """Why the tactic block `tokens` (offsets into `text`) does not hold all of them: the first
    token left of the block's column at bracket depth 0 on a new line, or a closing bracket
    that no opening one matches; None when every token is in the block."""
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
    for token in tokens:
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
