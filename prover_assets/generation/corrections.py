"""Correction rounds: failed attempts of unsolved problems, shown their Lean errors, try again.

Parents of round r are the failed samples of round r-1 that carry Lean errors, of problems with
no accepted sample in round r-1. Failures without an error list (gate rejections, timeouts,
missing code) cannot be shown errors: they are counted as `no_repl_errors`, not corrected.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from prover_assets.generation.groups import problem_groups
from prover_assets.generation.prompts import correction_messages
from prover_assets.generation.runner import CorrectionCounts, SampleSpec
from prover_assets.lean.feedback import format_error_block
from prover_assets.records import Generation, Problem, SampleKey, Verification
from prover_assets.records.validity import CheckOutcome

__all__ = ["CorrectionPlan", "check_correction_children", "correction_specs", "plan_corrections"]


@dataclass
class CorrectionPlan:
    """The parents of a correction round (failed samples of unsolved problems) and what was left
    out."""

    round: int  # the correction round being planned
    solved_problems: list[str] = field(default_factory=list)
    unsolved_problems: list[str] = field(default_factory=list)
    parents: list[tuple[Generation, Verification]] = field(default_factory=list)
    no_repl_errors: int = 0

    def counts(self) -> CorrectionCounts:
        """How many problems were solved and unsolved, and how many parents were chosen."""
        return CorrectionCounts(
            solved_problems=len(self.solved_problems),
            unsolved_problems=len(self.unsolved_problems),
            parents=len(self.parents),
            no_repl_errors=self.no_repl_errors,
        )


def plan_corrections(
    previous: Mapping[SampleKey, Generation],
    verdicts: Mapping[SampleKey, Verification],
    *,
    round: int,
    samples_per_problem: int,
) -> CorrectionPlan:
    """`previous` and `verdicts` are round `round - 1`'s samples and their (current) verdicts."""
    plan = CorrectionPlan(round=round)
    outcomes = problem_groups(
        previous.keys(), verdicts, samples_per_problem=samples_per_problem, round=round - 1
    )
    for problem_id in sorted(outcomes):
        if outcomes[problem_id].solved:
            plan.solved_problems.append(problem_id)
            continue
        plan.unsolved_problems.append(problem_id)
        for key in sorted(
            k for k, g in previous.items() if g.problem_id == problem_id and g.round == round - 1
        ):
            verdict = verdicts.get(key)
            if verdict is None or verdict.accepted:
                continue
            if verdict.repl_errors:
                plan.parents.append((previous[key], verdict))
            else:
                plan.no_repl_errors += 1
    return plan


def correction_specs(
    plan: CorrectionPlan, problems: Mapping[str, Problem], *, samples_per_parent: int
) -> list[SampleSpec]:
    """The samples of a correction round: `samples_per_parent` children per parent, prompted with
    its errors."""
    specs = []
    for parent, verdict in plan.parents:
        assert verdict.repl_code is not None and verdict.repl_errors is not None
        messages = correction_messages(
            parent.messages,
            parent.completion_text,
            format_error_block(verdict.repl_code, verdict.repl_errors),
            plan.round,
        )
        key = parent.key
        for child in range(samples_per_parent):
            specs.append(
                SampleSpec(
                    problem=problems[parent.problem_id],
                    sample_idx=parent.sample_idx * samples_per_parent + child,
                    round=plan.round,
                    cap_tokens=parent.cap_tokens,
                    messages=tuple(messages),
                    parent=key,
                )
            )
    return specs


def check_correction_children(
    children: Sequence[Generation],
    previous: Mapping[SampleKey, Generation],
    verdicts: Mapping[SampleKey, Verification],
    *,
    samples_per_problem: int,
) -> CheckOutcome:
    """Every child has an existing, failed parent (with Lean errors) of an unsolved problem."""
    bad = []
    if children:
        plan = plan_corrections(
            previous, verdicts, round=children[0].round, samples_per_problem=samples_per_problem
        )
        parents = {g.key for g, _ in plan.parents}
        for child in children:
            parent = child.parent.key if child.parent else None
            if parent not in parents:
                bad.append(child.key)
    return CheckOutcome(
        not bad,
        f"{len(children) - len(bad)} of {len(children)} children have a valid parent",
        {"invalid_children": [list(k) for k in bad[:20]]},
    )
