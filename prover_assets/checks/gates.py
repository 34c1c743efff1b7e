"""Gates across runs, asked of Dagster's event log: how each blocking check of an output last
judged its manifest. The rule is `prover_assets.records.gates`'s; which checks block is the
graph's (`prover_assets.checks.graph`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import dagster as dg
from dagster._core.storage.asset_check_execution_record import (
    COMPLETED_ASSET_CHECK_EXECUTION_RECORD_STATUSES,
    AssetCheckExecutionRecord,
)

from prover_assets.records.gates import (
    CheckEvaluation,
    GateFinding,
    Materialization,
    gate_findings,
    lineage,
)

__all__ = ["JUDGED_MANIFEST", "latest_evaluation", "upstream_findings"]

# The metadata key under which every check records the sha256 of the manifest it judged.
JUDGED_MANIFEST = "judged_manifest_sha256"
_PAGE = 100


def _judged(
    record: AssetCheckExecutionRecord,
) -> tuple[str | None, dg.AssetCheckEvaluation | None]:
    if record.event is None or record.event.dagster_event is None:
        return None, None
    evaluation = record.event.dagster_event.asset_check_evaluation_data
    judged = evaluation.metadata.get(JUDGED_MANIFEST)
    return (None if judged is None else str(judged.value)), evaluation


def latest_evaluation(
    instance: dg.DagsterInstance, check: dg.AssetCheckKey, manifest_sha256: str
) -> CheckEvaluation | None:
    """`check`'s latest completed evaluation of the output whose manifest has this sha256; None
    if it never judged that output (an evaluation that raised judged nothing)."""
    cursor = None
    while True:
        records = instance.event_log_storage.get_asset_check_execution_history(
            check,
            limit=_PAGE,
            cursor=cursor,
            status=COMPLETED_ASSET_CHECK_EXECUTION_RECORD_STATUSES,
        )
        for record in records:
            judged, evaluation = _judged(record)
            if judged == manifest_sha256 and evaluation is not None:
                return CheckEvaluation(
                    check.name, evaluation.passed, record.run_id, evaluation.description or ""
                )
        if len(records) < _PAGE:
            return None
        cursor = records[-1].id


def _findings(
    instance: dg.DagsterInstance,
    blocking: Mapping[dg.AssetKey, Sequence[str]],
    output: Materialization,
) -> list[GateFinding]:
    key = dg.AssetKey(list(output.asset))
    checks = blocking.get(key, ())
    evaluations = {
        name: latest_evaluation(instance, dg.AssetCheckKey(key, name), output.manifest_sha256)
        for name in checks
    }
    return gate_findings(output, checks, evaluations)


def upstream_findings(
    instance: dg.DagsterInstance,
    blocking: Mapping[dg.AssetKey, Sequence[str]],
    data_root: Path,
    folder: Path,
) -> list[GateFinding]:
    """Every blocking check (`blocking`: asset -> its blocking checks' names) that does not
    hold for the output in `folder` or for an output it was made from."""
    return [
        finding
        for output in lineage(folder, data_root)
        for finding in _findings(instance, blocking, output)
    ]
