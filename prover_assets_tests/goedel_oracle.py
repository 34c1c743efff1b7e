"""Goedel-Prover-V2's `problem_check` and compile view, written again from PROTOCOL.md.

An oracle for the bytes Lean must get: it shares no code with `prover_assets.lean.extract`
(regex substitutions where the product splits lines), so a test comparing the two catches a
change to either.
"""

from __future__ import annotations

import re


def goedel_remove_comments(text: str) -> str:
    text = re.sub(r"/-.*?-/", "", text, flags=re.DOTALL)
    return re.sub(r"--[^\n]*", "", text).strip()


def goedel_problem_check(statement: str, code: str) -> str | None:
    """Goedel's re-insertion; None where Goedel returns its error string."""
    if "apply?" in code or "exact?" in code:
        return None
    cleaned_statement = goedel_remove_comments(statement)
    found_statement = re.search(r"((?:theorem).*?:=\s*by\s*sorry)", cleaned_statement, re.DOTALL)
    cleaned_code = goedel_remove_comments(code)
    found_code = re.search(r"((?:^|\s)theorem\s+.*?:=\s*by)", cleaned_code, re.DOTALL)
    if found_statement is None or found_code is None:
        return None
    prefix = cleaned_statement[: found_statement.end()].replace("sorry", "")
    return prefix + cleaned_code[found_code.end() :]


def goedel_compile_view(text: str) -> str:
    kept = [line for line in text.split("\n") if not re.match(r"\s*(import|set_option|open)", line)]
    return "\n".join(kept)


def goedel_body(statement: str, code: str) -> str | None:
    """What Goedel's pipeline sends the REPL after the header, or None."""
    checked = goedel_problem_check(statement, code)
    return None if checked is None else goedel_compile_view(checked)
