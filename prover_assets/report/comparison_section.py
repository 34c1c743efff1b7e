"""The report's registered comparisons, one section each: INVALID, PRIMARY or secondary and
why, the systems and the runs that made them, the McNemar table and the decision applied by
code, the paired differences, every problem, and the comparison without known or found
defects (secondary). Computed by `report.analysis` and `report.defects`; written here."""

from __future__ import annotations

from prover_assets.report.analysis import INVALID
from prover_assets.report.markdown import file_image, markdown_table, plot_name, points
from prover_assets.report.summary import (
    Comparison,
    DefectFreeSummary,
    MadeBy,
    RegisteredComparison,
)

__all__ = ["comparison_part"]


def _when(made: MadeBy) -> str:
    span = f"{made.started_at} to {made.finished_at}"
    return f"run `{made.run_id}`, {span}" if made.run_id else span


def _systems_part(comparison: Comparison) -> str:
    rows = [
        [
            system.system,
            ", ".join(f"`{rev}`" for rev in system.model_revs),
            _when(system.provenance.generations),
            _when(system.provenance.verdicts),
        ]
        for system in (comparison.baseline, comparison.candidate)
    ]
    return markdown_table(["system", "model revision", "generated", "verified"], rows)


def _per_problem_table(comparison: Comparison) -> str:
    marks = {"candidate_only": "**candidate only**", "baseline_only": "**baseline only**"}
    rows = [
        [
            f"`{row.problem_id}`",
            f"{row.baseline.c}/{row.baseline.n}",
            "yes" if row.baseline.solved else "no",
            f"{row.candidate.c}/{row.candidate.n}",
            "yes" if row.candidate.solved else "no",
            marks.get(row.cell, ""),
        ]
        for row in comparison.per_problem
    ]
    k = comparison.k
    return markdown_table(
        [
            "problem",
            "baseline accepted c/n",
            f"baseline solved@{k}",
            "candidate accepted c/n",
            f"candidate solved@{k}",
            "discordant",
        ],
        rows,
    )


def _heading(comparison: RegisteredComparison) -> list[str]:
    """The comparison's label (INVALID, PRIMARY or secondary), its endpoint, and why it is not
    PRIMARY."""
    invalid = comparison.decision == INVALID
    label = "INVALID" if invalid else "PRIMARY" if comparison.primary else "secondary"
    lines = [
        f"### {comparison.eval_set}, cap {comparison.cap}: solved@{comparison.k} — **{label}**",
        "",
    ]
    if comparison.endpoint:
        lines += [f"Endpoint (as the config names it): {comparison.endpoint}.", ""]
    if invalid:
        lines += [
            '<span style="color:red">**INVALID: a validity condition failed.** The test below '
            "answers nothing; the pre-registration calls this run pair invalid, not negative."
            "</span>",
            "",
        ]
    if not comparison.primary:
        because = "Invalid and not PRIMARY because:" if invalid else "Secondary because:"
        lines += [because, *[f"- {r}" for r in comparison.secondary_reasons], ""]
    return lines


def _test_result(comparison: RegisteredComparison) -> list[str]:
    """The McNemar table, its p-value and the decision, and the paired differences."""
    table = comparison.table
    lines = [
        markdown_table(
            ["", "candidate solved", "candidate not solved"],
            [
                ["baseline solved", table.both, table.baseline_only],
                ["baseline not solved", table.candidate_only, table.neither],
            ],
        ),
        "",
        f"Discordant problems: {table.discordant} (candidate only {table.candidate_only}, "
        f"baseline only {table.baseline_only}). Exact two-sided McNemar p = "
        f"{comparison.p_value:.4g} (alpha {comparison.alpha}).",
        "",
        f"**Decision (applied by code): {comparison.decision}.**",
        "",
    ]
    for label, diff in (
        ("pass@1", comparison.pass1_difference),
        (f"solved@{comparison.k}", comparison.solved_difference),
    ):
        lines.append(
            f"- {label} difference (candidate - baseline): {points(diff.estimate)} points "
            f"[{points(diff.low)}, {points(diff.high)}] ({diff.method}, "
            f"{diff.resamples} resamples, seed {diff.seed})"
        )
    if comparison.design_override:
        lines += ["", f"Design mismatch overridden: {comparison.design_override}"]
    return lines


def comparison_part(comparison: RegisteredComparison) -> str:
    """One registered comparison: its label and why, the systems, the McNemar table and
    decision, the differences, its plots, every problem, and the defect-free comparison."""
    eval_set, cap, k = comparison.eval_set, comparison.cap, comparison.k
    lines = [
        *_heading(comparison),
        _systems_part(comparison),
        "",
        *_test_result(comparison),
        "",
        file_image(plot_name("solved", eval_set, cap), f"solved@{k}, {eval_set} cap {cap}"),
        "",
        file_image(plot_name("discordance", eval_set, cap), f"discordance, {eval_set} cap {cap}"),
        "",
        f"Per problem ({len(comparison.per_problem)} problems):",
        "",
        _per_problem_table(comparison),
        "",
        *_defect_free_part(comparison),
    ]
    return "\n".join(lines)


def _defect_free_part(comparison: RegisteredComparison) -> list[str]:
    """The comparison again without the problems known or found to be defective: secondary,
    after the registered result; or why there is none."""
    found = comparison.without_known_defects
    lines = ["#### Without the statements known or found to be defective (secondary)", ""]
    if found is None:
        return [*lines, "Not judged: no defect list or statement audit was given.", ""]
    table, k = found.table, comparison.k
    lines += [*_defect_sources(found), ""]
    lines += [
        f"{found.problems} problems with no known or found defect ({found.excluded} left "
        f"out): baseline solved@{k} {found.baseline_solved}, candidate "
        f"{found.candidate_solved}; discordant candidate only {table.candidate_only}, "
        f"baseline only {table.baseline_only}; exact McNemar p = {found.p_value:.4g}; "
        f"decision {found.decision}. This does not replace the registered decision above.",
        "",
        f"**{found.sentence}**",
        "",
    ]
    if found.defective:
        rows = [
            [
                f"`{d.problem_id}`",
                ", ".join(d.kinds),
                "yes" if d.baseline_solved else "no",
                "yes" if d.candidate_solved else "no",
                "; ".join(d.sources),
            ]
            for d in found.defective
        ]
        headers = ["problem", "defect", f"baseline solved@{k}", f"candidate solved@{k}", "source"]
        lines += [markdown_table(headers, rows), ""]
    return lines


def _defect_sources(found: DefectFreeSummary) -> list[str]:
    """Where the defects came from: the shipped list, the statement audit, and whether the
    audit's findings were applied."""
    listed = found.known_list
    lines = [
        "- Known: no defect list is shipped for this eval set's copy (by its sha256)."
        if listed is None
        else f"- Known: {found.known} from `{listed.file}` (sha256 `{listed.sha256[:12]}`)."
    ]
    audit, by_lean = found.audit, found.found_by_lean
    if audit is None:
        lines.append("- Found by Lean: the statement audit was not given.")
    elif not found.found_applied:
        lines.append(
            f"- Found by Lean: the statement audit (sha256 `{audit[:12]}`) ran on the SIMULATED "
            f"verifier; its {len(by_lean)} findings are listed in its asset and NOT applied "
            "(the simulated rule decides nothing about statements)."
        )
    else:
        lines.append(
            f"- Found by Lean: {len(by_lean)} by the statement audit (sha256 `{audit[:12]}`)."
        )
    return lines
