"""Blocking checks of the problem assets."""

import dagster as dg

from prover_assets.assets.keys import POOL_CANDIDATES_KEY, eval_set_key
from prover_assets.checks import complete_file, gate, manifest_of, result_of, to_result
from prover_assets.config import ExperimentSpec
from prover_assets.problems.pool import PoolCandidatesResult
from prover_assets.problems.stages import CANDIDATES_FILE, PROBLEMS_FILE, EvalSetResult
from prover_assets.problems.validity import (
    check_counts_reconcile,
    check_goedel_normalisation,
    check_ids_unique,
    check_pool_counts,
    check_statements_parse,
)
from prover_assets.records.manifest import recorded_path
from prover_assets.records.validity import CheckOutcome

__all__ = ["problem_checks"]


def _eval_set_checks(name: str) -> list[dg.AssetChecksDefinition]:
    key = eval_set_key(name)

    @gate(key, "counts_reconcile", "rows read = problems written + rows dropped (with reasons)")
    def counts_reconcile(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        return to_result(context, check_counts_reconcile(result_of(context, key, EvalSetResult)))

    @gate(key, "ids_unique", "no problem id appears twice")
    def ids_unique(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        return to_result(context, check_ids_unique(complete_file(context, key, PROBLEMS_FILE)))

    @gate(
        key, "statements_parse", "every formal statement lexes and splits into header and theorem"
    )
    def statements_parse(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        return to_result(
            context, check_statements_parse(complete_file(context, key, PROBLEMS_FILE))
        )

    @gate(
        key,
        "goedel_normalisation",
        "each statement is Goedel's split(':= by') rule of its source, byte for byte, "
        "wherever that rule applies (the others are named)",
    )
    def goedel_normalisation(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        problems = complete_file(context, key, PROBLEMS_FILE)
        source = recorded_path(problems.parent, manifest_of(context, key)["inputs"][0]["path"])
        return to_result(context, check_goedel_normalisation(source, problems))

    return [counts_reconcile, ids_unique, statements_parse, goedel_normalisation]


def _pool_candidate_checks() -> list[dg.AssetChecksDefinition]:
    @gate(
        POOL_CANDIDATES_KEY,
        "counts_reconcile",
        "pool rows = candidates + rows dropped by each layer; the file holds exactly the candidates",
    )
    def counts_reconcile(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        counts = result_of(context, POOL_CANDIDATES_KEY, PoolCandidatesResult)
        candidates = complete_file(context, POOL_CANDIDATES_KEY, CANDIDATES_FILE)
        return to_result(context, check_pool_counts(counts, candidates))

    @gate(
        POOL_CANDIDATES_KEY,
        "enough_candidates",
        "at least the run's pool.size candidates to choose the train pool from "
        "(a warning, not a gate)",
        blocking=False,
    )
    def enough_candidates(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        manifest = manifest_of(context, POOL_CANDIDATES_KEY)  # its config: the run's pool spec
        size = manifest["config"]["size"]
        written = PoolCandidatesResult.of(manifest, POOL_CANDIDATES_KEY.to_user_string()).written
        return to_result(
            context,
            CheckOutcome(
                written >= size,
                f"{written} candidates for a pool of {size}",
                {"candidates": written, "pool_size": size},
            ),
            gate=False,
        )

    return [counts_reconcile, enough_candidates]


def problem_checks(built: ExperimentSpec) -> list[dg.AssetChecksDefinition]:
    """The checks of the eval sets and of the pool's candidates."""
    checks = [check for name in built.eval_sets for check in _eval_set_checks(name)]
    return checks + _pool_candidate_checks()
