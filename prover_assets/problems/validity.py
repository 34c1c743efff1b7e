"""Validity checks of the problem assets, as plain functions over their files."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from prover_assets.lean.statements import parse_statement
from prover_assets.problems.eval_sets import goedel_prompt_statement
from prover_assets.problems.pool import PoolCandidatesResult
from prover_assets.problems.stages import EvalSetResult
from prover_assets.records import Problem, iter_records, read_records
from prover_assets.records.validity import CheckOutcome

__all__ = [
    "check_counts_reconcile",
    "check_goedel_normalisation",
    "check_ids_unique",
    "check_pool_counts",
    "check_statements_parse",
]


def check_counts_reconcile(counts: EvalSetResult) -> CheckOutcome:
    """rows in = supported + unsupported, and written = supported - limited out."""
    reconciles = counts.rows_in == counts.supported + counts.unsupported and (
        counts.written == counts.supported - counts.limited_out
    )
    return CheckOutcome(
        reconciles,
        f"{counts.rows_in} in = {counts.supported} supported + {counts.unsupported} "
        f"unsupported; {counts.written} written = {counts.supported} supported - "
        f"{counts.limited_out} beyond the configured limit",
        counts.model_dump(
            include={"rows_in", "supported", "unsupported", "limited_out", "written"}
        ),
    )


def check_ids_unique(problems_file: Path) -> CheckOutcome:
    """No problem id appears twice in the problems file."""
    ids = Counter(json.loads(line)["problem_id"] for line in problems_file.read_text().splitlines())
    duplicates = sorted(problem_id for problem_id, n in ids.items() if n > 1)
    return CheckOutcome(
        not duplicates,
        f"{len(ids)} ids, {len(duplicates)} duplicated",
        {"duplicates": duplicates[:20]},
    )


def check_statements_parse(problems_file: Path) -> CheckOutcome:
    """Every formal statement lexes and splits into header and theorem."""
    failures = [
        f"{problem.problem_id}: {parsed.reason}"
        for problem in iter_records(problems_file, Problem)
        if not (parsed := parse_statement(problem.formal_statement)).supported
    ]
    return CheckOutcome(
        not failures, f"{len(failures)} statements do not parse", {"failures": failures[:20]}
    )


def check_goedel_normalisation(source_file: Path, problems_file: Path) -> CheckOutcome:
    """Every prompt statement is byte-identical to Goedel's own `split(":= by")` rule wherever
    that rule applies (one literal `:= by` in the source). Where a preamble holds another before
    the theorem's (MOBench's `instance ... := by infer_instance`) Goedel's rule would cut the
    preamble, and where the theorem's is line-broken (`:=\n  by sorry`) it would append a
    second proof: those problems are counted and named instead."""
    goedel, applies = {}, set()
    for line in source_file.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        goedel[row["problem_id"]] = goedel_prompt_statement(row["lean4_code"])
        if row["lean4_code"].count(":= by") == 1:
            applies.add(row["problem_id"])
    problems = read_records(problems_file, Problem)
    ruled = [p for p in problems if p.problem_id in applies]
    mismatched = [p.problem_id for p in ruled if goedel.get(p.problem_id) != p.formal_statement]
    not_applicable = [p.problem_id for p in problems if p.problem_id not in applies]
    return CheckOutcome(
        not mismatched,
        f"{len(ruled) - len(mismatched)} of {len(ruled)} byte-identical to Goedel's rule"
        + (f"; {len(not_applicable)} where it does not apply" if not_applicable else ""),
        {"mismatched": mismatched[:20], "goedel_rule_not_applicable": not_applicable[:20]},
    )


def check_pool_counts(counts: PoolCandidatesResult, candidates_file: Path) -> CheckOutcome:
    """rows in = candidates + every drop (the drops summed here, not the recorded total), and
    the file holds exactly the candidates counted."""
    lines = sum(1 for _ in candidates_file.open("rb"))
    dropped = sum(counts.drops().values())
    passed = (
        counts.rows_in == counts.written + dropped
        and dropped == counts.dropped
        and lines == counts.written
    )
    return CheckOutcome(
        passed,
        f"{counts.rows_in} rows = {counts.written} candidates + {dropped} dropped; "
        f"{lines} lines in the file",
        {
            "rows_in": counts.rows_in,
            "written": counts.written,
            "dropped": dropped,
            "file_lines": lines,
        },
    )
