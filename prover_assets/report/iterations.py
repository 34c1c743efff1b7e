"""Expert iterations and training seeds in the report: every comparison past the registered one
(exploratory, never PRIMARY), the spread of the candidate over training seeds, and the
expert-iteration curve (pool problems solved, evaluation solved@k, samples and tokens spent)."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from prover_assets.generation.stages import solved_problems
from prover_assets.report.analysis import compare_runs, correction_lift
from prover_assets.report.runs import RunData, RunFiles
from prover_assets.report.summary import (
    Comparison,
    CurvePoint,
    ExploratoryComparison,
    SeedRow,
    SeedSpreadRow,
)

__all__ = [
    "CandidateRuns",
    "IterationInputs",
    "exploratory_comparisons",
    "iteration_curve",
    "seed_spread",
]

RunKey = tuple[str, int]  # (eval set, cap)


@dataclass(frozen=True)
class CandidateRuns:
    """One iteration's candidate of one training seed: its runs by (eval set, cap)."""

    iteration: int
    seed: int
    runs: Mapping[RunKey, RunFiles]


@dataclass(frozen=True)
class IterationInputs:
    """What a graph of several iterations or training seeds adds to the report: every
    candidate (the registered one, iteration 1 of the registered seed, included), each
    iteration's pool rounds, and the registered eval set and cap the spread and curve read."""

    registered_seed: int
    candidates: Sequence[CandidateRuns]
    pool_rounds: Sequence[Sequence[tuple[Path, Path]]]  # per iteration, its rounds in order
    primary: RunKey

    def registered(self, candidate: CandidateRuns) -> bool:
        return candidate.iteration == 1 and candidate.seed == self.registered_seed

    def of(self, iteration: int, seed: int) -> CandidateRuns:
        return next(c for c in self.candidates if (c.iteration, c.seed) == (iteration, seed))


def _pairings(
    candidate: CandidateRuns, inputs: IterationInputs, keys: Sequence[RunKey]
) -> list[tuple[str, str, RunKey, CandidateRuns | None]]:
    """What `candidate` is compared with, on each eval set and cap: (the comparison in words,
    against whom, the run's key, the earlier candidate or None for the baseline). The registered
    candidate against the baseline is the registered comparison, not one of these."""
    pairings: list[tuple[str, str, RunKey, CandidateRuns | None]] = []
    who = f"iteration {candidate.iteration}"
    for key in keys:
        if not inputs.registered(candidate):
            words = f"{who}, seed {candidate.seed} against the baseline"
            pairings.append((words, "baseline", key, None))
        if candidate.iteration > 1 and candidate.seed == inputs.registered_seed:
            whom = f"iteration {candidate.iteration - 1}"
            words = f"{who} against {whom}, seed {candidate.seed}"
            before = inputs.of(candidate.iteration - 1, candidate.seed)
            pairings.append((words, whom, key, before))
    return pairings


def exploratory_comparisons(
    baselines: Mapping[RunKey, RunData],
    inputs: IterationInputs,
    load: Callable[[RunFiles], RunData],
    *,
    k: int,
    alpha: float,
    resamples: int,
    seed: int,
) -> list[ExploratoryComparison]:
    """Every comparison but the registered one, each labelled exploratory: each iteration and
    seed against the baseline, and each iteration of the registered seed against the one before.
    `load` reads a run's files (`RunFiles -> RunData`)."""
    loaded: dict[tuple[int, int, RunKey], RunData] = {}

    def run(candidate: CandidateRuns, key: RunKey) -> RunData:
        at = (candidate.iteration, candidate.seed, key)
        if at not in loaded:
            loaded[at] = load(candidate.runs[key])
        return loaded[at]

    comparisons = []
    for candidate in inputs.candidates:
        for words, whom, key, before in _pairings(candidate, inputs, list(baselines)):
            against = baselines[key] if before is None else run(before, key)
            comparison = compare_runs(
                against,
                run(candidate, key),
                k=k,
                alpha=alpha,
                resamples=resamples,
                seed=seed,
                exploratory=words,
            )
            comparisons.append(
                ExploratoryComparison(
                    **dict(comparison),
                    iteration=candidate.iteration,
                    seed=candidate.seed,
                    against=whom,
                    what=words,
                )
            )
    return comparisons


def seed_spread(
    registered: Comparison,
    exploratory: Sequence[ExploratoryComparison],
    inputs: IterationInputs,
) -> list[SeedSpreadRow]:
    """Per iteration, on the registered eval set and cap: each seed's solved@k against the
    baseline and its decision, their range and standard deviation (n - 1), and whether every
    seed's decision agrees with the registered seed's, said in a sentence."""
    eval_set, cap = inputs.primary
    against_baseline: dict[tuple[int, int], Comparison] = {
        (c.iteration, c.seed): c
        for c in exploratory
        if c.against == "baseline" and (c.eval_set, c.cap) == (eval_set, cap)
    }
    against_baseline[(1, inputs.registered_seed)] = registered
    seeds = [
        inputs.registered_seed,
        *sorted({c.seed for c in inputs.candidates} - {inputs.registered_seed}),
    ]
    rows = []
    for iteration in sorted({c.iteration for c in inputs.candidates}):
        per_seed = [
            SeedRow(
                seed=s,
                solved_at_k=against_baseline[(iteration, s)].candidate.solved_at_k,
                decision=against_baseline[(iteration, s)].decision,
                registered=iteration == 1 and s == inputs.registered_seed,
            )
            for s in seeds
        ]
        solved = [row.solved_at_k for row in per_seed]
        reference = per_seed[0].decision
        disagreeing = [row.seed for row in per_seed if row.decision != reference]
        rows.append(
            SeedSpreadRow(
                iteration=iteration,
                eval_set=eval_set,
                cap=cap,
                k=registered.k,
                problems=registered.candidate.problems,
                baseline_solved_at_k=registered.baseline.solved_at_k,
                seeds=per_seed,
                min=min(solved),
                max=max(solved),
                sd=statistics.stdev(solved) if len(solved) > 1 else None,
                agree=not disagreeing,
                sentence=_agreement(iteration, per_seed, disagreeing),
            )
        )
    return rows


def _agreement(iteration: int, per_seed: Sequence[SeedRow], disagreeing: list[int]) -> str:
    first = per_seed[0]
    whose = f"the registered seed's ({first.seed})"
    if len(per_seed) == 1:
        return f"Iteration {iteration}: one training seed, so no spread is measured."
    if not disagreeing:
        return (
            f"Iteration {iteration}: every one of the {len(per_seed)} training seeds agrees with "
            f"{whose} decision: {first.decision}."
        )
    return (
        f"Iteration {iteration}: {len(disagreeing)} of {len(per_seed)} training seeds "
        f"(seed {', '.join(map(str, disagreeing))}) disagree with {whose} decision "
        f"({first.decision}): training variance alone could change the answer."
    )


def iteration_curve(
    registered: Comparison,
    exploratory: Sequence[ExploratoryComparison],
    inputs: IterationInputs,
) -> list[CurvePoint]:
    """Per iteration (0: the baseline): pool problems solved so far, pool samples and completion
    tokens spent in it, and the registered seed's solved@k on the registered eval set and cap
    with its Wilson interval."""
    eval_set, cap = inputs.primary
    evaluations: dict[int, Comparison] = {
        c.iteration: c
        for c in exploratory
        if c.against == "baseline"
        and c.seed == inputs.registered_seed
        and (c.eval_set, c.cap) == (eval_set, cap)
    }
    evaluations[1] = registered
    baseline = registered.baseline
    rows = [
        CurvePoint(
            iteration=0,
            pool_solved_cumulative=0,
            pool_samples=0,
            pool_completion_tokens=0,
            solved_at_k=baseline.solved_at_k,
            wilson=baseline.wilson,
            problems=baseline.problems,
        )
    ]
    solved: set[str] = set()
    for iteration, rounds in enumerate(inputs.pool_rounds, start=1):
        lift = correction_lift(rounds)
        solved |= solved_problems(rounds)
        side = evaluations[iteration].candidate
        rows.append(
            CurvePoint(
                iteration=iteration,
                pool_solved_cumulative=len(solved),
                pool_samples=sum(r.samples for r in lift),
                pool_completion_tokens=sum(r.completion_tokens for r in lift),
                solved_at_k=side.solved_at_k,
                wilson=side.wilson,
                problems=side.problems,
            )
        )
    return rows
