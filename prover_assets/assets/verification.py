"""Verification assets: one verdict file per generation asset, the train pool and the statement
audits, in the Lean workers' pool (in the overlapped schedule each verdict asset with its
generation, `assets/overlapped.py`)."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import dagster as dg

from prover_assets.assets.generation import RETRY
from prover_assets.assets.keys import (
    BASELINE,
    CANDIDATE,
    POOL_CANDIDATES_KEY,
    POOL_ROUND_GROUP,
    PROBLEMS_GROUP,
    TRAIN_POOL,
    EvaluationBatch,
    PoolRoundBatch,
    Schedule,
    eval_set_key,
    iteration_partitions,
    judged_batches,
    node_kinds,
    reference_elaboration_key,
    statement_audit_key,
)
from prover_assets.assets.metadata import (
    StepContext,
    audit_findings_table,
    histogram,
    partition_of,
    step_materialization,
    verdict_work_metadata,
)
from prover_assets.assets.progress import ProgressReporter
from prover_assets.assets.retries import fail_fast, start_attempt
from prover_assets.config import ExperimentSpec
from prover_assets.generation.stages import GENERATIONS_FILE
from prover_assets.problems.stages import CANDIDATES_FILE, PROBLEMS_FILE
from prover_assets.records import read_records
from prover_assets.resources import ExperimentResource, LeanResource
from prover_assets.verify.audit import AuditRun, findings_of
from prover_assets.verify.runner import VerifyStats
from prover_assets.verify.stages import (
    AUDIT_FILE,
    ELABORATION_FILE,
    TRAIN_POOL_FILE,
    VERDICTS_FILE,
    SiblingGeneration,
    materialize_reference_elaboration,
    materialize_statement_audit,
    materialize_train_pool,
    materialize_verdicts,
)

__all__ = [
    "VerdictNode",
    "verdict_asset",
    "verdict_nodes",
    "verification_assets",
    "verify",
]


class VerifyConfig(dg.Config):
    """Run config of a verdict asset. `reverify_stale`: verdicts whose code hash no longer
    matches the generation are moved to stale_verdicts.jsonl and verified again (recorded in the
    manifest); otherwise they are refused. `recompute`: start again from nothing."""

    reverify_stale: bool = False
    recompute: bool = False  # move the existing output aside and verify everything again


@dataclass(frozen=True)
class VerdictNode:
    """One verdict asset of the graph: its key, the generation it judges, its problems (asset,
    file), whether it keeps the REPL's errors (pool rounds), its group, and whether it is made
    per iteration."""

    key: dg.AssetKey
    generation: dg.AssetKey
    problems: tuple[dg.AssetKey, str]
    feedback: bool
    group: str
    description: str
    per_iteration: bool


def verify(
    context: StepContext,
    config: VerifyConfig,
    node: VerdictNode,
    built: ExperimentSpec,
    experiment: ExperimentResource,
    lean: LeanResource,
    sibling: SiblingGeneration | None = None,
) -> dg.MaterializeResult:
    """The verdicts of `node`'s generation (resumable, reused when current), as a step of
    either schedule; with `sibling`, judged as the generation's own step writes it."""
    spec = experiment.model(built)
    partition = partition_of(context)
    folder = experiment.asset_dir(node.key, partition)
    start_attempt(context, folder, VERDICTS_FILE, recompute=config.recompute)
    generations_file = (
        experiment.complete_file(node.generation, GENERATIONS_FILE, partition)
        if sibling is None
        else experiment.asset_dir(node.generation, partition) / GENERATIONS_FILE
    )
    result = materialize_verdicts(
        folder,
        generations_file=generations_file,
        problems_file=experiment.complete_file(*node.problems),
        open_verifier=lambda: lean.open_verifier(spec, feedback=node.feedback),
        self_test=lean.require_self_test,
        commit_every=lean.model().commit_every,
        reverify_stale=config.reverify_stale,
        progress=_verify_progress(ProgressReporter(context, "verified")),
        run_id=context.run.run_id,
        sibling=sibling,
    )
    counts = result.result
    verifier = result.manifest.get("verifier", {})
    return step_materialization(
        result,
        experiment.data_root(),
        {
            "verified": dg.MetadataValue.int(counts.total),
            **verdict_work_metadata(result.folder / VERDICTS_FILE, counts),
            "verified_beside_generation": result.manifest.get("verified_beside_generation"),
            "stages": histogram(counts.stages or {"(none)": 0}, key="stage"),
            "reasons": histogram(counts.reasons or {"(none)": 0}),
            "pins": dg.MetadataValue.json(
                verifier.get("pins", result.manifest["config"].get("pins"))
            ),
        },
    )


def _verify_progress(reporter: ProgressReporter) -> Callable[[VerifyStats], None]:
    def progress(stats: VerifyStats) -> None:
        reporter(
            stats.done,
            stats.total,
            stats.rate(),
            "samples",
            {
                "accepted_now": stats.accepted_now,
                "timeouts": stats.stages.get("timeout", 0),
                "infrastructure": stats.stages.get("infrastructure", 0),
            },
        )

    return progress


def verdict_asset(
    node: VerdictNode, built: ExperimentSpec, schedule: Schedule
) -> dg.AssetsDefinition:
    """`node` as an asset of its own (the exclusive schedule: it runs after its generation)."""

    @dg.asset(
        key=node.key,
        group_name=node.group,
        deps=[node.generation, node.problems[0]],
        partitions_def=iteration_partitions(built.iterations) if node.per_iteration else None,
        pool=schedule.lean_pool,
        retry_policy=RETRY,
        kinds=node_kinds(node.key, "lean", "jsonl"),
        description=node.description,
    )
    @fail_fast
    def verdicts(
        context: dg.AssetExecutionContext,
        config: VerifyConfig,
        experiment: ExperimentResource,
        lean: LeanResource,
    ) -> dg.MaterializeResult:
        return verify(context, config, node, built, experiment, lean)

    return verdicts


def _train_pool_asset(built: ExperimentSpec, schedule: Schedule) -> dg.AssetsDefinition:
    @dg.asset(
        key=TRAIN_POOL,
        group_name=PROBLEMS_GROUP,
        deps=[POOL_CANDIDATES_KEY],
        pool=schedule.lean_pool,
        retry_policy=RETRY,
        kinds={"lean", "jsonl"},
        description="The first N ranked candidates whose statements elaborate under the pinned toolchain.",
    )
    @fail_fast
    def train_pool(
        context: dg.AssetExecutionContext, experiment: ExperimentResource, lean: LeanResource
    ):
        spec = experiment.model(built)
        folder = experiment.asset_dir(TRAIN_POOL)
        start_attempt(context, folder, ELABORATION_FILE)
        reporter = ProgressReporter(context, "elaborated")
        result = materialize_train_pool(
            folder,
            candidates_file=experiment.complete_file(POOL_CANDIDATES_KEY, CANDIDATES_FILE),
            size=spec.pool.size,
            open_verifier=lambda: lean.open_verifier(spec, feedback=False),
            self_test=lean.require_self_test,
            progress=lambda counts: reporter(
                min(counts.elaborated, spec.pool.size),
                spec.pool.size,
                None,
                "statements",
                counts.model_dump(),
            ),
        )
        elaboration = result.result.elaboration
        return step_materialization(
            result,
            experiment.data_root(),
            {
                "checked": elaboration.checked,
                "outcomes": histogram(
                    elaboration.model_dump(exclude={"checked", "unchecked"}), key="status"
                ),
            },
        )

    return train_pool


def _over_statements(
    key: dg.AssetKey, name: str, schedule: Schedule, description: str
) -> Callable[[Callable[..., dg.MaterializeResult]], dg.AssetsDefinition]:
    """The asset decorator of a Lean step over eval set `name`'s statements."""
    return lambda compute: dg.asset(
        key=key,
        group_name=PROBLEMS_GROUP,
        deps=[eval_set_key(name)],
        pool=schedule.lean_pool,
        retry_policy=RETRY,
        kinds=node_kinds(key, "lean", "jsonl"),
        description=description,
    )(fail_fast(compute))


def _statements_of(
    name: str, spec: ExperimentSpec, experiment: ExperimentResource, lean: LeanResource
) -> dict[str, Any]:
    """What a Lean step over eval set `name`'s statements is given: the statements, a
    verifier without the REPL's errors, and its self-test."""
    return {
        "problems_file": experiment.complete_file(eval_set_key(name), PROBLEMS_FILE),
        "open_verifier": lambda: lean.open_verifier(spec, feedback=False),
        "self_test": lean.require_self_test,
    }


def _statement_audit_asset(
    name: str, built: ExperimentSpec, schedule: Schedule
) -> dg.AssetsDefinition:
    key = statement_audit_key(name)
    description = (
        f"The {name} statements audited by Lean: trivial (a closing tactic proves it alone), "
        "vacuous (its hypotheses prove False), phantom (it elaborates only with auto-bound "
        "implicits); each finding with the tactic and Lean's answer. The report's secondary "
        "comparison leaves them out with the known defects."
    )

    @_over_statements(key, name, schedule, description)
    def statement_audit(
        context: dg.AssetExecutionContext, experiment: ExperimentResource, lean: LeanResource
    ) -> dg.MaterializeResult:
        folder = experiment.asset_dir(key)
        start_attempt(context, folder, AUDIT_FILE)
        reporter = ProgressReporter(context, "checks")
        result = materialize_statement_audit(
            folder,
            **_statements_of(name, experiment.model(built), experiment, lean),
            progress=lambda done, total: reporter(done, total, None, "checks", {}),
        )
        audit = result.result
        findings = findings_of(read_records(folder / AUDIT_FILE, AuditRun))
        context.log.info(
            f"{name}: {audit.checks} checks of {audit.problems} statements; found "
            + (", ".join(f"{n} {kind}" for kind, n in audit.found.items()) or "nothing")
            + (" (SIMULATED verifier: labelled, never applied)" if audit.simulated else "")
        )
        return step_materialization(
            result,
            experiment.data_root(),
            {
                "simulated": audit.simulated,
                "statuses": histogram(audit.statuses, key="status"),
                "found": audit_findings_table(findings, simulated=audit.simulated),
            },
        )

    return statement_audit


def _reference_elaboration_asset(
    name: str, built: ExperimentSpec, schedule: Schedule
) -> dg.AssetsDefinition:
    key = reference_elaboration_key(name)
    description = (
        f"Every {name} problem elaborated as `theorem _ref <signature> := by sorry` under the "
        "pinned toolchain, one record each: its check refuses an eval set with a statement "
        "that does not (reference_invalid), and its generations wait for it."
    )

    @_over_statements(key, name, schedule, description)
    def reference_elaboration(
        context: dg.AssetExecutionContext, experiment: ExperimentResource, lean: LeanResource
    ) -> dg.MaterializeResult:
        result = materialize_reference_elaboration(
            experiment.asset_dir(key),
            **_statements_of(name, experiment.model(built), experiment, lean),
        )
        counts = result.result
        context.log.info(
            f"{name}: {counts.statuses.get('elaborated', 0)} of {counts.problems} statements "
            "elaborate" + (" (SIMULATED verifier: not evidence)" if counts.simulated else "")
        )
        return step_materialization(
            result,
            experiment.data_root(),
            {"statuses": histogram(counts.statuses, key="status")},
        )

    return reference_elaboration


def verification_assets(built: ExperimentSpec, schedule: Schedule) -> list[dg.AssetsDefinition]:
    """The Lean assets that judge no generation: the train pool (the candidates that
    elaborate), and each eval set's statement audit and reference elaboration."""
    return [
        _train_pool_asset(built, schedule),
        *(_statement_audit_asset(name, built, schedule) for name in built.eval_sets),
        *(_reference_elaboration_asset(name, built, schedule) for name in built.eval_sets),
    ]


def verdict_nodes(built: ExperimentSpec) -> list[VerdictNode]:
    """Every verdict asset of `built`: one per generation asset."""
    return [_verdict_node(batch) for batch in judged_batches(built)]


def _verdict_node(batch: EvaluationBatch | PoolRoundBatch) -> VerdictNode:
    if isinstance(batch, PoolRoundBatch):
        return VerdictNode(
            batch.verdicts,
            generation=batch.generations,
            problems=(TRAIN_POOL, TRAIN_POOL_FILE),
            feedback=True,
            group=POOL_ROUND_GROUP,
            description=f"Strict verdicts of pool round {batch.round}, with the REPL's errors for "
            "corrections.",
            per_iteration=True,
        )
    return VerdictNode(
        batch.verdicts,
        generation=batch.generations,
        problems=(eval_set_key(batch.eval_set), PROBLEMS_FILE),
        feedback=False,
        group=BASELINE if batch.export is None else CANDIDATE,
        description=f"Strict verdicts of the {batch.system} samples on {batch.eval_set} at cap "
        f"{batch.cap}.",
        per_iteration=batch.export is not None,
    )
