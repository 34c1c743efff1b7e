"""The report's cost section (secondary): what each run's steps used and did, what each
solved problem and accepted proof cost, every step of the round with the plot of its wall
times, and the `eta` beside what was measured. Computed by `report.cost`; written here."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from prover_assets.operations.eta import run_label
from prover_assets.records.usage import AttemptUsage
from prover_assets.report.markdown import TIME_PLOT, clock_time, file_image, markdown_table
from prover_assets.report.summary import CostRow, EtaBesideMeasured, StepCost

__all__ = ["ETA_SOURCES", "cost_section", "timed_steps"]


def _seconds(value: float | None) -> str:
    return "not recorded" if value is None else clock_time(value)


def _earlier(attempts: Sequence[AttemptUsage]) -> str:
    """The earlier attempts of a step, each as its journal last recorded it: how many, how
    they ended, and their wall and CPU time together."""
    if not attempts:
        return "none"
    ended = Counter(a.ended or "killed" for a in attempts)
    wall = sum(a.usage.wall_s for a in attempts)
    cpu = sum(a.usage.cpu_s + a.usage.children_cpu_s for a in attempts)
    kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(ended.items()))
    return f"{kinds}: wall {clock_time(wall)}, CPU {clock_time(cpu)}"


def _peak(step: StepCost) -> str:
    mib = step.usage.peak_rss_mib if step.usage else None
    host = "not recorded" if mib is None else f"{mib / 1024:.2f} GiB"
    gpu = step.peak_gpu_gib
    return host if gpu is None else f"{host}; GPU {gpu:.1f} GiB"


def _step_gpu_time(step: StepCost) -> str:
    if step.gpus == 0:
        return "none (host)"
    gpu_s = step.gpu_s
    return "not recorded" if gpu_s is None else f"{clock_time(gpu_s)} ({step.gpus} GPU)"


def _round_time_parts(steps: Sequence[StepCost]) -> list[str]:
    """Each step of the round: what its completing attempt used, what its earlier attempts
    did, and the plot of wall times."""
    if not steps:
        return []
    rows = [
        [
            s.step,
            s.side,
            _seconds(s.usage.wall_s if s.usage else None),
            _step_gpu_time(s),
            _seconds(s.usage.cpu_s if s.usage else None),
            _seconds(s.usage.children_cpu_s if s.usage else None),
            _peak(s),
            _earlier(s.earlier),
        ]
        for s in steps
    ]
    headers = [
        "step",
        "waits on",
        "wall",
        "GPU time",
        "CPU",
        "children's CPU",
        "peak memory",
        "earlier attempts",
    ]
    parts = ["### Where the round's time went\n", markdown_table(headers, rows) + "\n"]
    parts += [
        f"{s.step}: {s.tokens_trained:,} tokens trained (the SFT rows' prompt and "
        "completion tokens times the epochs).\n"
        for s in steps
        if s.tokens_trained is not None
    ]
    if timed_steps(steps):
        parts.append(file_image(TIME_PLOT, "wall time of each step of the round") + "\n")
    return parts


def timed_steps(steps: Sequence[StepCost]) -> list[tuple[str, str, float, float]]:
    """(step, side, wall seconds, earlier attempts' wall seconds) of the steps whose usage was
    recorded."""
    return [
        (s.step, s.side, s.usage.wall_s, sum(a.usage.wall_s for a in s.earlier))
        for s in steps
        if s.usage
    ]


ETA_SOURCES = {
    "measured": "measured by full steps",
    "preflight": "from the preflight's smoke round",
    "prior": "priors",
}


def _sources(eta: EtaBesideMeasured) -> str:
    return ", ".join(f"{n} {ETA_SOURCES.get(source, source)}" for source, n in eta.sources.items())


def _ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _eta_parts(eta: EtaBesideMeasured | None) -> list[str]:
    """The `eta` asset's estimate of each step the report measured, beside what it took."""
    if eta is None:
        return [
            "No `eta` was materialized for this data root: materialize it (any time, before the "
            "round for a forecast) to see its estimate beside what the round took.\n"
        ]
    rows = [
        [
            r.step,
            f"{clock_time(r.eta_s[1])} ({clock_time(r.eta_s[0])} to {clock_time(r.eta_s[2])})",
            clock_time(r.measured_s),
            _ratio(r.ratio),
        ]
        for r in eta.rows
    ]
    rows.append(
        ["these steps", clock_time(eta.eta_s), clock_time(eta.measured_s), _ratio(eta.ratio)]
    )
    low, central, high = eta.round_total_s
    return [
        "### The ETA beside what was measured\n",
        f"The `eta` materialized at {eta.materialized_at} (its inputs: {_sources(eta)}; an "
        "`eta` made after the round measured it by the round itself): its central estimate (low "
        "to high) of each step the report reads, beside the step's wall, the completing "
        "attempt's and its earlier attempts' together. Its whole round, the steps the report "
        f"does not read included: {clock_time(central)} ({clock_time(low)} to "
        f"{clock_time(high)}).\n",
        markdown_table(["step", "ETA", "measured", "measured / ETA"], rows) + "\n",
    ]


def _run_label(cost: CostRow) -> str:
    return run_label(cost.system, cost.eval_set, cost.cap)


def _gpu_time(cost: CostRow, seconds: float | None) -> str:
    return "none (host)" if cost.generation_gpus == 0 else _seconds(seconds)


def _machine_rows(costs: Sequence[CostRow]) -> list[list[str]]:
    """Each run's steps: what the completing attempts used, and the earlier ones apart."""
    return [
        [
            _run_label(c),
            _seconds(c.generation.wall_s if c.generation else None),
            _gpu_time(c, c.generation_gpu_s),
            _seconds(c.generation.cpu_s if c.generation else None),
            _seconds(c.verification.wall_s if c.verification else None),
            _seconds(c.verification.children_cpu_s if c.verification else None),
            _earlier([*c.generation_earlier, *c.verification_earlier]),
        ]
        for c in costs
    ]


def _work_rows(costs: Sequence[CostRow]) -> list[list[str | int]]:
    """Each run's work, counted in its streams, and its waste."""
    return [
        [
            _run_label(c),
            c.generated,
            c.tokens_prompted,
            c.tokens_generated,
            c.hit_cap,
            c.verified,
            c.cached,
            c.lean_runs,
            c.timeouts_rechecked,
            c.infrastructure_reverified,
        ]
        for c in costs
    ]


def _result_rows(costs: Sequence[CostRow]) -> list[list[str | int]]:
    """Each run's cost per problem solved and per accepted proof."""
    return [
        [
            _run_label(c),
            c.solved,
            c.accepted,
            _seconds(c.generation_wall_s_per_solved),
            _gpu_time(c, c.gpu_s_per_solved),
            _seconds(c.lean_cpu_s_per_solved),
            _gpu_time(c, c.gpu_s_per_accepted),
            _seconds(c.lean_cpu_s_per_accepted),
        ]
        for c in costs
    ]


def cost_section(
    costs: Sequence[CostRow],
    steps: Sequence[StepCost] = (),
    eta: EtaBesideMeasured | None = None,
) -> list[str]:
    """Each run's cost (secondary): what its generation and verdict steps used, as their
    manifests record it, the work and waste its streams hold, and what each problem solved and
    each proof accepted cost; then every step of the round, and the ETA beside it."""
    if not costs:
        return []
    machine = ["run", "generation wall", "GPU time", "generation CPU", "verdict wall", "Lean CPU"]
    work = ["run", "samples", "tokens prompted", "tokens generated", "cut at cap", "verdicts"]
    work += ["from cache", "Lean runs", "timeouts re-run", "infrastructure re-verified"]
    per = ["run", "solved", "accepted", "generation wall / solved", "GPU time / solved"]
    per += ["Lean CPU / solved", "GPU time / accepted proof", "Lean CPU / accepted proof"]
    return [
        "## Cost of each run (secondary)\n",
        markdown_table([*machine, "earlier attempts"], _machine_rows(costs)) + "\n",
        markdown_table(work, _work_rows(costs)) + "\n",
        markdown_table(per, _result_rows(costs)) + "\n",
        "Measured where each step ran, as its manifest records it (`usage`: the kernel's count): "
        "wall time; GPU time, the wall times the GPUs its engines held; the generation "
        "process's CPU; Lean CPU, the CPU time of the verdict step's REPLs and what they ran "
        "(none under a simulated verifier). Samples, tokens and verdicts are counted in the "
        "streams, each once, whichever attempt committed it; the times of a step resumed after "
        "a kill are its completing attempt's, and its earlier attempts' apart (a killed one's up "
        "to the last record of its usage journal, kept every 10 s: waste, never counted as the "
        "result's cost). Waste: samples cut at the cap, timeouts run again, verdicts of "
        "infrastructure failures verified again, earlier attempts. Solved: by any of the run's "
        "samples. Peak RSS: of the step's process over its life.\n",
        *_round_time_parts(steps),
        *(_eta_parts(eta) if steps else []),
    ]
