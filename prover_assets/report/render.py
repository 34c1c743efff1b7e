"""The report as markdown and plots, from the computed summary (nothing is computed here)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prover_assets.report.markdown import markdown_table
from prover_assets.report.plots import bar_plot, interval_plot, line_plot

__all__ = ["LIMITATIONS", "render_markdown", "render_plots"]

SIMULATED_BANNER = "# SIMULATED - NOT EVIDENCE\n\nEvery verdict below comes from the demo's simulated verifier (a scripted REPL double). Nothing in this report says anything about any model.\n"
LIMITATIONS = (
    "Training variance is outside the p-value: one SFT run is compared; another seed could move the "
    "candidate by more than the difference measured here.",
    "Power: the registered design detects only gains of several points with useful probability (see the "
    "power table); 'no detectable improvement' is not evidence of no improvement.",
    "The verifier's policy: the strict gate and the displayed-statement check reject some proofs that Lean "
    "alone would accept; both systems are judged by the same policy.",
    "Timeouts depend on host load: a proof near the 180 s budget can pass on an idle machine and fail on a "
    "busy one; the timeout counts are shown per system.",
)


def _pct(value: float | None) -> str:
    return "null" if value is None else f"{100 * value:.1f}%"


def _system_table(summaries: list[dict[str, Any]], ks: list[int]) -> str:
    headers = [
        "system",
        "cap",
        "problems",
        "samples",
        *[f"solved@{k} [Wilson 95%]" for k in ks],
        *[f"pass@{k}" for k in ks],
        "pass@1 [cluster bootstrap]",
        "mean max_tokens",
        "hit cap",
        "timeouts",
        "infrastructure (not verdicts)",
        "accepted but rewritten",
    ]
    rows = []
    for s in summaries:
        solved = []
        for k in ks:
            cell = s["solved_at_k"].get(k)
            solved.append(
                "null"
                if cell is None
                else f"{cell['solved']} ({_pct(cell['share'])}) [{_pct(cell['wilson_low'])}, {_pct(cell['wilson_high'])}]"
            )
        pass1 = s["pass1_cluster"]
        rows.append(
            [
                s["system"],
                s["cap"],
                s["problems"],
                s["samples"],
                *solved,
                *[_pct(s["pass_at_k"].get(k)) for k in ks],
                f"{_pct(pass1['estimate'])} [{_pct(pass1['low'])}, {_pct(pass1['high'])}]",
                f"{s['mean_effective_max_tokens']:.0f} of {s['nominal_cap']}",
                _pct(s["hit_cap_share"]),
                s["timeouts"],
                s["infrastructure"],
                s["accepted_but_rewritten"],
            ]
        )
    return markdown_table(headers, rows)


def _comparison_section(comparison: Mapping[str, Any]) -> str:
    table = comparison["table"]
    lines = [
        f"### {comparison['eval_set']}, cap {comparison['cap']}: solved@{comparison['k']} — "
        f"**{'PRIMARY' if comparison['primary'] else 'secondary'}**",
        "",
    ]
    if not comparison["primary"]:
        lines += [
            "Secondary because:",
            *[f"- {reason}" for reason in comparison["secondary_reasons"]],
            "",
        ]
    lines += [
        markdown_table(
            ["", "candidate solved", "candidate not solved"],
            [
                ["baseline solved", table["both"], table["baseline_only"]],
                ["baseline not solved", table["candidate_only"], table["neither"]],
            ],
        ),
        "",
        f"Discordant problems: {table['candidate_only'] + table['baseline_only']} "
        f"(candidate only {table['candidate_only']}, baseline only {table['baseline_only']}). "
        f"Exact two-sided McNemar p = {comparison['p_value']:.4g} (alpha {comparison['alpha']}).",
        "",
        f"**Decision (applied by code): {comparison['decision']}.**",
        "",
    ]
    diff = comparison["pass1_difference"]
    lines.append(
        f"pass@1 difference (candidate - baseline): {_pct(diff['estimate'])} "
        f"[{_pct(diff['low'])}, {_pct(diff['high'])}] ({diff['method']}, {diff['resamples']} "
        f"resamples, seed {diff['seed']})"
    )
    if comparison["design_override"]:
        lines += ["", f"Design mismatch overridden: {comparison['design_override']}"]
    return "\n".join(lines)


def _prereg_part(prereg: Mapping[str, Any] | None) -> str:
    if prereg is None:
        return "Pre-registration: none given.\n"
    if prereg["hash_matches"]:
        return f"Pre-registration `{prereg['path']}`: block sha256 `{prereg['sha256']}` matches the recorded hash.\n"
    return (
        f'<span style="color:red">**Pre-registration MISMATCH**: block sha256 `{prereg["sha256"]}` '
        f"does not match the recorded `{prereg['recorded_sha256']}`.</span>\n"
    )


def _systems_parts(systems: Mapping[str, Any], ks: list[int]) -> list[str]:
    parts = ["## Per system\n"]
    for key, group in systems.items():
        parts.append(f"### {key}\n\n{_system_table(group, ks)}\n")
        pooled = [
            f"{s['system']}: {_pct(s['pass1_pooled_wilson']['estimate'])} [{_pct(s['pass1_pooled_wilson']['low'])}, "
            f"{_pct(s['pass1_pooled_wilson']['high'])}]"
            for s in group
        ]
        parts.append(
            "pass@1 pooled over samples with a Wilson interval (ANTI-CONSERVATIVE: samples of a problem "
            "are not independent): " + "; ".join(pooled) + "\n"
        )
        reasons = sorted({r for s in group for r in s["reasons"]})
        parts.append(
            markdown_table(
                ["reason", *[s["system"] for s in group]],
                [[r, *[s["reasons"].get(r, 0) for s in group]] for r in reasons],
            )
            + "\n"
        )
    return parts


def _power_parts(summary: Mapping[str, Any]) -> list[str]:
    power = summary["power"]
    gains = list(next(iter(power.values())))
    return [
        f"## Power of the registered design ({summary['power_problems']} problems, alpha {summary['alpha']})\n",
        markdown_table(
            ["discordant share", *gains],
            [[f, *[f"{v:.3f}" for v in row.values()]] for f, row in power.items()],
        )
        + "\n",
    ]


_LIFT_COLUMNS = (
    ("round", "round"),
    ("problems entering", "problems_entering"),
    ("converted", "converted"),
    ("solved (cumulative)", "solved_cumulative"),
    ("samples", "samples"),
    ("completion tokens", "completion_tokens"),
)


def _lift_parts(lift: list[Mapping[str, Any]]) -> list[str]:
    if not lift:
        return []
    table = markdown_table(
        [title for title, _ in _LIFT_COLUMNS],
        [[row[field] for _, field in _LIFT_COLUMNS] for row in lift],
    )
    return ["## Correction-round lift (train pool)\n", table + "\n"]


def render_markdown(summary: Mapping[str, Any]) -> str:
    """The report as Markdown: the banner of a simulated run, the pre-registration's hash, each
    comparison, each system's table, the design's power, the correction lift, the limits and
    the provenance."""
    parts = [SIMULATED_BANNER] if summary["simulated"] else []
    parts.append(f"# Evaluation report: {summary['experiment']}\n")
    parts.append(_prereg_part(summary["prereg"]))
    parts.append("## Comparisons\n")
    parts += [_comparison_section(c) + "\n" for c in summary["comparisons"]]
    parts += _systems_parts(summary["systems"], summary["ks"])
    parts += _power_parts(summary)
    parts += _lift_parts(summary["correction_lift"])
    parts.append("## Limitations\n")
    parts += [f"- {item}" for item in LIMITATIONS]
    parts.append("")
    parts.append("## Provenance\n")
    parts.append(
        f"Code: commit `{summary['code']['commit']}` (dirty: {summary['code']['dirty']}); "
        f"package {summary['package_version']}. Every input and artifact, with its sha256, is listed "
        "in `manifest.json`; `verify_bundle` re-checks them.\n"
    )
    return "\n".join(parts)


def _system_plots(
    key: str, group: list[Mapping[str, Any]], ks: list[int], k: int
) -> dict[str, bytes]:
    """pass@k lines, solved@k with its interval, rejection reasons: one eval set and cap."""
    name = key.replace("/", "_").replace(" ", "_")
    plots = {
        f"pass_at_k_{name}.png": line_plot(
            {
                s["system"]: (
                    [i for i in ks if s["pass_at_k"].get(i) is not None],
                    [s["pass_at_k"][i] for i in ks if s["pass_at_k"].get(i) is not None],
                )
                for s in group
            },
            title=f"pass@k, {key}",
            xlabel="k",
            ylabel="pass@k",
        )
    }
    points = {
        s["system"]: (
            s["solved_at_k"][k]["share"],
            s["solved_at_k"][k]["wilson_low"],
            s["solved_at_k"][k]["wilson_high"],
        )
        for s in group
        if s["solved_at_k"].get(k)
    }
    if points:
        plots[f"solved_at_{k}_{name}.png"] = interval_plot(
            points, title=f"solved@{k} (Wilson 95%), {key}", ylabel="share solved"
        )
    plots[f"reasons_{name}.png"] = bar_plot(
        {s["system"]: s["reasons"] for s in group},
        title=f"rejection reasons, {key}",
        ylabel="samples",
    )
    return plots


def _discordance_plot(comparison: Mapping[str, Any]) -> bytes:
    table = comparison["table"]
    return bar_plot(
        {
            "problems": {
                "candidate only": table["candidate_only"],
                "baseline only": table["baseline_only"],
            }
        },
        title=f"discordant problems, {comparison['eval_set']} cap {comparison['cap']}",
        ylabel="problems",
    )


def render_plots(summary: Mapping[str, Any]) -> dict[str, bytes]:
    """Every plot of the report, as PNG bytes by file name."""
    plots: dict[str, bytes] = {}
    for key, group in summary["systems"].items():
        plots.update(_system_plots(key, group, summary["ks"], summary["k"]))
    for comparison in summary["comparisons"]:
        name = f"discordant_{comparison['eval_set']}_c{comparison['cap']}.png"
        plots[name] = _discordance_plot(comparison)
    if summary["correction_lift"]:
        rows = summary["correction_lift"]
        plots["correction_lift.png"] = line_plot(
            {
                "solved (cumulative)": (
                    [r["round"] for r in rows],
                    [r["solved_cumulative"] for r in rows],
                )
            },
            title="correction-round lift",
            xlabel="round",
            ylabel="problems",
        )
    return plots
