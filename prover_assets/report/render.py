"""The report as a document and its plots, from the computed summary (nothing is computed here).

`render_markdown(summary)` writes the document once, its plots as files beside it
(`plots/<name>`); `markdown.embedded_plots` puts the same plots into it as data URIs for
`report.html` and the UI, so the three are one document. `render_plots(summary)` draws every
plot it names. Its sections of comparisons, costs and iterations are
`comparison_section.py`'s, `cost_section.py`'s and `iteration_section.py`'s; the HTML page is
`markdown.render_html`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from prover_assets.report.comparison_section import comparison_part
from prover_assets.report.cost_section import cost_section, timed_steps
from prover_assets.report.iteration_section import iteration_parts
from prover_assets.report.markdown import (
    CURVE_PLOT,
    LIFT_PLOT,
    SPREAD_PLOT,
    TIME_PLOT,
    file_image,
    markdown_table,
    percent,
    plot_name,
)
from prover_assets.report.plots import (
    discordance_plot,
    iteration_curve_plot,
    lift_plot,
    pass_at_k_plot,
    reasons_plot,
    seed_spread_plot,
    solved_plot,
    time_plot,
)
from prover_assets.report.summary import (
    Comparison,
    LiftRow,
    PreregSummary,
    ReportSummary,
    SystemSummary,
    ValidityJudgement,
)

__all__ = [
    "GLOSSARY",
    "gate_provenance",
    "limitations",
    "preflight_provenance",
    "render_markdown",
    "render_plots",
]

SIMULATED_BANNER = (
    "# SIMULATED - NOT EVIDENCE\n\nEvery verdict below comes from the demo's simulated verifier "
    "(a scripted REPL double, not Lean). Nothing in this report says anything about any model's "
    "ability to prove theorems.\n"
)
GLOSSARY = (
    (
        "solved@k",
        "a problem is solved@k when at least one of its first k samples is accepted; "
        "the share of problems solved@k is the registered measure",
    ),
    (
        "pass@k",
        "the unbiased estimate, from n samples of which c are accepted, of the chance "
        "that k samples drawn without replacement include an accepted one, averaged over problems",
    ),
    (
        "cap",
        "the most completion tokens a sample may have (`max_tokens`); runs at different "
        "caps are never pooled",
    ),
    (
        "gate",
        "the static checks on a proof's text before Lean sees it (banned declarations, "
        "the header, the displayed statement)",
    ),
    (
        "faithful",
        "a sample's displayed theorem repeats the trusted statement token for token; "
        "Lean always checks the proof against the trusted statement",
    ),
    (
        "registered",
        "fixed in the pre-registration before any candidate ran: the problem set, "
        "k, the cap, the sampling, the verifier and the decision rule",
    ),
    (
        "discordant",
        "a problem that exactly one of the two systems solved; exact McNemar uses only these",
    ),
    (
        "primary",
        "the one comparison that matches the registered design in every respect, the only one "
        "whose decision answers the registered question; any other is secondary",
    ),
)


def _system_table(summaries: Sequence[SystemSummary], ks: Sequence[int]) -> str:
    headers = [
        "system",
        "problems",
        "samples",
        *[f"solved@{k} [Wilson 95%]" for k in ks],
        *[f"pass@{k}" for k in ks],
        "pass@1 [cluster bootstrap 95%]",
        "mean completion tokens",
        "mean effective max_tokens (of cap)",
        "hit cap",
        "timeouts (before → after re-check)",
        "infrastructure (not verdicts)",
        "accepted but rewritten",
        "verdicts copied (cache)",
    ]
    rows = []
    for s in summaries:
        solved = []
        for k in ks:
            cell = s.solved_at_k.get(k)
            solved.append(
                "null"
                if cell is None
                else f"{cell.solved}/{s.problems} ({percent(cell.share)}) "
                f"[{percent(cell.wilson_low)}, {percent(cell.wilson_high)}]"
            )
        pass1 = s.pass1_cluster
        rows.append(
            [
                s.system,
                s.problems,
                s.samples,
                *solved,
                *[percent(s.pass_at_k.get(k)) for k in ks],
                f"{percent(pass1.estimate)} [{percent(pass1.low)}, {percent(pass1.high)}]",
                f"{s.mean_completion_tokens:.0f}",
                f"{s.mean_effective_max_tokens:.0f} of {s.cap}",
                percent(s.hit_cap_share),
                f"{s.timeouts_before_recheck} → {s.timeouts}",
                s.infrastructure,
                s.accepted_but_rewritten,
                s.verdicts_copied,
            ]
        )
    return markdown_table(headers, rows)


def _reasons_table(summaries: Sequence[SystemSummary]) -> str:
    """Samples by outcome per system: accepted, then every rejection reason, then the total
    (a sample may carry several reasons, so the reasons can add up to more than the rejected)."""
    reasons = sorted(
        {r for s in summaries for r in s.reasons},
        key=lambda r: (-sum(s.reasons.get(r, 0) for s in summaries), r),
    )
    rows = [["**accepted**", *[s.accepted_samples for s in summaries]]]
    rows += [[r, *[s.reasons.get(r, 0) for s in summaries]] for r in reasons]
    rows.append(["**samples (total)**", *[s.samples for s in summaries]])
    return markdown_table(["outcome", *[s.system for s in summaries]], rows)


def _validity_parts(validity: Sequence[ValidityJudgement]) -> list[str]:
    """Each comparison's validity conditions, judged by the report from the files it read:
    held or failed, what was found, and the files with their sha256."""
    parts = [
        "## Validity\n",
        "Judged here from the files the comparisons read, by the functions the blocking checks "
        "call: a failure makes its comparison INVALID whichever checks ran in which run.\n",
    ]
    for pair in validity:
        held = sum(c.held for c in pair.conditions)
        verdict = "every condition holds" if pair.held else "**INVALID**"
        parts.append(
            f"{pair.eval_set}, cap {pair.cap}: {held} of {len(pair.conditions)} "
            f"conditions hold ({verdict}).\n"
        )
        rows = [
            [
                f"`{c.name}`",
                c.subject,
                "held" if c.held else "**FAILED**",
                c.found,
                "<br>".join(f"`{Path(f.path).name}` {f.sha256[:12]}" for f in c.files),
            ]
            for c in pair.conditions
        ]
        parts += [markdown_table(["condition", "judged", "", "found", "files"], rows), ""]
    return parts


def _prereg_part(prereg: PreregSummary | None) -> str:
    if prereg is None:
        return "Pre-registration: none given.\n"
    if prereg.hash_matches:
        return (
            f"Pre-registration `{prereg.path}`: block sha256 `{prereg.sha256}` matches the "
            "recorded hash.\n"
        )
    return (
        f'<span style="color:red">**Pre-registration MISMATCH**: block sha256 `{prereg.sha256}` '
        f"does not match the recorded `{prereg.recorded_sha256}`.</span>\n"
    )


def _systems_parts(summary: ReportSummary) -> list[str]:
    parts = ["## Per system\n"]
    for key, group in summary.systems.items():
        eval_set, cap = group[0].eval_set, group[0].cap
        pooled = [
            f"{s.system} {percent(s.pass1_pooled_wilson.estimate)} "
            f"[{percent(s.pass1_pooled_wilson.low)}, {percent(s.pass1_pooled_wilson.high)}]"
            for s in group
        ]
        parts += [
            f"### {key}\n",
            _system_table(group, summary.ks) + "\n",
            file_image(plot_name("pass_at_k", eval_set, cap), f"pass@k, {key}") + "\n",
            "pass@1 pooled over samples with a Wilson interval (ANTI-CONSERVATIVE: the samples of "
            "a problem are not independent): " + "; ".join(pooled) + ".\n",
            "Samples by outcome:\n",
            _reasons_table(group) + "\n",
            file_image(plot_name("outcomes", eval_set, cap), f"samples by outcome, {key}") + "\n",
        ]
    return parts


def _power_parts(summary: ReportSummary) -> list[str]:
    power = summary.power
    gains = list(next(iter(power.values())))
    return [
        f"## Power of the registered design ({summary.power_problems} problems, exact McNemar, "
        f"alpha {summary.alpha})\n",
        "The chance that the registered test detects a true gain of the size in each column, for "
        "each share of discordant problems.\n",
        markdown_table(
            ["discordant share", *[f"gain {g} points" for g in gains]],
            [[f, *[f"{v:.3f}" for v in row.values()]] for f, row in power.items()],
        )
        + "\n",
    ]


def _lift_parts(lift: Sequence[LiftRow]) -> list[str]:
    if not lift:
        return []
    table = markdown_table(
        [
            "round",
            "problems entering",
            "converted",
            "solved (cumulative)",
            "samples",
            "completion tokens",
        ],
        [
            [
                row.round,
                row.problems_entering,
                row.converted,
                row.solved_cumulative,
                row.samples,
                row.completion_tokens,
            ]
            for row in lift
        ],
    )
    return [
        "## Correction-round lift (train pool)\n",
        table + "\n",
        file_image(LIFT_PLOT, "correction-round lift") + "\n",
    ]


def limitations(summary: ReportSummary) -> list[str]:
    """The report's limitations, written from this run's configuration."""
    budgets = sorted(
        {s.verifier.config.budget_s for group in summary.systems.values() for s in group} - {None}
    )
    budget = " and ".join(f"{b:g} s" for b in budgets) if budgets else "the configured"
    problems = summary.power_problems
    seeds = len(summary.seed_spread[0].seeds) if summary.seed_spread else 1
    variance = (
        f"Training variance is outside the p-value; it is measured over {seeds} training seeds "
        "in the seed-spread table, whose sentences say whether every seed agrees with the "
        "registered seed's decision."
        if seeds > 1
        else "Training variance is outside the p-value: one SFT run is compared; another "
        "training seed could move the candidate by more than the difference measured here."
    )
    return [
        variance,
        f"Power: with {problems} problems the registered design detects only gains of several "
        "points with useful probability (see the power table); 'no detectable improvement' is "
        "not evidence of no improvement.",
        "The verifier's policy: the strict gate and the displayed-statement check reject some "
        "proofs that Lean alone would accept; both systems are judged by the same policy.",
        f"Timeouts depend on host load: a proof near the {budget} budget can pass on an idle "
        "machine and fail on a busy one; the timeout counts are shown per system.",
    ]


def _simulated_parts(summary: ReportSummary) -> list[str]:
    if not summary.simulated:
        return []
    parts = [SIMULATED_BANNER]
    if summary.simulated_rule:
        parts.append(f"The simulated verifier's rule: {summary.simulated_rule}.\n")
    return parts


def render_markdown(summary: ReportSummary) -> str:
    """The report as one Markdown document: the banner of a simulated run and its rule, the
    pre-registration's hash, each comparison with its systems, plots and per-problem table,
    each system's tables, the correction lift, the design's power, the limitations, a
    glossary and the provenance. Its plots are files beside it (`embedded_plots` makes the
    document stand alone)."""
    parts = _simulated_parts(summary)
    parts.append(f"# Evaluation report: {summary.experiment}\n")
    parts.append(_prereg_part(summary.prereg))
    parts += _validity_parts(summary.validity)
    parts.append("## Comparisons\n")
    parts += [comparison_part(c) + "\n" for c in summary.comparisons]
    parts += iteration_parts(summary)
    parts += _systems_parts(summary)
    parts += _lift_parts(summary.correction_lift)
    parts += _power_parts(summary)
    parts += cost_section(summary.costs, summary.round_costs, summary.eta_beside_measured)
    parts.append("## Limitations\n")
    parts += [f"- {item}" for item in limitations(summary)]
    parts += ["", "## Glossary\n"]
    parts += [f"- **{term}**: {meaning}." for term, meaning in GLOSSARY]
    parts += ["", "## Provenance\n"]
    code = summary.code
    parts.append(
        f"Code: commit `{code.commit or 'unknown: ' + str(code.reason)}` "
        f"(uncommitted changes: {'yes' if code.dirty else 'no'}); package "
        f"{summary.package_version}. Every input and artifact, with its sha256, is listed in "
        "`manifest.json`; `verify_bundle` re-checks them.\n"
    )
    parts += preflight_provenance(summary.preflight_overrides)
    parts += gate_provenance(summary.gate_overrides)
    return "\n".join(parts)


def preflight_provenance(overrides: Sequence[str]) -> list[str]:
    """The provenance lines on preflights: each heavy run launched without a passing one, with
    its reason, or that there was none."""
    if not overrides:
        return [
            "No heavy job of this instance was launched with `preflight_override`: each launched "
            "after a passing preflight for its config, pins and code. (Assets materialized one by "
            "one, outside the jobs, are not gated.)\n"
        ]
    return [
        f"**{len(overrides)} heavy runs were launched WITHOUT a passing preflight** "
        "(`preflight_override`), with these reasons:\n",
        *(f"- {line}" for line in overrides),
        "",
    ]


def gate_provenance(overrides: Sequence[str]) -> list[str]:
    """The provenance lines on gates: each run that read outputs past a failed or missing
    blocking check, with its reason, or that none did."""
    if not overrides:
        return [
            "No run of this instance read an output past a failed or missing blocking check "
            "(`gate_override`): every output read had passed its gates, in whichever run.\n"
        ]
    return [
        f"**{len(overrides)} runs read outputs past a failed or missing blocking check** "
        "(`gate_override`), with these reasons; no comparison here is PRIMARY:\n",
        *(f"- {line}" for line in overrides),
        "",
    ]


def _system_plots(key: str, group: Sequence[SystemSummary]) -> dict[str, bytes]:
    """pass@k with its bands, samples by outcome: one eval set and cap."""
    eval_set, cap = group[0].eval_set, group[0].cap
    bands = {
        s.system: [
            (k, band.estimate, band.low, band.high)
            for k, band in sorted(s.pass_at_k_cluster.items())
            if band is not None
        ]
        for s in group
    }
    outcomes = {s.system: {"accepted": s.accepted_samples, **s.reasons} for s in group}
    return {
        plot_name("pass_at_k", eval_set, cap): pass_at_k_plot(bands, title=f"pass@k, {key}"),
        plot_name("outcomes", eval_set, cap): reasons_plot(
            outcomes, title=f"samples by outcome, {key}"
        ),
    }


def _comparison_plots(comparison: Comparison) -> dict[str, bytes]:
    """solved@k with the paired difference, and the 2x2 table: one comparison."""
    eval_set, cap, k = comparison.eval_set, comparison.cap, comparison.k
    problems = len(comparison.per_problem)
    systems = {
        side.system: (side.solved_at_k, problems, *side.wilson)
        for side in (comparison.baseline, comparison.candidate)
    }
    diff = comparison.solved_difference
    label = f"{eval_set} cap {cap}"
    return {
        plot_name("solved", eval_set, cap): solved_plot(
            systems, (diff.estimate, diff.low, diff.high), k=k, title=label
        ),
        plot_name("discordance", eval_set, cap): discordance_plot(
            comparison.table, title=f"solved@{k}, {label}"
        ),
    }


def render_plots(summary: ReportSummary) -> dict[str, bytes]:
    """Every plot the document shows, as PNG bytes by file name."""
    plots: dict[str, bytes] = {}
    for key, group in summary.systems.items():
        plots.update(_system_plots(key, group))
    for comparison in summary.comparisons:
        plots.update(_comparison_plots(comparison))
    if summary.correction_lift:
        plots[LIFT_PLOT] = lift_plot(summary.correction_lift, title="correction-round lift")
    if timed := timed_steps(summary.round_costs):
        plots[TIME_PLOT] = time_plot(timed, title="where the round's time went")
    if summary.iteration_curve is not None and summary.seed_spread is not None:
        k = summary.k
        plots[CURVE_PLOT] = iteration_curve_plot(
            summary.iteration_curve, k=k, title="expert iteration (registered seed)"
        )
        plots[SPREAD_PLOT] = seed_spread_plot(
            summary.seed_spread, k=k, title=f"solved@{k} per training seed"
        )
    return plots
