"""The evaluation sets: miniF2F (all 244 enter) and MOBench (the verifier-supported subset).

Statements are normalised by Goedel's rule made safe (`normalise_statement`), so the prompt
statement is byte-identical to the baseline model's own evaluation wherever that rule applies.
MOBench is read whole (359 of 360: a problem's trusted preamble of declarations included) or,
with `preambles=False`, as the registered S2 subset of the seed system: the 135 problems whose
theorem stands alone.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from prover_assets.lean.extract import reinsertion_keeps_statement
from prover_assets.lean.statements import StatementError, normalise_statement, parse_statement
from prover_assets.records import Problem, iter_records, reason_kind
from prover_assets.records.models import ProblemId

__all__ = [
    "EvalSetError",
    "Unsupported",
    "goedel_prompt_statement",
    "load_minif2f",
    "load_mobench",
    "reason_histogram",
]


class EvalSetError(ValueError):
    """An evaluation file is malformed; the message names the file and line."""

    pass


@dataclass(frozen=True)
class Unsupported:
    """A problem left out of an evaluation set, with the reason."""

    problem_id: ProblemId  # an empty or padded id fails at its file:line
    reason: str
    informal_prefix: str  # still used to decontaminate the pool: same problem, other wording


class _MiniF2FRow(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    name: str
    problem_id: ProblemId  # an empty or padded id fails at its file:line
    split: str
    informal_prefix: str
    formal_statement: str
    lean4_code: str


class _MOBenchRow(_MiniF2FRow):
    """A MOBench row: a miniF2F row's fields, its header (the trusted preamble's imports) and
    the benchmark's own labels."""

    header: str
    solved: bool
    tags: list[str]
    category: str


def _row_id(row: _MiniF2FRow) -> str:
    """A source row's identity in its file: two rows of one problem id are refused."""
    return row.problem_id


def goedel_prompt_statement(lean4_code: str) -> str:
    """Goedel's own rule, verbatim; used only to check that the safe rule agrees with it."""
    return lean4_code.split(":= by")[0] + ":= by sorry"


def _problem(
    problem_id: str,
    source: str,
    split: str,
    lean4_code: str,
    informal_prefix: str,
    *,
    preambles: bool = True,
) -> Problem | Unsupported:
    try:
        statement = normalise_statement(lean4_code)
    except StatementError as exc:
        return Unsupported(problem_id, f"by_count:{exc}", informal_prefix)
    parsed = parse_statement(statement)
    if not parsed.supported or parsed.signature is None:
        return Unsupported(problem_id, parsed.reason or "unsupported", informal_prefix)
    if parsed.preamble_tokens and not preambles:
        first = parsed.preamble_tokens[0].text
        return Unsupported(problem_id, f"preamble_excluded:{first}", informal_prefix)
    if not reinsertion_keeps_statement(statement):
        return Unsupported(problem_id, "reinsertion_changes_statement", informal_prefix)
    return Problem(
        problem_id=problem_id,
        source=source,
        split=split,
        formal_statement=statement,
        informal_prefix=informal_prefix,
        statement_sha=parsed.statement_sha,
        alpha_sha=parsed.alpha_sha,
        header=parsed.header,
    )


def load_minif2f(path: str | Path) -> list[Problem]:
    """All miniF2F problems; any that cannot be taken as they are raises (no exclusions)."""
    problems = []
    # Every line holds a record (`iter_records` refuses empty ones): the n-th is line n.
    for line, row in enumerate(iter_records(path, _MiniF2FRow, key=_row_id), start=1):
        result = _problem(row.problem_id, "minif2f", row.split, row.lean4_code, row.informal_prefix)
        if isinstance(result, Unsupported):
            raise EvalSetError(
                f"{path}:{line}: miniF2F problem {row.problem_id} is unsupported ({result.reason}); "
                "the registered set admits no exclusions"
            )
        problems.append(result)
    return problems


def load_mobench(
    path: str | Path, *, preambles: bool = True
) -> tuple[list[Problem], list[Unsupported]]:
    """MOBench's verifier-supported problems, and one reason for each excluded one.

    `preambles=False`: only the problems without a preamble (the seed system's 135, the
    registered S2); the others are excluded as `preamble_excluded:<first word>`.
    """
    supported: list[Problem] = []
    unsupported: list[Unsupported] = []
    for row in iter_records(path, _MOBenchRow, key=_row_id):
        result = _problem(
            row.problem_id,
            "mobench",
            row.split,
            row.lean4_code,
            row.informal_prefix,
            preambles=preambles,
        )
        (unsupported if isinstance(result, Unsupported) else supported).append(result)
    return supported, unsupported


def reason_histogram(unsupported: list[Unsupported]) -> dict[str, int]:
    """How many problems were left out for each reason."""
    return dict(Counter(reason_kind(item.reason) for item in unsupported).most_common())
