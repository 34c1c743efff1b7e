"""Per-problem outcome groups, computed once, used by the correction selection and SFT builder.

For the first n samples of a round (n = `samples_per_problem`, the config's
`generation.n_samples`: sample_idx 0..n-1, the first n if more exist):
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

from prover_assets.records import SampleKey, Stage, Verification

__all__ = ["ProblemGroup", "ProblemOutcome", "problem_groups"]


class ProblemGroup(StrEnum):
    """How a problem's samples came out: all accepted, some, none, or none judged."""

    ALL_CORRECT = "all_correct"
    ALL_WRONG = "all_wrong"
    MIXED = "mixed"
    INVALID = "invalid"


@dataclass(frozen=True)
class ProblemOutcome:
    """One problem's samples of a round: how many, how many accepted, and its group."""

    problem_id: str
    group: ProblemGroup
    samples: int
    accepted: int

    @property
    def solved(self) -> bool:
        return self.accepted > 0


def problem_groups(
    keys: Iterable[SampleKey],
    verdicts: Mapping[SampleKey, Verification],
    *,
    samples_per_problem: int,
    round: int = 0,
) -> dict[str, ProblemOutcome]:
    """Outcome groups from the sample keys `(problem_id, sample_idx, round, cap_tokens)` of
    the generations and their verdicts."""
    samples: dict[str, list[SampleKey]] = defaultdict(list)
    for key in keys:
        if key.round == round and key.sample_idx < samples_per_problem:
            samples[key.problem_id].append(key)
    outcomes = {}
    for problem_id, group in samples.items():
        judged = [verdicts.get(key) for key in group]
        accepted = sum(1 for v in judged if v is not None and v.accepted)
        broken = any(v is None or v.stage is Stage.INFRASTRUCTURE for v in judged)
        if len(group) < samples_per_problem or broken:
            kind = ProblemGroup.INVALID
        elif accepted == samples_per_problem:
            kind = ProblemGroup.ALL_CORRECT
        elif accepted == 0:
            kind = ProblemGroup.ALL_WRONG
        else:
            kind = ProblemGroup.MIXED
        outcomes[problem_id] = ProblemOutcome(problem_id, kind, len(group), accepted)
    return outcomes
