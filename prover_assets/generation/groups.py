"""Per-problem outcome groups, computed once, used by the correction selection and SFT builder.

For the first `n` samples of a round (sample_idx 0..n-1, the first n if more exist):
- `all_correct`: all n accepted (solved n/n);
- `all_wrong`: none accepted;
- `mixed`: some accepted;
- `invalid`: fewer than n samples, a verdict missing, or an infrastructure failure among
  them; an invalid problem is never counted as solved n/n.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from prover_assets.records import Generation, Stage, Verification

__all__ = ["ProblemGroup", "ProblemOutcome", "problem_groups"]


class ProblemGroup(StrEnum):
    ALL_CORRECT = "all_correct"
    ALL_WRONG = "all_wrong"
    MIXED = "mixed"
    INVALID = "invalid"


@dataclass(frozen=True)
class ProblemOutcome:
    problem_id: str
    group: ProblemGroup
    samples: int
    accepted: int

    @property
    def solved(self) -> bool:
        return self.accepted > 0


def problem_groups(
    generations: Iterable[Generation],
    verdicts: Mapping[tuple, Verification],
    *,
    n: int,
    round: int = 0,
) -> dict[str, ProblemOutcome]:
    samples: dict[str, list[Generation]] = defaultdict(list)
    for generation in generations:
        if generation.round == round and generation.sample_idx < n:
            samples[generation.problem_id].append(generation)
    outcomes = {}
    for problem_id, group in samples.items():
        judged = [verdicts.get(g.key) for g in group]
        accepted = sum(1 for v in judged if v is not None and v.accepted)
        broken = any(v is None or v.stage is Stage.INFRASTRUCTURE for v in judged)
        if len(group) < n or broken:
            kind = ProblemGroup.INVALID
        elif accepted == n:
            kind = ProblemGroup.ALL_CORRECT
        elif accepted == 0:
            kind = ProblemGroup.ALL_WRONG
        else:
            kind = ProblemGroup.MIXED
        outcomes[problem_id] = ProblemOutcome(problem_id, kind, len(group), accepted)
    return outcomes
