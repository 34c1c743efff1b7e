"""Validity checks of generation files, as plain functions over them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from prover_assets.records import Generation, RecordError, SampleKey, iter_records
from prover_assets.records.validity import CheckOutcome

__all__ = ["check_design_match", "check_rows_valid", "check_samples_per_problem"]


def check_rows_valid(path: Path, expected_rows: int | None = None) -> CheckOutcome:
    """Every row passes the contract (the strict reader), and the count is the recorded one."""
    try:
        rows = sum(1 for _ in iter_records(path, Generation))
    except RecordError as exc:
        return CheckOutcome(False, str(exc), {"error": str(exc)})
    matches = expected_rows is None or rows == expected_rows
    return CheckOutcome(
        matches,
        f"{rows} rows satisfy the contract"
        + ("" if matches else f", but the manifest records {expected_rows}"),
        {"rows": rows},
    )


def check_samples_per_problem(
    path: Path, problem_ids: Iterable[str], samples_per_problem: int, *, round: int = 0
) -> CheckOutcome:
    """Every problem has samples 0..n-1 of the round (a validity condition of the design)."""
    have = Counter(
        g.problem_id
        for g in iter_records(path, Generation)
        if g.round == round and g.sample_idx < samples_per_problem
    )
    short = sorted(p for p in problem_ids if have.get(p, 0) < samples_per_problem)
    return CheckOutcome(
        not short,
        f"{len(short)} problems have fewer than {samples_per_problem} samples",
        {"short": short[:20], "n": samples_per_problem},
    )


def _round0(path: Path) -> dict[SampleKey, Generation]:
    return {g.key: g for g in iter_records(path, Generation) if g.round == 0}


def _unset_counts(system: str, generations: Iterable[Generation]) -> dict[str, int]:
    """`<system> <field>` -> how many samples left that sampling field to the server."""
    return dict(Counter(f"{system} {name}" for g in generations for name in g.sampling.unset))


def check_design_match(baseline: Path, candidate: Path) -> CheckOutcome:
    """Round-0 prompts and every sampling field the requests carried identical between baseline
    and candidate, sample by sample, whichever engines drew them; a sample whose request left a
    field to the server's default cannot be paired (its value is unknown)."""
    base, cand = _round0(baseline), _round0(candidate)
    missing = sorted(set(base) ^ set(cand))
    differing = sorted(
        key
        for key in set(base) & set(cand)
        if base[key].design_identity != cand[key].design_identity
    )
    unset = _unset_counts("baseline", base.values()) | _unset_counts("candidate", cand.values())
    summary = (
        f"{len(differing)} samples differ in prompt or sampling, {len(missing)} keys are not in "
        "both"
    )
    if unset:
        summary += "; left to the server's default: " + ", ".join(
            f"{field} on {count} samples" for field, count in sorted(unset.items())
        )
    return CheckOutcome(
        not missing and not differing and not unset,
        summary,
        {
            "differing": [list(k) for k in differing[:20]],
            "unpaired": [list(k) for k in missing[:20]],
            "unset_fields": unset,
        },
    )
