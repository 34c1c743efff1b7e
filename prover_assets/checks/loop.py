"""Blocking checks of the generation and verdict assets, and the reference elaboration check."""

from collections.abc import Callable
from pathlib import Path

import dagster as dg

from prover_assets.assets.keys import (
    BASELINE,
    TRAIN_POOL,
    eval_set_key,
    evaluated_systems,
    generations_key,
    iteration_partitions,
    pool_generations_key,
    pool_verdicts_key,
    reference_elaboration_key,
    verdicts_key,
)
from prover_assets.checks import complete_file, gate, made_from, result_of, to_result
from prover_assets.config import ExperimentSpec
from prover_assets.generation.corrections import check_correction_children
from prover_assets.generation.runner import GenerationBatchResult
from prover_assets.generation.stages import (
    GENERATIONS_FILE,
    recorded_solved_before,
    round0_problems,
)
from prover_assets.generation.validity import (
    check_design_match,
    check_rows_valid,
    check_samples_per_problem,
)
from prover_assets.problems.stages import PROBLEMS_FILE
from prover_assets.records import (
    Generation,
    Verification,
    iter_records,
    read_records,
)
from prover_assets.records.staleness import current_verdicts
from prover_assets.records.validity import CheckOutcome
from prover_assets.resources import LeanResource
from prover_assets.verify.runner import CHUNKS_FILE
from prover_assets.verify.stages import REFERENCE_FILE, TRAIN_POOL_FILE, VERDICTS_FILE
from prover_assets.verify.validity import (
    check_chunks,
    check_infrastructure_within_bound,
    check_no_length_capped_accepted,
    check_references_elaborate,
    check_verdicts_cover_generations,
    check_verifier_identical,
)

__all__ = ["loop_checks"]


def _generation_checks(
    key: dg.AssetKey,
    problems: tuple[dg.AssetKey, str],
    *,
    previous: tuple[dg.AssetKey, dg.AssetKey] | None,
    partitions: dg.PartitionsDefinition | None,
) -> list:
    @gate(
        key,
        "rows_satisfy_contract",
        "every generation row validates against the record contract, as many as the manifest says",
        partitions=partitions,
    )
    def rows_satisfy_contract(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        expected = result_of(context, key, GenerationBatchResult).rows
        return to_result(
            context, check_rows_valid(complete_file(context, key, GENERATIONS_FILE), expected)
        )

    if previous is None:

        @gate(
            key,
            "samples_per_problem",
            "every problem has at least the run's `generation.n_samples` samples "
            "(a validity condition; a later iteration's pool round 0: every problem no earlier "
            "iteration solved)",
            partitions=partitions,
        )
        def samples_per_problem(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
            # The samples per problem of the run that made this output, and the rounds it left the solved
            # problems of out, as its manifest records them.
            samples_per_problem = result_of(
                context, key, GenerationBatchResult
            ).plan.samples_per_problem
            earlier = recorded_solved_before(made_from(context, key))
            problem_ids = [
                p.problem_id for p in round0_problems(complete_file(context, *problems), earlier)
            ]
            generations = complete_file(context, key, GENERATIONS_FILE)
            return to_result(
                context, check_samples_per_problem(generations, problem_ids, samples_per_problem)
            )

        return [rows_satisfy_contract, samples_per_problem]

    @gate(
        key,
        "children_have_failed_parents",
        "every correction child has an existing failed parent (with Lean errors) of an unsolved problem",
        partitions=partitions,
    )
    def children_have_failed_parents(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        previous_generations = {
            g.key: g
            for g in iter_records(complete_file(context, previous[0], GENERATIONS_FILE), Generation)
        }
        verdicts = current_verdicts(
            previous_generations,
            iter_records(complete_file(context, previous[1], VERDICTS_FILE), Verification),
        )
        children = read_records(complete_file(context, key, GENERATIONS_FILE), Generation)
        samples_per_problem = result_of(
            context, key, GenerationBatchResult
        ).plan.samples_per_problem
        return to_result(
            context,
            check_correction_children(
                children, previous_generations, verdicts, samples_per_problem=samples_per_problem
            ),
        )

    return [rows_satisfy_contract, children_have_failed_parents]


def _design_match_check(
    eval_set: str, cap: int, system: str, partitions: dg.PartitionsDefinition | None
) -> dg.AssetChecksDefinition:
    key, baseline = (
        generations_key(eval_set, system, cap),
        generations_key(eval_set, BASELINE, cap),
    )

    @gate(
        key,
        "design_match",
        "round-0 prompts and sampling identical to the baseline's, sample by sample",
        partitions=partitions,
        reads=[baseline],
    )
    def design_match(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        return to_result(
            context,
            check_design_match(
                complete_file(context, baseline, GENERATIONS_FILE),
                complete_file(context, key, GENERATIONS_FILE),
            ),
        )

    return design_match


def _verdict_checks(
    key: dg.AssetKey,
    generation: dg.AssetKey,
    compare_with: dg.AssetKey | None,
    partitions: dg.PartitionsDefinition | None,
) -> list:
    deps = [generation] + ([compare_with] if compare_with else [])

    def judged(context: dg.AssetCheckExecutionContext) -> tuple[Path, Path]:
        """The generations and the verdicts that judge them, each complete."""
        return (
            complete_file(context, generation, GENERATIONS_FILE),
            complete_file(context, key, VERDICTS_FILE),
        )

    def of_both(
        name: str, description: str, check: Callable[[Path, Path], CheckOutcome]
    ) -> dg.AssetChecksDefinition:
        """Gate `name` of the verdicts, judging them with the generations they judge."""

        @gate(key, name, description, partitions=partitions, reads=[generation])
        def judge(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
            return to_result(context, check(*judged(context)))

        return judge

    @gate(
        key,
        "verifier_identical",
        "pins, verifier config and budget identical across the comparison",
        partitions=partitions,
        reads=deps,
    )
    def verifier_identical(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        files = [complete_file(context, key, VERDICTS_FILE)]
        if compare_with is not None:
            files.append(complete_file(context, compare_with, VERDICTS_FILE))
        return to_result(context, check_verifier_identical(files))

    verdicts_cover_generations = of_both(
        "verdicts_cover_generations",
        "exactly one current verdict per generation: same keys, same code sha256",
        check_verdicts_cover_generations,
    )
    no_length_capped_accepted = of_both(
        "no_length_capped_accepted",
        "no accepted proof comes from a sample cut by its token cap or a clipped context",
        check_no_length_capped_accepted,
    )

    @gate(
        key,
        "no_chunk_half_dead",
        "no commit chunk in which more than half the samples died for infrastructure reasons",
        partitions=partitions,
    )
    def no_chunk_half_dead(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        return to_result(context, check_chunks(complete_file(context, key, CHUNKS_FILE)))

    @gate(
        key,
        "infrastructure_within_bound",
        "at most lean.max_infrastructure_share of the verdicts are infrastructure "
        "(never judgements; a re-run verifies them again); none only of an empty batch",
        partitions=partitions,
        reads=[generation],
    )
    def infrastructure_within_bound(
        context: dg.AssetCheckExecutionContext, lean: LeanResource
    ) -> dg.AssetCheckResult:
        return to_result(
            context,
            check_infrastructure_within_bound(
                *judged(context), lean.model().max_infrastructure_share
            ),
        )

    return [
        verifier_identical,
        verdicts_cover_generations,
        no_length_capped_accepted,
        no_chunk_half_dead,
        infrastructure_within_bound,
    ]


def _reference_check(eval_set: str) -> dg.AssetChecksDefinition:
    key = reference_elaboration_key(eval_set)

    @gate(
        key,
        "reference_elaborates",
        "every problem elaborates as `theorem _ref <signature> := by sorry` "
        "under the pinned toolchain; one that does not is reference_invalid",
    )
    def reference_elaborates(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        return to_result(
            context, check_references_elaborate(complete_file(context, key, REFERENCE_FILE))
        )

    return reference_elaborates


def loop_checks(built: ExperimentSpec) -> list:
    """The blocking checks of the generation and verdict assets, and the reference elaboration of
    each eval set."""
    checks: list = []
    per_iteration = iteration_partitions(built.iterations)
    for eval_set in built.eval_sets:
        checks.append(_reference_check(eval_set))
        for cap in built.caps_of(eval_set):
            for system, export in evaluated_systems(built):
                partitions = None if export is None else per_iteration
                checks += _generation_checks(
                    generations_key(eval_set, system, cap),
                    (eval_set_key(eval_set), PROBLEMS_FILE),
                    previous=None,
                    partitions=partitions,
                )
                checks += _verdict_checks(
                    verdicts_key(eval_set, system, cap),
                    generations_key(eval_set, system, cap),
                    None if export is None else verdicts_key(eval_set, BASELINE, cap),
                    partitions,
                )
                if export is not None:
                    checks.append(_design_match_check(eval_set, cap, system, partitions))
    for round in range(built.corrections.rounds + 1):
        previous = (
            None if round == 0 else (pool_generations_key(round - 1), pool_verdicts_key(round - 1))
        )
        checks += _generation_checks(
            pool_generations_key(round),
            (TRAIN_POOL, TRAIN_POOL_FILE),
            previous=previous,
            partitions=per_iteration,
        )
        checks += _verdict_checks(
            pool_verdicts_key(round), pool_generations_key(round), None, per_iteration
        )
    return checks
