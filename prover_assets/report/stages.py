"""The evaluation report as one step: runs in, an evidence bundle out."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from prover_assets import __version__
from prover_assets.config import PLACE_FIELDS
from prover_assets.operations.eta import EtaEstimate
from prover_assets.records import MANIFEST_NAME, OutputExistsError, Pins, git_revision, now_utc
from prover_assets.records.manifest import read_manifest
from prover_assets.records.outputs import StepResult
from prover_assets.report.analysis import (
    compare_runs,
    correction_lift,
    power_table,
    summarize_run,
)
from prover_assets.report.bundle import (
    ReportResult,
    bundle_name,
    publish_bundle,
    verify_bundle,
)
from prover_assets.report.cost import (
    cost_rows,
    eta_beside_measured,
    round_costs,
    run_cost,
)
from prover_assets.report.defects import EvalSetDefects, defect_free_summary
from prover_assets.report.iterations import (
    IterationInputs,
    exploratory_comparisons,
    iteration_curve,
    seed_spread,
)
from prover_assets.report.markdown import embedded_plots, render_html
from prover_assets.report.prereg import Prereg, read_prereg
from prover_assets.report.render import render_markdown, render_plots
from prover_assets.report.runs import RunData, RunFiles, load_run
from prover_assets.report.summary import (
    BootstrapSettings,
    Comparison,
    Condition,
    CurvePoint,
    ExploratoryComparison,
    PreregSummary,
    RegisteredComparison,
    ReportSummary,
    RunCost,
    SeedSpreadRow,
    StepCost,
    SystemSummary,
    ValidityJudgement,
)
from prover_assets.report.validity import (
    INVALID,
    TrainingFiles,
    ValiditySettings,
    failed_conditions,
    judge_comparison,
)
from prover_assets.sft.trainer import DATA_ORDER_FILE

__all__ = ["ReportSettings", "build_report", "materialize_report"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReportSettings:
    """The report's settings: the experiment, the registered comparison and its statistics."""

    experiment: str
    k: int
    ks: tuple[int, ...]
    alpha: float
    resamples: int
    seed: int
    samples_required: int
    power_fractions: tuple[float, ...]
    power_gains_points: tuple[float, ...]
    allow_design_mismatch: str | None = None
    # What each eval set's comparison is, in the config's words ("S2, registered secondary").
    endpoints: Mapping[str, str] = field(default_factory=dict)
    # Each heavy run launched without a passing preflight: "run <id> (job <name>): <reason>".
    preflight_overrides: tuple[str, ...] = ()
    # Each run that read outputs past a failed or missing gate: "run <id> (job <name>): <reason>".
    gate_overrides: tuple[str, ...] = ()
    max_infrastructure_share: float = 0.01  # the validity bound of `lean.max_infrastructure_share`
    # The `eta` asset's latest estimate, for the cost section's estimate beside what was measured.
    eta: EtaEstimate | None = None


@dataclass
class _Measured:
    """What the pairs of runs give: per-system summaries, comparisons, and whether any verdict
    was simulated."""

    systems: dict[str, list[SystemSummary]] = field(default_factory=dict)
    comparisons: list[RegisteredComparison] = field(default_factory=list)
    baselines: dict[tuple[str, int], RunData] = field(default_factory=dict)
    simulated: bool = False
    pins: Pins | None = None
    simulated_rule: str | None = None
    validity: list[ValidityJudgement] = field(default_factory=list)


def _judged_valid(comparison: Comparison, conditions: Sequence[Condition]) -> Comparison:
    """`comparison` as its validity conditions leave it: INVALID, and never PRIMARY, when any
    failed, whatever its test says."""
    failures = failed_conditions(conditions)
    if not failures:
        return comparison
    return comparison.model_copy(
        update={
            "decision": INVALID,
            "primary": False,
            "secondary_reasons": [f"INVALID: {f}" for f in failures] + comparison.secondary_reasons,
        }
    )


def _measure(
    pairs: Sequence[tuple[RunFiles, RunFiles]],
    prereg: Prereg | None,
    settings: ReportSettings,
    training: TrainingFiles | None,
    defects: Mapping[str, EvalSetDefects],
) -> _Measured:
    measured = _Measured()
    validity = ValiditySettings(settings.samples_required, settings.max_infrastructure_share)
    for baseline_files, candidate_files in pairs:
        baseline = load_run(baseline_files, samples_required=settings.samples_required)
        candidate = load_run(candidate_files, samples_required=settings.samples_required)
        measured.simulated |= baseline.simulated or candidate.simulated
        measured.pins = measured.pins or baseline.identity.pins
        measured.simulated_rule = measured.simulated_rule or baseline.simulated_rule
        measured.baselines[(baseline_files.eval_set, baseline_files.cap)] = baseline
        key = f"{baseline_files.eval_set} cap {baseline_files.cap}"
        measured.systems[key] = [
            summarize_run(run, ks=settings.ks, resamples=settings.resamples, seed=settings.seed)
            for run in (baseline, candidate)
        ]
        comparison = compare_runs(
            baseline,
            candidate,
            k=settings.k,
            alpha=settings.alpha,
            resamples=settings.resamples,
            seed=settings.seed,
            prereg=prereg,
            allow_design_mismatch=settings.allow_design_mismatch,
            gate_overrides=settings.gate_overrides,
        )
        conditions = judge_comparison(baseline_files, candidate_files, training, validity)
        comparison = _judged_valid(comparison, conditions)
        listed = defects.get(baseline_files.eval_set)
        without_defects = None if listed is None else defect_free_summary(comparison, listed)
        measured.validity.append(
            ValidityJudgement(
                eval_set=baseline_files.eval_set,
                cap=baseline_files.cap,
                held=all(c.held for c in conditions),
                conditions=list(conditions),
            )
        )
        measured.comparisons.append(
            RegisteredComparison(
                **dict(comparison),
                endpoint=settings.endpoints.get(baseline_files.eval_set),
                without_known_defects=without_defects,
            )
        )
    return measured


def _prereg_summary(prereg: Prereg | None) -> PreregSummary | None:
    if prereg is None:
        return None
    return PreregSummary(
        path=str(prereg.path),
        sha256=prereg.sha256,
        recorded_sha256=prereg.recorded_sha256,
        hash_matches=prereg.hash_matches,
    )


class _IterationSummary(NamedTuple):
    exploratory: list[ExploratoryComparison] | None = None
    seed_spread: list[SeedSpreadRow] | None = None
    iteration_curve: list[CurvePoint] | None = None


def _iteration_summary(
    measured: _Measured, iterations: IterationInputs | None, settings: ReportSettings
) -> _IterationSummary:
    """The exploratory comparisons, the seed spread and the expert-iteration curve; none of
    them without `iterations` (a graph of one iteration and one training seed)."""
    if iterations is None:
        return _IterationSummary()
    exploratory = exploratory_comparisons(
        measured.baselines,
        iterations,
        lambda files: load_run(files, samples_required=settings.samples_required),
        k=settings.k,
        alpha=settings.alpha,
        resamples=settings.resamples,
        seed=settings.seed,
    )
    registered = next(c for c in measured.comparisons if (c.eval_set, c.cap) == iterations.primary)
    return _IterationSummary(
        exploratory,
        seed_spread(registered, exploratory, iterations),
        iteration_curve(registered, exploratory, iterations),
    )


def build_report(
    pairs: Sequence[tuple[RunFiles, RunFiles]],
    pool_rounds: Sequence[tuple[Path, Path]],
    prereg_path: Path | None,
    settings: ReportSettings,
    iterations: IterationInputs | None = None,
    training: TrainingFiles | None = None,
    defects: Mapping[str, EvalSetDefects] | None = None,
    costs: Sequence[RunCost] = (),
    round_costs: Sequence[StepCost] = (),
) -> tuple[ReportSummary, str, dict[str, bytes]]:
    """Compute, then render: the summary (JSON), the markdown, the plots. `iterations` (a
    graph of several iterations or training seeds) adds the exploratory comparisons, the seed
    spread and the expert-iteration curve; the registered comparison is the same either way.
    `training`: the SFT outputs the registered candidate came from, judged with the pairs.
    `defects`: each eval set's known and found defects, for the secondary comparison without
    them. `costs`, `round_costs`: what each run's steps, and each step of the round, used, for
    the secondary cost section."""
    prereg = read_prereg(prereg_path) if prereg_path is not None else None
    measured = _measure(pairs, prereg, settings, training, defects or {})
    # The power table is the registered design's: its problem count, not this run's.
    power_problems = (
        prereg.design.problem_count
        if prereg
        else max(len(g[0].per_problem) for g in measured.systems.values())
    )
    summary = ReportSummary(
        experiment=settings.experiment,
        simulated=measured.simulated,
        prereg=_prereg_summary(prereg),
        k=settings.k,
        ks=list(settings.ks),
        alpha=settings.alpha,
        bootstrap=BootstrapSettings(resamples=settings.resamples, seed=settings.seed),
        validity=measured.validity,
        comparisons=measured.comparisons,
        systems=measured.systems,
        power=power_table(
            power_problems, settings.power_fractions, settings.power_gains_points, settings.alpha
        ),
        power_problems=power_problems,
        correction_lift=correction_lift(pool_rounds) if pool_rounds else [],
        pins=measured.pins,
        simulated_rule=measured.simulated_rule,
        code=git_revision(),
        package_version=__version__,
        preflight_overrides=list(settings.preflight_overrides),
        gate_overrides=list(settings.gate_overrides),
        costs=cost_rows(costs, _solved_by_run(measured)),
        round_costs=list(round_costs),
        eta_beside_measured=(
            eta_beside_measured(settings.eta, round_costs) if settings.eta and round_costs else None
        ),
        **_iteration_summary(measured, iterations, settings)._asdict(),
    )
    return summary, render_markdown(summary), render_plots(summary)


def _solved_by_run(measured: _Measured) -> dict[tuple[str, str, int], int]:
    """Problems each run solved with any of its samples, by (system, eval set, cap)."""
    return {
        (system.system, system.eval_set, system.cap): system.solved_any
        for group in measured.systems.values()
        for system in group
    }


def render_document(summary: ReportSummary, markdown: str, plots: Mapping[str, bytes]) -> str:
    """The report as one self-contained HTML page: its Markdown document, plots embedded."""
    title = f"Evaluation report: {summary.experiment}"
    return render_html(embedded_plots(markdown, plots), title)


def _report_inputs(
    pairs: Sequence[tuple[RunFiles, RunFiles]],
    pool_rounds: Sequence[tuple[Path, Path]],
    iterations: IterationInputs | None,
    training: TrainingFiles | None,
) -> list[Path]:
    """Every data file the report reads: the runs, the pool rounds, the other iterations' and
    seeds' runs, the registered candidate's SFT outputs."""
    inputs = [
        path
        for base, cand in pairs
        for run in (base, cand)
        for path in (run.problems, run.generations, run.verdicts)
    ]
    inputs += [path for round_files in pool_rounds for path in round_files]
    if training is not None:
        inputs += [
            training.shards / MANIFEST_NAME,
            *training.pool_generations,
            training.pool,
            training.decontamination_sets,
            training.checkpoint / MANIFEST_NAME,
            training.checkpoint / DATA_ORDER_FILE,
            training.export / MANIFEST_NAME,
        ]
    if iterations is not None:
        inputs += [
            path
            for candidate in iterations.candidates
            for run in candidate.runs.values()
            for path in (run.problems, run.generations, run.verdicts)
        ]
        inputs += [path for rounds in iterations.pool_rounds for files in rounds for path in files]
    return inputs


def materialize_report(
    root: Path,
    pairs: Sequence[tuple[RunFiles, RunFiles]],
    pool_rounds: Sequence[tuple[Path, Path]],
    *,
    prereg_path: Path | None,
    config_files: Sequence[Path],
    settings: ReportSettings,
    config: Mapping[str, Any],
    iterations: IterationInputs | None = None,
    training: TrainingFiles | None = None,
    defects: Mapping[str, EvalSetDefects] | None = None,
    with_costs: bool = False,
) -> StepResult[ReportResult]:
    """The bundle for these inputs under `root`: reused when it exists and verifies, refused
    (never overwritten) when it exists and does not. `with_costs`: the cost of each run, read
    from its steps' manifests (inputs of the bundle too)."""
    defects = defects or {}
    runs = [run for pair in pairs for run in pair]
    costs = [run_cost(run) for run in runs] if with_costs else []
    steps = round_costs(pairs, pool_rounds, training) if with_costs else []
    data = _report_inputs(pairs, pool_rounds, iterations, training)
    if with_costs:  # the costs are read from the steps' manifests
        steps_read = [path for run in runs for path in (run.generations, run.verdicts)]
        steps_read += [path for round_files in pool_rounds for path in round_files]
        data += [path.parent / MANIFEST_NAME for path in steps_read]
    data += [path for listed in defects.values() for path in listed.files]
    data = list(dict.fromkeys([*data, *([prereg_path] if prereg_path else [])]))
    inputs = list(dict.fromkeys([*data, *config_files]))
    # Named by the data and by the settings and config it applies, not by the config's file:
    # a data root moved with its config edited to say so keeps its report.
    where = {key: value for key, value in config.items() if key not in PLACE_FIELDS}
    folder = root / bundle_name(data, root, {"settings": asdict(settings), "config": where})
    if folder.exists():
        return _reused_bundle(folder)
    started = now_utc()
    summary, markdown, plots = build_report(
        pairs, pool_rounds, prereg_path, settings, iterations, training, defects, costs, steps
    )
    try:
        manifest = publish_bundle(
            folder,
            markdown=markdown,
            html=render_document(summary, markdown, plots),
            summary=summary,
            plots=plots,
            inputs=inputs,
            config={**dict(config), "report": asdict(settings)},
            started_at=started,
        )
    except OutputExistsError:
        # Another run of this job published the bundle of the same inputs while this one built
        # it: the same evidence, reused as if it had been there first.
        log.info("%s was published by another run meanwhile; reusing it", folder)
        return _reused_bundle(folder)
    return StepResult(folder, manifest, reused=False, result=ReportResult.of(manifest))


def _reused_bundle(folder: Path) -> StepResult[ReportResult]:
    """The existing bundle in `folder`, once it verifies; refused (never overwritten) if not."""
    check = verify_bundle(folder)
    if not check.ok:
        raise RuntimeError(
            f"{folder} exists but no longer verifies: {check.changed[:5]}; reports are never "
            "overwritten, move it aside to rebuild"
        )
    manifest = read_manifest(folder)
    result = ReportResult.of(manifest, folder / MANIFEST_NAME)
    return StepResult(folder, manifest, reused=True, result=result)
