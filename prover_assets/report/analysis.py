"""What the report says, computed: per-system tables, the paired comparison, the guard that
decides PRIMARY, and the refusals.

A run (`report.runs`) is one system's generations and verdicts on one evaluation set at one
cap. Every number is computed from the files; nothing is carried over from a manifest's counts.
Comparisons are
refused when they cannot be made honestly: different caps, different problems, missing
samples, stale verdicts, different verifiers; different sampling or prompts unless an override
is given (and then recorded).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

from prover_assets.records import (
    SAMPLING_FIELDS,
    Generation,
    Reason,
    SampleKey,
    SamplingSettings,
    Stage,
    Verification,
    code_sha256,
    iter_records,
)
from prover_assets.records.manifest import read_manifest
from prover_assets.records.staleness import current_verdicts_by_hash
from prover_assets.report.prereg import Prereg, RegisteredVerifier
from prover_assets.report.runs import ComparisonRefused, RunData, run_provenance
from prover_assets.report.summary import (
    Cell,
    ComparedSystem,
    Comparison,
    LiftRow,
    McNemarTable,
    PairedProblem,
    PooledWilson,
    ProblemCounts,
    ProblemSide,
    SolvedShare,
    SystemSummary,
)
from prover_assets.stats import (
    Interval,
    cluster_bootstrap_mean,
    mcnemar_exact,
    mcnemar_power,
    paired_bootstrap_difference,
    pass_at_k,
    solved_at_k,
    wilson_interval,
)
from prover_assets.verify.validity import VerifierIdentity

__all__ = [
    "DECISIONS",
    "INVALID",
    "compare_runs",
    "correction_lift",
    "decide",
    "mcnemar_table",
    "power_table",
    "summarize_run",
]

DECISIONS = ("success", "significant degradation", "no detectable improvement")
# The decision of a comparison with a failed validity condition (report.validity), whatever its
# test says: the pre-registration calls such a run pair invalid, not negative.
INVALID = "INVALID"


GROUPED_REASON_KINDS = frozenset({"axiom", "infrastructure", "reinsertion", "no_code"})


def _reason_class(reason: Reason) -> str:
    """Reasons grouped for the histogram: `axiom:*`, `infrastructure:*`, ... by their kind;
    `banned:*` stay apart (which ban fired is the point)."""
    grouped = reason.detail is not None and reason.kind in GROUPED_REASON_KINDS
    return reason.kind if grouped else str(reason)


def _at_k(
    run: RunData, ks: Sequence[int], n: Mapping[str, int], c: Mapping[str, int]
) -> tuple[dict[int, SolvedShare | None], dict[int, float | None]]:
    """solved@k with its Wilson interval, and mean pass@k, for each k (None where a problem
    has fewer than k samples)."""
    problems = list(n)
    solved: dict[int, SolvedShare | None] = {}
    for k in ks:
        if k > min(n.values()):
            solved[k] = None
            continue
        count = sum(solved_at_k(run.accepted[p], k) for p in problems)
        low, high = wilson_interval(count, len(problems))
        solved[k] = SolvedShare(
            solved=count, share=count / len(problems), wilson_low=low, wilson_high=high
        )
    pass_k: dict[int, float | None] = {}
    for k in ks:
        values = [pass_at_k(n[p], c[p], k) for p in problems]
        pass_k[k] = None if any(v is None for v in values) else sum(values) / len(values)
    return solved, pass_k


def _pass_at_k_bands(
    problems: Sequence[str],
    n: Mapping[str, int],
    c: Mapping[str, int],
    ks: Sequence[int],
    *,
    resamples: int,
    seed: int,
) -> dict[int, Interval | None]:
    """Mean pass@k with its cluster-bootstrap interval (problems resampled), for each k that
    every problem has samples for."""
    bands: dict[int, Interval | None] = {}
    for k in ks:
        values = [pass_at_k(n[p], c[p], k) for p in problems]
        if any(v is None for v in values):
            bands[k] = None
            continue
        interval = cluster_bootstrap_mean(
            [float(v) for v in values if v is not None], resamples=resamples, seed=seed
        )
        bands[k] = interval
    return bands


def _verdict_counts(run: RunData, stages: Counter[str]) -> dict[str, int]:
    """Timeouts (after their re-check, and before it: every verdict whose first attempt timed
    out), copied verdicts, and infrastructure verdicts (not judgements: scored as unsolved
    samples, and counted so that nobody mistakes them)."""
    first_timed_out = sum(v.first_attempt_timed_out for v in run.verdicts.values())
    return {
        "timeouts": stages.get(Stage.TIMEOUT.value, 0),
        "timeouts_before_recheck": first_timed_out,
        "verdicts_copied": sum(v.copied for v in run.verdicts.values()),
        "infrastructure": stages.get(Stage.INFRASTRUCTURE.value, 0),
    }


def summarize_run(run: RunData, *, ks: Sequence[int], resamples: int, seed: int) -> SystemSummary:
    """The per-system table of one run."""
    problems = [p.problem_id for p in run.problems]
    per_problem_n = {p: len(run.accepted[p]) for p in problems}
    per_problem_c = {p: sum(run.accepted[p].values()) for p in problems}
    solved, pass_k = _at_k(run, ks, per_problem_n, per_problem_c)
    pass_k_bands = _pass_at_k_bands(
        problems, per_problem_n, per_problem_c, ks, resamples=resamples, seed=seed
    )
    pass1 = cluster_bootstrap_mean(
        [per_problem_c[p] / per_problem_n[p] for p in problems], resamples=resamples, seed=seed
    )
    total_c, total_n = sum(per_problem_c.values()), sum(per_problem_n.values())
    pooled_low, pooled_high = wilson_interval(total_c, total_n)
    stages = Counter(v.stage.value for v in run.verdicts.values())
    reasons = Counter(_reason_class(r) for v in run.verdicts.values() for r in v.reasons)
    rewritten = sum(
        1 for v in run.verdicts.values() if v.accepted and v.displayed_statement_faithful is False
    )
    samples = list(run.samples.values())
    return SystemSummary(
        system=run.files.system,
        eval_set=run.files.eval_set,
        cap=run.files.cap,
        model_revs=sorted(run.model_revs),
        problems=len(problems),
        samples=len(run.verdicts),
        samples_per_problem=min(per_problem_n.values()),
        solved_at_k=solved,
        pass_at_k=pass_k,
        pass_at_k_cluster=pass_k_bands,
        pass1_cluster=pass1,
        pass1_pooled_wilson=PooledWilson(
            estimate=total_c / total_n,
            low=pooled_low,
            high=pooled_high,
            note="anti-conservative: treats every sample as independent",
        ),
        mean_effective_max_tokens=sum(s.max_tokens for s in samples) / len(samples),
        mean_completion_tokens=sum(s.completion_tokens for s in samples) / len(samples),
        accepted_samples=total_c,
        hit_cap_share=sum(s.finish_reason == "length" for s in samples) / len(samples),
        context_clipped_share=sum(s.context_clipped for s in samples) / len(samples),
        stages=dict(stages),
        reasons=dict(reasons.most_common()),
        **_verdict_counts(run, stages),
        accepted_but_rewritten=rewritten,
        verifier=run.identity,
        simulated=run.simulated,
        per_problem={p: ProblemCounts(n=per_problem_n[p], c=per_problem_c[p]) for p in problems},
        provenance=run_provenance(run.files),
    )


def decide(candidate_only: int, baseline_only: int, p_value: float, alpha: float) -> str:
    """The registered decision rule."""
    if p_value < alpha and candidate_only > baseline_only:
        return DECISIONS[0]
    if p_value < alpha and candidate_only < baseline_only:
        return DECISIONS[1]
    return DECISIONS[2]


def _design_mismatches(baseline: RunData, candidate: RunData) -> list[str]:
    problems = []
    if baseline.sampling != candidate.sampling or len(baseline.sampling) != 1:
        problems.append(
            f"sampling differs: baseline {baseline.sampling_in_words}, candidate {candidate.sampling_in_words}"
        )
    unset = sorted(
        {
            name
            for run in (baseline, candidate)
            for values in run.sampling
            for name, value in zip(SAMPLING_FIELDS, values, strict=True)
            if value is None
        }
    )
    if unset:
        problems.append(
            f"sampling fields left to the server's default (values unknown): {', '.join(unset)}"
        )
    differing = [
        k
        for k in set(baseline.samples) & set(candidate.samples)
        if k.round == 0 and baseline.samples[k].design != candidate.samples[k].design
    ]
    if differing:
        problems.append(
            f"round-0 prompts or sampling differ on {len(differing)} samples "
            f"(e.g. {sorted(differing)[0]})"
        )
    return problems


def _primary_reasons(
    baseline: RunData,
    candidate: RunData,
    k: int,
    prereg: Prereg | None,
    override: str | None,
    gate_overrides: Sequence[str],
) -> list[str]:
    if prereg is None:
        return ["no pre-registration given"]
    design = prereg.design
    reasons = []
    if not prereg.hash_matches:
        reasons.append("the pre-registration block does not match its recorded sha256")
    if baseline.files.eval_set != design.problem_set:
        reasons.append(f"problem set {baseline.files.eval_set}, registered {design.problem_set}")
    if len(baseline.problems) != design.problem_count:
        reasons.append(f"{len(baseline.problems)} problems, registered {design.problem_count}")
    source = read_manifest(baseline.files.problems.parent)["inputs"][0]["sha256"]
    if source != design.problems_sha256:
        reasons.append("the problems come from another file than the registered one")
    if baseline.model_revs != {design.baseline_revision}:
        reasons.append(
            f"baseline revision {', '.join(sorted(baseline.model_revs))}, registered "
            f"{design.baseline_revision}"
        )
    if not all(rev.startswith("sft-") for rev in candidate.model_revs):
        reasons.append("the candidate is not this project's SFT export")
    registered = SamplingSettings(design.temperature, design.top_p, design.top_k or 0)
    registered_sampling = {tuple(registered.carried().values())}
    for run in (baseline, candidate):
        if run.sampling != registered_sampling:
            reasons.append(
                f"{run.files.system} sampling {run.sampling_in_words} is not the registered one"
            )
        if not all(s.statement_prompt for s in run.samples.values()):
            reasons.append(
                f"{run.files.system} prompts are not the registered {design.handler} round-0 prompts"
            )
        if min(len(a) for a in run.accepted.values()) < design.n_samples:
            reasons.append(
                f"{run.files.system} has fewer than {design.n_samples} samples for some problem"
            )
    if baseline.files.cap != design.cap_tokens:
        reasons.append(f"cap {baseline.files.cap}, registered {design.cap_tokens}")
    if k != design.k:
        reasons.append(f"k = {k}, registered {design.k}")
    reasons += _verifier_reasons(baseline.identity, design.verifier)
    if baseline.simulated or candidate.simulated:
        reasons.append("SIMULATED verifier: not evidence")
    if override is not None:
        reasons.append(f"design mismatch overridden: {override}")
    if gate_overrides:
        reasons.append(
            f"{len(gate_overrides)} runs read outputs past a failed or missing gate (gate_override)"
        )
    return reasons


def _verifier_reasons(identity: VerifierIdentity, registered: RegisteredVerifier) -> list[str]:
    """How the verifier that judged the runs differs from the registered one (a pin may be
    registered by a prefix of its revision)."""
    reasons = [
        f"verifier {name} {getattr(identity.pins, name)}, registered {getattr(registered, name)}"
        for name in ("lean_version", "mathlib_rev", "repl_rev")
        if not getattr(identity.pins, name).startswith(getattr(registered, name))
    ]
    return reasons + [
        f"verifier {name} {getattr(identity.config, name)}, registered {getattr(registered, name)}"
        for name in ("budget_s", "statement_check", "gate", "axiom_check")
        if getattr(identity.config, name) != getattr(registered, name)
    ]


def _refuse_incomparable(
    baseline: RunData, candidate: RunData, allow_design_mismatch: str | None
) -> None:
    """Raise `ComparisonRefused` for runs at other caps, on other problems, judged by other
    verifiers, or (unless overridden with a reason) of another design."""
    if baseline.files.cap != candidate.files.cap:
        raise ComparisonRefused(
            f"caps differ ({baseline.files.cap} vs {candidate.files.cap}): caps are never pooled"
        )
    if [p.problem_id for p in baseline.problems] != [p.problem_id for p in candidate.problems]:
        raise ComparisonRefused("the runs are on different problems")
    if baseline.identity != candidate.identity:
        raise ComparisonRefused(
            "verifier pins, configuration or budget differ between the runs: the comparison is "
            f"invalid (baseline, candidate: {'; '.join(baseline.identity.differences(candidate.identity))})"
        )
    mismatches = _design_mismatches(baseline, candidate)
    if mismatches and allow_design_mismatch is None:
        raise ComparisonRefused(
            "; ".join(mismatches) + " (pass allow_design_mismatch with a reason to compare anyway)"
        )


_CELL: dict[tuple[bool, bool], Cell] = {
    (True, True): "both",
    (True, False): "baseline_only",
    (False, True): "candidate_only",
    (False, False): "neither",
}


def mcnemar_table(rows: Sequence[PairedProblem]) -> McNemarTable:
    """Problems by (baseline solved@k, candidate solved@k): the McNemar table of `rows`."""
    counts = Counter(row.cell for row in rows)
    return McNemarTable(
        both=counts["both"],
        baseline_only=counts["baseline_only"],
        candidate_only=counts["candidate_only"],
        neither=counts["neither"],
    )


def _per_problem(baseline: RunData, candidate: RunData, k: int) -> list[PairedProblem]:
    """Each problem: accepted c of n samples and solved@k per system, and its McNemar cell."""
    rows = []
    for problem in baseline.problems:
        base = baseline.accepted[problem.problem_id]
        cand = candidate.accepted[problem.problem_id]
        solved = (solved_at_k(base, k), solved_at_k(cand, k))
        rows.append(
            PairedProblem(
                problem_id=problem.problem_id,
                baseline=ProblemSide(c=sum(base.values()), n=len(base), solved=solved[0]),
                candidate=ProblemSide(c=sum(cand.values()), n=len(cand), solved=solved[1]),
                cell=_CELL[solved],
            )
        )
    return rows


def _system_side(run: RunData, k: int) -> ComparedSystem:
    """One side of a comparison: which system, which model, solved@k, and which runs made it."""
    solved = sum(solved_at_k(run.accepted[p.problem_id], k) for p in run.problems)
    return ComparedSystem(
        system=run.files.system,
        model_revs=sorted(run.model_revs),
        problems=len(run.problems),
        solved_at_k=solved,
        wilson=wilson_interval(solved, len(run.problems)),
        provenance=run_provenance(run.files),
    )


def compare_runs(
    baseline: RunData,
    candidate: RunData,
    *,
    k: int,
    alpha: float,
    resamples: int,
    seed: int,
    prereg: Prereg | None = None,
    allow_design_mismatch: str | None = None,
    exploratory: str | None = None,
    gate_overrides: Sequence[str] = (),
) -> Comparison:
    """The paired comparison of two runs on the same problems at the same cap. An
    `exploratory` comparison (what it is, in words) is never PRIMARY, whatever its design, nor
    is one made while runs read past a failed gate (`gate_overrides`)."""
    _refuse_incomparable(baseline, candidate, allow_design_mismatch)
    per_problem = _per_problem(baseline, candidate, k)
    table = mcnemar_table(per_problem)
    p_value = mcnemar_exact(table.candidate_only, table.baseline_only)
    ids = [p.problem_id for p in baseline.problems]
    difference = paired_bootstrap_difference(
        [sum(baseline.accepted[p].values()) / len(baseline.accepted[p]) for p in ids],
        [sum(candidate.accepted[p].values()) / len(candidate.accepted[p]) for p in ids],
        resamples=resamples,
        seed=seed,
    )
    solved_difference = paired_bootstrap_difference(
        [float(row.baseline.solved) for row in per_problem],
        [float(row.candidate.solved) for row in per_problem],
        resamples=resamples,
        seed=seed,
    )
    reasons = (
        [f"exploratory: {exploratory}, outside the registered question"]
        if exploratory is not None
        else _primary_reasons(baseline, candidate, k, prereg, allow_design_mismatch, gate_overrides)
    )
    return Comparison(
        eval_set=baseline.files.eval_set,
        cap=baseline.files.cap,
        k=k,
        table=table,
        p_value=p_value,
        alpha=alpha,
        decision=decide(table.candidate_only, table.baseline_only, p_value, alpha),
        pass1_difference=difference,
        solved_difference=solved_difference,
        per_problem=per_problem,
        primary=not reasons,
        secondary_reasons=reasons,
        design_override=allow_design_mismatch,
        baseline=_system_side(baseline, k),
        candidate=_system_side(candidate, k),
        exploratory=exploratory is not None,
    )


def power_table(
    n_problems: int, fractions: Sequence[float], gains_points: Sequence[float], alpha: float
) -> dict[str, dict[str, float]]:
    """The exact McNemar power of the design for each discordant share and gain (in points)."""
    return {
        f"{f:.2f}": {f"+{g:g}": mcnemar_power(n_problems, f, g / 100, alpha) for g in gains_points}
        for f in fractions
    }


def correction_lift(rounds: Sequence[tuple[Path, Path]]) -> list[LiftRow]:
    """Per pool round: problems unsolved before it, converted in it, samples and tokens spent."""
    solved: set[str] = set()
    problems: set[str] = set()
    rows = []
    for index, (generations, verdicts) in enumerate(rounds):
        tokens = 0
        code_shas: dict[SampleKey, str] = {}
        for generation in iter_records(generations, Generation):
            tokens += len(generation.completion_ids)
            code_shas[generation.key] = code_sha256(generation.lean_code)
            problems.add(generation.problem_id)
        judged = current_verdicts_by_hash(code_shas, iter_records(verdicts, Verification))
        solved_now = {key.problem_id for key, v in judged.items() if v.accepted}
        entering = len(problems - solved)
        converted = solved_now - solved
        solved |= solved_now
        rows.append(
            LiftRow(
                round=index,
                problems_entering=entering,
                converted=len(converted),
                solved_cumulative=len(solved),
                samples=len(judged),
                completion_tokens=tokens,
            )
        )
    return rows
