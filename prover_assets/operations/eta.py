"""How long a full round takes: from what has been measured, with stated priors for the rest.

Every input is a `Range` (low, central, high), ordered by the time it implies: `low` is the
value that gives the shortest round (the fastest rate, the fewest tokens). A measured input has
low = central = high; an input not measured yet is a prior with a real spread, labelled as such.
A step's hours are computed bound by bound, so the table's low column is the round when every
unmeasured input turns out favourable and its high column when none does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Self

from prover_assets.config import ExperimentSpec, resolve_path
from prover_assets.generation.runner import CorrectionCounts, GenerationBatchResult
from prover_assets.sft.stages import SftShardsResult, TrainingResult
from prover_assets.verify.runner import VerificationResult
from prover_assets.verify.stages import TrainPoolResult

__all__ = [
    "BOUNDS",
    "FIXED_PRIORS_S",
    "INPUTS",
    "PRIORS",
    "PRIOR_LEAN_WORKERS",
    "EtaEstimate",
    "Range",
    "RoundPlan",
    "StepBalance",
    "eta_table",
    "eval_problems_upper_bound",
    "fixed_steps",
    "measured_inputs",
    "pool_round_label",
    "round_plan",
    "run_label",
    "step_balances",
    "step_names",
]

BOUNDS = ("low", "central", "high")

# Priors where nothing is measured yet: an 8B prover under vLLM on one H100-class GPU (one
# engine; the plan's engines sample at once), and the seed system's verifier (3.07 s of wall
# time per code-bearing sample at 8 workers).
PRIORS: dict[str, tuple[float, float, float]] = {
    "tokens_per_s": (6000.0, 3000.0, 1500.0),
    "mean_completion_tokens": (4000.0, 8000.0, 12000.0),
    "verify_s_per_code_sample": (1.5, 3.1, 6.0),  # wall seconds, PRIOR_LEAN_WORKERS busy
    "share_with_code": (0.6, 0.8, 0.95),
    "unsolved_share": (0.3, 0.5, 0.7),
    "sft_tokens_per_s": (8000.0, 4000.0, 2000.0),  # one GPU
    "sft_rows_per_problem": (1.0, 2.0, 4.0),
    "sft_row_tokens": (3000.0, 6000.0, 10000.0),
}
# Seconds of each step that scales with no sample count (its wall time measured end to end),
# and the fixed start-up of each generation and verification step (engine load, REPL start,
# self-test): wall time beyond the work that rates account for.
FIXED_PRIORS_S: dict[str, tuple[float, float, float]] = {
    "eval sets s": (5.0, 30.0, 120.0),
    "decontamination s": (5.0, 30.0, 120.0),
    "pool candidates s": (60.0, 600.0, 1800.0),
    "train pool s": (300.0, 1800.0, 3600.0),
    "demo format tuning s": (10.0, 60.0, 300.0),
    "SFT shards s": (30.0, 300.0, 900.0),
    "export s": (60.0, 600.0, 1800.0),
    "report s": (5.0, 60.0, 300.0),
    "generation startup s": (30.0, 180.0, 600.0),
    "verification startup s": (10.0, 120.0, 300.0),
}
PRIORS.update(FIXED_PRIORS_S)
# The Lean workers the verification prior was measured with: wall time per sample scales with
# their inverse (a measured rate is the configured workers' own).
PRIOR_LEAN_WORKERS = 8
INPUTS = tuple(PRIORS)
STARTUP_INPUTS = ("generation startup s", "verification startup s")


# How the round's steps are named, by the ETA and by the report that sets it beside what each
# step took: one rule, so that the two join by name.
TRAINING_STEP = "SFT training"


def run_label(system: str, eval_set: str, cap: int) -> str:
    """A system's run on an eval set at a cap: "baseline minif2f c256"."""
    return f"{system} {eval_set} c{cap}"


def pool_round_label(round: int) -> str:
    """Round 0 on the train pool, or a correction round."""
    return f"pool correction round {round}" if round else "pool round 0"


def step_names(label: str) -> tuple[str, str]:
    """The generation and the verification step of a run or a pool round."""
    return f"{label}: generate", f"{label}: verify"


@dataclass(frozen=True)
class EtaEstimate:
    """An `eta` materialization as the report reads it: when it was made, how many of its inputs
    came from each source ("measured" by full steps, the "preflight"'s smoke round, a "prior"),
    and hours (low, central, high) per step and in total."""

    materialized_at: str
    sources: Mapping[str, int]
    steps: Mapping[str, tuple[float, float, float]]
    total: tuple[float, float, float]

    @classmethod
    def of(cls, table: Mapping[str, Any], materialized_at: str) -> Self:
        """From `eta_table`'s result."""

        def bounds(hours: Mapping[str, float]) -> tuple[float, float, float]:
            low, central, high = (hours[b] for b in BOUNDS)
            return low, central, high

        sources: dict[str, int] = {}
        for found in table["inputs"].values():
            sources[found["source"]] = sources.get(found["source"], 0) + 1
        return cls(
            materialized_at,
            dict(sorted(sources.items())),
            {step["step"]: bounds(step) for step in table["steps"]},
            bounds(table["total_hours"]),
        )


@dataclass(frozen=True)
class Range:
    """A low / central / high estimate, and where it came from: `measured` by a full step, by
    the `preflight`'s smoke round, or a `prior`."""

    low: float
    central: float
    high: float
    source: str

    @classmethod
    def of(
        cls, name: str, measured: Mapping[str, float], preflight: Mapping[str, float] | None = None
    ) -> Range:
        for source, found in (("measured", measured), ("preflight", preflight or {})):
            if name in found:
                value = float(found[name])
                return cls(value, value, value, source)
        return cls(*PRIORS[name], "prior")

    def values(self) -> tuple[float, float, float]:
        return (self.low, self.central, self.high)


def _combine(f: Callable[..., float], *ranges: Range) -> dict[str, float]:
    """Apply `f` bound by bound (every input's low together, and so on)."""
    return {bound: f(*(r.values()[i] for r in ranges)) for i, bound in enumerate(BOUNDS)}


@dataclass(frozen=True)
class RoundPlan:
    """The work of one full round, from the experiment's configuration."""

    eval_problems: Mapping[str, int]  # problems per evaluation set
    eval_caps: Mapping[str, tuple[int, ...]]  # caps per evaluation set
    pool_problems: int
    pool_cap: int
    n_samples: int
    correction_rounds: int
    samples_per_parent: int
    max_rows_per_problem: int
    sft_epochs: int
    demo: bool = False  # a demo round also tunes its tiny base model
    lean_workers: int = PRIOR_LEAN_WORKERS  # the verifier's workers on this host
    engines: int = 1  # generation engines sampling at once (vLLM children, replicas)
    training_ranks: int = 1  # GPUs that train at once (DDP)
    iterations: int = 1  # expert iterations: each samples the pool, trains and evaluates again
    seeds: int = 1  # training seeds per iteration: each trains, exports and evaluates

    def repeats(self, step: str) -> int:
        """How many times a fixed step runs: the SFT shards once per iteration, the export once
        per iteration and seed, every other step once."""
        return {"SFT shards s": self.iterations, "export s": self.iterations * self.seeds}.get(
            step, 1
        )


def fixed_steps(plan: RoundPlan) -> tuple[str, ...]:
    """The round's steps that cost a time of their own, in the order they run (as inputs)."""
    return tuple(
        name
        for name in FIXED_PRIORS_S
        if name not in STARTUP_INPUTS and (plan.demo or name != "demo format tuning s")
    )


def _sample_steps(
    label: str, samples: Range, cap: int, inputs: Mapping[str, Range]
) -> list[dict[str, Any]]:
    """Generating and verifying `samples` at `cap`: the work at the measured rates, and each
    step's start-up."""
    generate = _combine(
        lambda n, t, r, w: (n * min(t, cap) / r + w) / 3600,
        samples,
        inputs["mean_completion_tokens"],
        inputs["tokens_per_s"],
        inputs["generation startup s"],
    )
    verify = _combine(
        lambda n, c, s, w: (n * c * s + w) / 3600,
        samples,
        inputs["share_with_code"],
        inputs["verify_s_per_code_sample"],
        inputs["verification startup s"],
    )
    generate_step, verify_step = step_names(label)
    return [{"step": generate_step, **generate}, {"step": verify_step, **verify}]


def _pool_steps(plan: RoundPlan, inputs: Mapping[str, Range]) -> list[dict[str, Any]]:
    """Round 0 on the train pool, the correction rounds and SFT training (of every seed). A
    later iteration is costed as the first (an over-estimate where it samples only the
    problems still unsolved)."""
    pool_samples = plan.pool_problems * plan.n_samples
    steps = _sample_steps(pool_round_label(0), _fixed(pool_samples), plan.pool_cap, inputs)
    # Children come from the failed samples of unsolved problems; later rounds are bounded by
    # the first round's unsolved share (an over-estimate).
    children = Range(
        *(pool_samples * u * plan.samples_per_parent for u in inputs["unsolved_share"].values()),
        inputs["unsolved_share"].source,
    )
    for round in range(1, plan.correction_rounds + 1):
        steps += _sample_steps(pool_round_label(round), children, plan.pool_cap, inputs)
    training = _combine(
        lambda r, t, s: (
            plan.seeds
            * plan.pool_problems
            * min(r, plan.max_rows_per_problem)
            * t
            * plan.sft_epochs
            / s
            / 3600
        ),
        inputs["sft_rows_per_problem"],
        inputs["sft_row_tokens"],
        inputs["sft_tokens_per_s"],
    )
    seeds = f" ({plan.seeds} seeds)" if plan.seeds > 1 else ""
    return [*steps, {"step": f"{TRAINING_STEP}{seeds}", **training}]


def eval_problems_upper_bound(spec: ExperimentSpec, eval_set: str) -> int:
    """An eval set's problem count before it is materialized: its limit or its file's line count
    (an upper bound when a filter drops problems)."""
    eval_spec = spec.eval_sets[eval_set]
    path = resolve_path(eval_spec.file.path, f"eval_sets.{eval_set}.file.path")
    lines = sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
    return min(lines, eval_spec.limit) if eval_spec.limit else lines


def _fixed(count: float) -> Range:
    return Range(count, count, count, "measured")


def _scaled_priors(inputs: dict[str, Range], plan: RoundPlan) -> dict[str, Range]:
    """The priors measured on another shape of box, scaled to the plan's: tokens per second
    on one engine (times the engines), training tokens per second on one GPU (times the ranks),
    verification wall time per sample at PRIOR_LEAN_WORKERS workers (times their share of the
    plan's). Measured rates are the configured box's own."""
    scales = {
        "tokens_per_s": (plan.engines, f"one engine, scaled to {plan.engines}"),
        "sft_tokens_per_s": (plan.training_ranks, f"one GPU, scaled to {plan.training_ranks}"),
        "verify_s_per_code_sample": (
            PRIOR_LEAN_WORKERS / plan.lean_workers,
            f"{PRIOR_LEAN_WORKERS} workers, scaled to {plan.lean_workers}",
        ),
    }
    scaled = dict(inputs)
    for name, (factor, said) in scales.items():
        if inputs[name].source == "prior" and factor != 1:
            scaled[name] = Range(*(v * factor for v in inputs[name].values()), f"prior ({said})")
    # A completion is never longer than the plan's largest cap (the demo's 256 against the
    # prior's 8,000): the prior as the plan can use it.
    cap = max(plan.pool_cap, *(c for caps in plan.eval_caps.values() for c in caps))
    completion = inputs["mean_completion_tokens"]
    if completion.source == "prior" and completion.high > cap:
        scaled["mean_completion_tokens"] = Range(
            *(min(v, cap) for v in completion.values()), f"prior (at most the largest cap, {cap})"
        )
    return scaled


def eta_table(
    plan: RoundPlan, measured: Mapping[str, float], preflight: Mapping[str, float] | None = None
) -> dict[str, Any]:
    """Hours per step and in total (low / central / high), and each input with its source:
    measured by full steps, else by the preflight's smoke round (`preflight`), else a prior."""
    names = [n for n in INPUTS if n not in FIXED_PRIORS_S or n in STARTUP_INPUTS]
    names += fixed_steps(plan)
    inputs = {name: Range.of(name, measured, preflight) for name in names}
    inputs = _scaled_priors(inputs, plan)

    def hours(name: str) -> dict[str, float]:
        return _combine(lambda v: plan.repeats(name) * v / 3600, inputs[name])

    steps: list[dict[str, Any]] = [
        {"step": name.removesuffix(" s"), **hours(name)} for name in fixed_steps(plan)
    ]

    def evaluation(system: str) -> list[dict[str, Any]]:
        return [
            step
            for eval_set, problems in plan.eval_problems.items()
            for cap in plan.eval_caps[eval_set]
            for step in _sample_steps(
                run_label(system, eval_set, cap), _fixed(problems * plan.n_samples), cap, inputs
            )
        ]

    steps += evaluation("baseline")
    for iteration in range(1, plan.iterations + 1):
        prefix = f"iteration {iteration}: " if plan.iterations > 1 else ""
        candidates = [
            step
            for seed in range(1, plan.seeds + 1)
            for step in evaluation(f"candidate (seed {seed})" if plan.seeds > 1 else "candidate")
        ]
        steps += [
            {**step, "step": prefix + step["step"]}
            for step in [*_pool_steps(plan, inputs), *candidates]
        ]
    total = {bound: sum(step[bound] for step in steps) for bound in BOUNDS}
    return {
        "steps": steps,
        "total_hours": total,
        "inputs": {
            name: {
                **dict(zip(BOUNDS, r.values(), strict=True)),
                "source": r.source,
            }
            for name, r in inputs.items()
        },
    }


def _mean_startup(walls: Sequence[tuple[float, float]]) -> float | None:
    """The mean of (step wall - its measured work) over steps, never below 0; None for none."""
    if not walls:
        return None
    return sum(max(wall - work, 0.0) for wall, work in walls) / len(walls)


def _ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator > 0 else None


def measured_inputs(
    generations: Sequence[GenerationBatchResult],
    verdicts: Sequence[VerificationResult],
    *,
    correction_plan: CorrectionCounts | None = None,
    train_pool: TrainPoolResult | None = None,
    sft_shards: SftShardsResult | None = None,
    sft_checkpoint: TrainingResult | None = None,
    step_seconds: Mapping[str, float] | None = None,
    generation_walls: Sequence[tuple[GenerationBatchResult, float]] = (),
    verification_walls: Sequence[tuple[VerificationResult, float]] = (),
) -> dict[str, float]:
    """The inputs that the results of materialized steps measure.

    Only work done in a materialization counts (`generated_now`, `code_bearing_now`), so an
    asset that reused finished output measures nothing; rates are pooled as total work over
    total time. `step_seconds` are the measured wall times of fixed steps (by input name);
    `generation_walls` / `verification_walls` pair a step's result with its wall time, whose
    part beyond the measured work is that step's start-up.
    """
    measured: dict[str, float | None] = dict(step_seconds or {})
    measured["generation startup s"] = _mean_startup(
        [
            (wall, g.generated_now * (g.mean_completion_tokens or 0.0) / g.tokens_per_s)
            for g, wall in generation_walls
            if g.generated_now and g.tokens_per_s
        ]
    )
    measured["verification startup s"] = _mean_startup(
        [(wall, v.wall_s) for v, wall in verification_walls if v.code_bearing_now]
    )
    made = [g for g in generations if g.generated_now and g.tokens_per_s]
    tokens = [(g.mean_completion_tokens or 0.0) * g.generated_now for g in made]
    samples = sum(g.generated_now for g in made)
    measured["tokens_per_s"] = _ratio(
        sum(tokens), sum(t / g.tokens_per_s for t, g in zip(tokens, made, strict=True))
    )
    measured["mean_completion_tokens"] = _ratio(sum(tokens), samples)
    measured["share_with_code"] = _ratio(samples - sum(g.no_code for g in made), samples)
    checked = [v for v in verdicts if v.code_bearing_now]
    measured["verify_s_per_code_sample"] = _ratio(
        sum(v.wall_s for v in checked), sum(v.code_bearing_now for v in checked)
    )
    if correction_plan:
        unsolved = correction_plan.unsolved_problems
        measured["unsolved_share"] = _ratio(unsolved, unsolved + correction_plan.solved_problems)
    if sft_shards and train_pool:
        measured["sft_rows_per_problem"] = _ratio(sft_shards.counts.written, train_pool.pool)
        measured["sft_row_tokens"] = _ratio(sft_shards.counts.tokens, sft_shards.counts.written)
    if sft_checkpoint and sft_checkpoint.tokens_per_s_this_run:
        measured["sft_tokens_per_s"] = sft_checkpoint.tokens_per_s_this_run
    return {name: value for name, value in measured.items() if value is not None}


@dataclass(frozen=True)
class StepBalance:
    """One sampling step whose generation and verification overlap: which side bounds it, by
    how much, and the Lean workers that would make the two even (verification's time scales
    with the inverse of the workers; central estimates)."""

    step: str
    generate_h: float
    verify_h: float
    workers: int

    @property
    def bound_by(self) -> str:
        return "Lean verification" if self.verify_h > self.generate_h else "GPU generation"

    @property
    def factor(self) -> float:
        low, high = sorted((self.generate_h, self.verify_h))
        return high / low if low > 0 else math.inf

    @property
    def balancing_workers(self) -> int:
        if self.generate_h <= 0:
            return self.workers
        return max(1, math.ceil(self.workers * self.verify_h / self.generate_h))

    def describe(self) -> str:
        return (
            f"{self.step}: {self.bound_by} bounds it, {self.factor:.1f}x the other side "
            f"(generate {self.generate_h:.2f} h, verify {self.verify_h:.2f} h at "
            f"{self.workers} workers); {self.balancing_workers} workers would balance"
        )


def step_balances(table: Mapping[str, Any], workers: int) -> list[StepBalance]:
    """Each sampling step of an `eta_table`, generation against verification (central)."""
    central = {step["step"]: step["central"] for step in table["steps"]}
    return [
        StepBalance(name.removesuffix(": generate"), hours, central[verify], workers)
        for name, hours in central.items()
        if name.endswith(": generate")
        and (verify := name.removesuffix("generate") + "verify") in central
    ]


def round_plan(
    spec: ExperimentSpec,
    eval_problems: Mapping[str, int],
    lean_workers: int,
    engines: int,
    training_ranks: int,
) -> RoundPlan:
    """What a full round of `spec` does, with the eval sets' problem counts, the verifier's
    workers on this host, the generation engines that sample at once and the GPUs that train."""
    return RoundPlan(
        eval_problems=dict(eval_problems),
        eval_caps={name: tuple(spec.caps_of(name)) for name in spec.eval_sets},
        pool_problems=spec.pool.size,
        pool_cap=spec.sft.cap,
        n_samples=spec.generation.n_samples,
        correction_rounds=spec.corrections.rounds,
        samples_per_parent=spec.corrections.samples_per_parent,
        max_rows_per_problem=spec.sft.max_per_problem,
        sft_epochs=spec.training.epochs,
        demo=spec.demo is not None,
        iterations=spec.iterations,
        seeds=len(spec.training.all_seeds()),
        lean_workers=lean_workers,
        engines=engines,
        training_ranks=training_ranks,
    )
