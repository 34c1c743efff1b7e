"""The correction prompt's error block, byte-exact to the Goedel protocol (PROTOCOL.md).

`code` is the compile view the REPL received (its error positions index it); `errors` are the
REPL's error messages. Lines are 0-based here, `pos.line` is 1-based, columns 0-based.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["format_error_block"]

_CONTEXT_BEFORE = 4
_SHOWN_LINES = 6


def _error_code(lines: Sequence[str], error: Mapping[str, Any]) -> str:
    start_line = error["pos"]["line"] - 1
    start_col = error["pos"]["column"]
    if error.get("endPos") is None:
        end_line, end_col = start_line, len(lines[start_line])
    else:
        end_line = error["endPos"]["line"] - 1
        end_col = error["endPos"]["column"]
    text = ""
    for before in range(start_line - _CONTEXT_BEFORE, start_line):
        if before >= 0:
            text += f"{lines[before]}\n"
    if start_line == end_line:
        line = lines[start_line]
        text += (
            line[:start_col]
            + "<error>"
            + line[start_col:end_col]
            + "</error>"
            + line[end_col:]
            + "\n"
        )
    else:
        text += lines[start_line][:start_col] + "<error>" + lines[start_line][start_col:] + "\n"
        last_shown = start_line
        for middle in range(start_line + 1, min(end_line, start_line + _SHOWN_LINES)):
            text += f"{lines[middle]}\n"
            last_shown = middle
        if end_line > start_line + _SHOWN_LINES:
            shown = lines[last_shown]
            text += "\n" + " " * (len(shown) - len(shown.lstrip(" "))) + "... --[Truncated]-- ...\n"
        text += lines[end_line][:end_col] + "</error>" + lines[end_line][end_col:] + "\n"
    if end_line + 1 < len(lines):
        text += f"{lines[end_line + 1]}\n"
    return text


def format_error_block(code: str, errors: Sequence[Mapping[str, Any]], max_errors: int = 8) -> str:
    """The `{E}` of the correction prompt: the first `max_errors` errors, each with the code
    around it and `<error>` marks, then how many were omitted."""
    lines = code.split("\n")
    block = ""
    for number, error in enumerate(errors[:max_errors], start=1):
        block += f"\nError {number}:\n"
        block += "\nCorresponding Code:\n```lean4\n"
        block += _error_code(lines, error)
        block += "\n```\n"
        block += f"\nError Message: {error['data']}\n"
    if len(errors) > max_errors:
        block += f"\n... [Omitted {len(errors) - max_errors} more errors] ...\n"
    return block
