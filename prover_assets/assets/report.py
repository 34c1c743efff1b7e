"""The report asset: the paired comparisons, every table, the plots, as an evidence bundle."""

import datetime
from pathlib import Path
from typing import Any

import dagster as dg

from prover_assets.assets.eta import ETA_TABLE
from prover_assets.assets.generation import pool_rounds
from prover_assets.assets.keys import (
    BASELINE,
    CANDIDATE,
    DECONTAMINATION_KEY,
    ETA_KEY,
    REPORT_GROUP,
    REPORT_KEY,
    SFT_SHARDS,
    TRAIN_POOL,
    eval_set_key,
    generations_key,
    judged_batches,
    statement_audit_key,
    training_runs,
    verdicts_key,
)
from prover_assets.assets.metadata import OUTPUT_DIR, latest_materialization
from prover_assets.assets.sft import sft_rounds
from prover_assets.config import ExperimentSpec
from prover_assets.generation.stages import GENERATIONS_FILE
from prover_assets.iteration import iteration_partition
from prover_assets.operations.eta import EtaEstimate
from prover_assets.preflight import HEAVY_JOBS
from prover_assets.problems.defects import known_defects_of
from prover_assets.problems.stages import PROBLEMS_FILE, SETS_FILE
from prover_assets.records import Problem, read_records
from prover_assets.records.outputs import StepResult
from prover_assets.report.bundle import (
    HTML_FILE,
    PLOTS_DIR,
    REPORT_FILE,
    SUMMARY_FILE,
    ReportResult,
)
from prover_assets.report.defects import EvalSetDefects
from prover_assets.report.iterations import CandidateRuns, IterationInputs
from prover_assets.report.markdown import embedded_plots
from prover_assets.report.runs import RunFiles
from prover_assets.report.stages import ReportSettings, materialize_report
from prover_assets.report.summary import Comparison, read_summary
from prover_assets.report.validity import TrainingFiles
from prover_assets.resources import ExperimentResource, LeanResource
from prover_assets.verify.audit import AuditRun, findings_of
from prover_assets.verify.stages import (
    AUDIT_FILE,
    TRAIN_POOL_FILE,
    VERDICTS_FILE,
    StatementAuditResult,
)

__all__ = ["report_assets", "report_reads"]


class ReportConfig(dg.Config):
    """Run config of the report: `allow_design_mismatch` compares runs whose sampling or
    round-0 prompts differ, for the reason it gives (printed in the report, which is then never
    PRIMARY)."""

    allow_design_mismatch: str | None = None


def report_assets(built: ExperimentSpec) -> list[dg.AssetsDefinition]:
    """The evaluation report asset, with its evidence bundle, for `built`'s eval sets and caps."""
    pairs = [(name, cap) for name in built.eval_sets for cap in built.caps_of(name)]

    @dg.asset(
        key=REPORT_KEY,
        group_name=REPORT_GROUP,
        deps=report_reads(built),
        kinds={"markdown"},
        description="The registered comparison (PRIMARY only for the registered design) and every "
        "secondary one: tables, exact McNemar, intervals, power, correction lift, limitations, "
        "published as a verifiable evidence bundle. With several iterations or training seeds: "
        "every other comparison (exploratory), the seed spread and the expert-iteration curve.",
    )
    def eval_report(
        context: dg.AssetExecutionContext,
        config: ReportConfig,
        experiment: ExperimentResource,
        lean: LeanResource,
    ):
        spec = experiment.model(built)
        report = spec.report

        first = iteration_partition(spec.iterations, 1)  # the registered comparison's
        result = materialize_report(
            experiment.asset_dir(REPORT_KEY),
            [
                (
                    _run_files(experiment, s, BASELINE, c),
                    _run_files(
                        experiment, s, CANDIDATE, c, first, _candidate_name(spec, CANDIDATE, 1)
                    ),
                )
                for s, c in pairs
            ],
            pool_rounds(spec, experiment, first),
            prereg_path=Path(report.prereg),
            config_files=[Path(experiment.source)] if experiment.source else [],
            settings=_report_settings(
                spec,
                config,
                preflight_overrides(context.instance),
                gate_overrides(context.instance),
                lean.model().max_infrastructure_share,
                latest_eta(context.instance),
            ),
            config=spec.model_dump(mode="json"),
            iterations=_iteration_inputs(spec, experiment, pairs),
            training=_training_files(spec, experiment, first),
            defects=_defect_lists(spec, experiment),
            with_costs=True,
        )
        context.log.info(f"report: {result.folder / REPORT_FILE} (and {HTML_FILE})")
        return dg.MaterializeResult(metadata=report_metadata(result))

    return [eval_report]


def report_metadata(result: StepResult[ReportResult]) -> dict[str, Any]:
    """The report's materialization metadata: the document as the UI shows it (the bundle's
    `report.md`, its plots embedded), its paths and counts, and each comparison's headline
    numbers read back from its `summary.json`."""
    folder = result.folder
    plots = {p.name: p.read_bytes() for p in sorted((folder / PLOTS_DIR).iterdir())}
    markdown = (folder / REPORT_FILE).read_text(encoding="utf-8")
    metadata: dict[str, Any] = {
        OUTPUT_DIR: dg.MetadataValue.path(str(folder)),
        "report": dg.MetadataValue.md(embedded_plots(markdown, plots)),
        "report_html": dg.MetadataValue.path(str(folder / HTML_FILE)),
        "simulated": result.result.simulated,
        "comparisons": result.result.comparisons,
        "reused_complete_output": result.reused,
    }
    for comparison in read_summary(folder / SUMMARY_FILE).comparisons:
        metadata.update(headline_metadata(comparison))
    return metadata


def report_reads(built: ExperimentSpec) -> list[dg.AssetKey]:
    """Every asset the report reads, its `deps` (test_demo.py holds them equal to the inputs its
    manifest records): each eval set's problems and statement audit, every evaluated system's
    generations and verdicts, the pool rounds, and the registered candidate's training data,
    checkpoint and export (the validity conditions judge them)."""
    registered = training_runs(built.training.all_seeds())[0]
    return [
        *(eval_set_key(name) for name in built.eval_sets),
        *(statement_audit_key(name) for name in built.eval_sets),
        *(key for batch in judged_batches(built) for key in (batch.generations, batch.verdicts)),
        SFT_SHARDS,
        TRAIN_POOL,
        DECONTAMINATION_KEY,
        registered.checkpoint,
        registered.export,
    ]


def _run_files(
    experiment: ExperimentResource,
    eval_set: str,
    system: str,
    cap: int,
    partition: str | None = None,
    name: str = "",
) -> RunFiles:
    """The files of `system`'s run on `eval_set` at `cap` (of iteration `partition`), each
    re-hashed; named `name` in the report (default: the system)."""
    return RunFiles(
        name or system,
        eval_set,
        cap,
        experiment.complete_file(eval_set_key(eval_set), PROBLEMS_FILE),
        experiment.complete_file(
            generations_key(eval_set, system, cap), GENERATIONS_FILE, partition
        ),
        experiment.complete_file(verdicts_key(eval_set, system, cap), VERDICTS_FILE, partition),
    )


def _training_files(
    spec: ExperimentSpec, experiment: ExperimentResource, partition: str | None
) -> TrainingFiles:
    """The SFT outputs of the registered candidate (the registered seed of iteration
    `partition`), each read through the gates."""
    registered = training_runs(spec.training.all_seeds())[0]
    return TrainingFiles(
        shards=experiment.complete_folder(SFT_SHARDS, partition),
        pool_generations=tuple(
            generations for generations, _ in sft_rounds(spec, experiment, partition)
        ),
        pool=experiment.complete_file(TRAIN_POOL, TRAIN_POOL_FILE),
        decontamination_sets=experiment.complete_file(DECONTAMINATION_KEY, SETS_FILE),
        checkpoint=experiment.upstream_dir(registered.checkpoint, partition),
        export=experiment.upstream_dir(registered.export, partition),
    )


def _defect_lists(
    spec: ExperimentSpec, experiment: ExperimentResource
) -> dict[str, EvalSetDefects]:
    """Each eval set's shipped defect list among its kept problems (None for a copy with no
    list shipped) and its statement audit's findings, labelled when a simulated verifier ran it."""
    lists = {}
    for name, eval_set in spec.eval_sets.items():
        problems = experiment.complete_file(eval_set_key(name), PROBLEMS_FILE)
        kept = {p.problem_id for p in read_records(problems, Problem)}
        audit = experiment.complete_file(statement_audit_key(name), AUDIT_FILE)
        lists[name] = EvalSetDefects(
            known=known_defects_of(eval_set, kept),
            audit=audit,
            found=tuple(findings_of(read_records(audit, AuditRun))),
            found_simulated=StatementAuditResult.read(audit.parent).simulated,
        )
    return lists


def _candidate_name(spec: ExperimentSpec, system: str, iteration: int) -> str:
    return system if spec.iterations == 1 else f"{system} (iteration {iteration})"


def _iteration_inputs(
    spec: ExperimentSpec, experiment: ExperimentResource, pairs: list[tuple[str, int]]
) -> IterationInputs | None:
    """Every iteration's and seed's candidate runs and pool rounds, for a graph of several
    (None for the registered design's one iteration of one seed)."""
    if spec.iterations == 1 and len(spec.training.all_seeds()) == 1:
        return None

    def partition(i: int) -> str | None:
        return iteration_partition(spec.iterations, i)

    iterations = range(1, spec.iterations + 1)
    return IterationInputs(
        registered_seed=spec.training.seed,
        candidates=[
            CandidateRuns(
                i,
                run.seed,
                {
                    (s, c): _run_files(
                        experiment,
                        s,
                        run.system,
                        c,
                        partition(i),
                        _candidate_name(spec, run.system, i),
                    )
                    for s, c in pairs
                },
            )
            for i in iterations
            for run in training_runs(spec.training.all_seeds())
        ],
        pool_rounds=[pool_rounds(spec, experiment, partition(i)) for i in iterations],
        primary=(spec.report.primary_set, spec.report.primary_cap),
    )


def preflight_overrides(instance: dg.DagsterInstance) -> tuple[str, ...]:
    """Every heavy run of the instance launched with `preflight_override`, oldest first, as
    "run <id> (job <name>, <when>): <reason>". All of them, not only those whose outputs the
    report reads: a reused output was made by an earlier run, and this never hides one."""
    return _overrides(instance, "preflight_override", sorted(HEAVY_JOBS))


def gate_overrides(instance: dg.DagsterInstance) -> tuple[str, ...]:
    """Every run of the instance launched with `gate_override` (reading outputs whose blocking
    checks failed or never judged them), oldest first, as `preflight_overrides` says them."""
    return _overrides(instance, "gate_override", None)


def _overrides(instance: dg.DagsterInstance, field: str, jobs: list[str] | None) -> tuple[str, ...]:
    filters = [dg.RunsFilter()] if jobs is None else [dg.RunsFilter(job_name=j) for j in jobs]
    found = []
    for runs in filters:
        for run in instance.get_run_records(runs):
            config = run.dagster_run.run_config.get("resources", {}).get("experiment", {})
            reason = config.get("config", {}).get(field)
            if reason:
                found.append(
                    (run.create_timestamp, run.dagster_run.run_id, run.dagster_run.job_name, reason)
                )
    return tuple(
        f"run {run_id} (job {job}, {when:%Y-%m-%d %H:%M} UTC): {reason}"
        for when, run_id, job, reason in sorted(found)
    )


def latest_eta(instance: dg.DagsterInstance) -> EtaEstimate | None:
    """The `eta` asset's latest estimate and when it was made; None if it was never
    materialized (or before it recorded its table)."""
    event = latest_materialization(instance, ETA_KEY)
    if event is None or event.asset_materialization is None:
        return None
    metadata = event.asset_materialization.metadata
    if ETA_TABLE not in metadata:
        return None
    made = datetime.datetime.fromtimestamp(event.timestamp, datetime.UTC)
    return EtaEstimate.of(metadata[ETA_TABLE].value, made.isoformat(timespec="seconds"))


def _report_settings(
    spec: ExperimentSpec,
    config: ReportConfig,
    overrides: tuple[str, ...],
    gates_overridden: tuple[str, ...],
    max_infrastructure_share: float,
    eta: EtaEstimate | None = None,
) -> ReportSettings:
    report = spec.report
    return ReportSettings(
        experiment=spec.name,
        k=report.k,
        ks=tuple(report.ks),
        alpha=report.alpha,
        resamples=report.bootstrap_resamples,
        seed=report.bootstrap_seed,
        samples_required=spec.generation.n_samples,
        power_fractions=tuple(report.power_discordant_fractions),
        power_gains_points=tuple(report.power_gains_points),
        allow_design_mismatch=config.allow_design_mismatch,
        preflight_overrides=overrides,
        gate_overrides=gates_overridden,
        max_infrastructure_share=max_infrastructure_share,
        eta=eta,
        endpoints={
            name: spec_set.endpoint
            for name, spec_set in spec.eval_sets.items()
            if spec_set.endpoint is not None
        },
    )


def headline_metadata(comparison: Comparison) -> dict[str, Any]:
    """One comparison's headline numbers as first-class metadata (the UI plots each across
    materializations): solved@k per system, the discordant counts, p, the pass@1 difference
    with its interval, the decision; and the per-problem table."""
    name = f"{comparison.eval_set}_c{comparison.cap}"
    k = comparison.k
    table, diff = comparison.table, comparison.pass1_difference
    return {
        f"{name}_decision": (
            f"{comparison.decision} ({'PRIMARY' if comparison.primary else 'secondary'})"
        ),
        f"{name}_baseline_solved_at_{k}": dg.MetadataValue.int(comparison.baseline.solved_at_k),
        f"{name}_candidate_solved_at_{k}": dg.MetadataValue.int(comparison.candidate.solved_at_k),
        f"{name}_discordant_candidate_only": dg.MetadataValue.int(table.candidate_only),
        f"{name}_discordant_baseline_only": dg.MetadataValue.int(table.baseline_only),
        f"{name}_p_value": dg.MetadataValue.float(comparison.p_value),
        f"{name}_pass1_difference": dg.MetadataValue.float(diff.estimate),
        f"{name}_pass1_difference_low": dg.MetadataValue.float(diff.low),
        f"{name}_pass1_difference_high": dg.MetadataValue.float(diff.high),
        f"{name}_per_problem": _per_problem_table(comparison),
    }


def _per_problem_table(comparison: Comparison) -> dg.TableMetadataValue:
    k = comparison.k
    columns = [
        dg.TableColumn("problem", "string"),
        dg.TableColumn("baseline_accepted", "int"),
        dg.TableColumn("candidate_accepted", "int"),
        dg.TableColumn("samples", "int"),
        dg.TableColumn(f"baseline_solved_at_{k}", "bool"),
        dg.TableColumn(f"candidate_solved_at_{k}", "bool"),
        dg.TableColumn("discordant", "string"),
    ]
    records = [
        dg.TableRecord(
            {
                "problem": row.problem_id,
                "baseline_accepted": row.baseline.c,
                "candidate_accepted": row.candidate.c,
                "samples": row.baseline.n,
                f"baseline_solved_at_{k}": row.baseline.solved,
                f"candidate_solved_at_{k}": row.candidate.solved,
                "discordant": row.cell if row.cell.endswith("_only") else "",
            }
        )
        for row in comparison.per_problem
    ]
    return dg.MetadataValue.table(records, dg.TableSchema(columns))
