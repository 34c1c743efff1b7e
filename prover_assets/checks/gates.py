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

from prover_assets.assets.keys import legacy_key
from prover_assets.records.gates import (
    CheckEvaluation,
    GateFinding,
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


def _evaluation_of(
    check: dg.AssetCheckKey, record: AssetCheckExecutionRecord, manifest_sha256: str
) -> CheckEvaluation | None:
    """`record`'s evaluation if it is a completed one of the output with this manifest."""
    if record.status not in COMPLETED_ASSET_CHECK_EXECUTION_RECORD_STATUSES:
        return None
    judged, evaluation = _judged(record)
    if judged != manifest_sha256 or evaluation is None:
        return None
    return CheckEvaluation(
        check.name, evaluation.passed, record.run_id, evaluation.description or ""
    )


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
            if (found := _evaluation_of(check, record, manifest_sha256)) is not None:
                return found
        if len(records) < _PAGE:
            return None
        cursor = records[-1].id


def _legacy_evaluation(
    instance: dg.DagsterInstance, check: dg.AssetCheckKey, manifest_sha256: str
) -> CheckEvaluation | None:
    """`check`'s evaluation of the manifest under the asset's key before it was labelled
    (`legacy_key`): a failure judged then still stops a reader now."""
    old = legacy_key(check.asset_key)
    if old is None:
        return None
    return latest_evaluation(instance, dg.AssetCheckKey(old, check.name), manifest_sha256)


def upstream_findings(
    instance: dg.DagsterInstance,
    blocking: Mapping[dg.AssetKey, Sequence[str]],
    data_root: Path,
    folder: Path,
) -> list[GateFinding]:
    """Every blocking check (`blocking`: asset -> its blocking checks' names) that does not
    hold for the output in `folder` or for an output it was made from.

    Every step asks this of each output it reads, so the latest execution of every check
    involved comes in one query; only a check whose latest execution is not a completed one of
    that output (judged since, or running now) is searched further back (`latest_evaluation`).
    """
    outputs = [(output, dg.AssetKey(list(output.asset))) for output in lineage(folder, data_root)]
    checks = [dg.AssetCheckKey(key, name) for _, key in outputs for name in blocking.get(key, ())]
    latest = instance.event_log_storage.get_latest_asset_check_execution_by_key(checks)
    findings: list[GateFinding] = []
    for output, key in outputs:
        names = blocking.get(key, ())
        evaluations = {}
        for name in names:
            check = dg.AssetCheckKey(key, name)
            found = (
                _evaluation_of(check, latest[check], output.manifest_sha256)
                if check in latest
                else None
            )
            evaluations[name] = (
                found
                or latest_evaluation(instance, check, output.manifest_sha256)
                or _legacy_evaluation(instance, check, output.manifest_sha256)
            )
        findings.extend(gate_findings(output, names, evaluations))
    return findings
