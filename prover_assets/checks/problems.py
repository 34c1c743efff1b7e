"""Blocking checks of the problem assets."""

from pathlib import Path

import dagster as dg

from prover_assets.assets.metadata import output_dir
from prover_assets.assets.problems import POOL_CANDIDATES_KEY, eval_set_key
from prover_assets.checks import to_result
from prover_assets.config import ExperimentSpec
from prover_assets.problems.stages import CANDIDATES_FILE, PROBLEMS_FILE
from prover_assets.problems.validity import (
    check_counts_reconcile,
    check_goedel_normalisation,
    check_ids_unique,
    check_pool_counts,
    check_statements_parse,
)
from prover_assets.records import read_manifest
from prover_assets.records.validity import CheckOutcome

__all__ = ["problem_checks"]


def _eval_set_checks(name: str, format_: str) -> list[dg.AssetChecksDefinition]:
    key = eval_set_key(name)

    def folder(context: dg.AssetCheckExecutionContext) -> Path:
        return Path(output_dir(context, key))

    @dg.asset_check(
        asset=key,
        name="counts_reconcile",
        blocking=True,
        description="rows read = problems written + rows dropped (with reasons)",
    )
    def counts_reconcile(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        return to_result(check_counts_reconcile(read_manifest(folder(context))["counts"]))

    @dg.asset_check(
        asset=key, name="ids_unique", blocking=True, description="no problem id appears twice"
    )
    def ids_unique(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        return to_result(check_ids_unique(folder(context) / PROBLEMS_FILE))

    @dg.asset_check(
        asset=key,
        name="statements_parse",
        blocking=True,
        description="every formal statement lexes and splits into header and theorem",
    )
    def statements_parse(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        return to_result(check_statements_parse(folder(context) / PROBLEMS_FILE))

    checks = [counts_reconcile, ids_unique, statements_parse]
    if format_ == "minif2f":

        @dg.asset_check(
            asset=key,
            name="goedel_normalisation",
            blocking=True,
            description="each statement equals the Goedel-Prover-V2 source's, after its documented normalisation only",
        )
        def goedel_normalisation(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
            manifest = read_manifest(folder(context))
            source = Path(manifest["inputs"][0]["path"])
            return to_result(check_goedel_normalisation(source, folder(context) / PROBLEMS_FILE))

        checks.append(goedel_normalisation)
    return checks


def _pool_candidate_checks(built: ExperimentSpec) -> list[dg.AssetChecksDefinition]:
    @dg.asset_check(
        asset=POOL_CANDIDATES_KEY,
        name="counts_reconcile",
        blocking=True,
        description="pool rows = candidates + rows dropped by each layer; the file holds exactly the candidates",
    )
    def counts_reconcile(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        folder = Path(output_dir(context, POOL_CANDIDATES_KEY))
        counts = read_manifest(folder)["counts"]
        return to_result(check_pool_counts(counts, folder / CANDIDATES_FILE))

    @dg.asset_check(
        asset=POOL_CANDIDATES_KEY,
        name="enough_candidates",
        description="at least pool.size candidates to choose the train pool from (a warning, not a gate)",
    )
    def enough_candidates(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        written = read_manifest(output_dir(context, POOL_CANDIDATES_KEY))["counts"]["written"]
        return to_result(
            CheckOutcome(
                written >= built.pool.size,
                f"{written} candidates for a pool of {built.pool.size}",
                {"candidates": written, "pool_size": built.pool.size},
            ),
            gate=False,
        )

    return [counts_reconcile, enough_candidates]


def problem_checks(built: ExperimentSpec) -> list[dg.AssetChecksDefinition]:
    checks = []
    for name, spec in built.eval_sets.items():
        checks += _eval_set_checks(name, spec.format)
    return checks + _pool_candidate_checks(built)
