"""Problem assets: the evaluation sets, the decontamination sets, the pool's ranked candidates."""

import time

import dagster as dg

from prover_assets.assets.keys import (
    DECONTAMINATION_KEY,
    POOL_CANDIDATES_KEY,
    PROBLEMS_GROUP,
    eval_set_key,
    node_kinds,
)
from prover_assets.assets.metadata import (
    defects_table,
    display_number,
    histogram,
    step_materialization,
)
from prover_assets.assets.progress import ProgressReporter
from prover_assets.config import ExperimentSpec
from prover_assets.problems.defects import known_defects_of
from prover_assets.problems.stages import (
    PROBLEMS_FILE,
    materialize_decontamination_sets,
    materialize_eval_set,
    materialize_pool_candidates,
)
from prover_assets.records import Problem, read_records
from prover_assets.report.markdown import png_image
from prover_assets.report.plots import funnel_plot
from prover_assets.resources import ExperimentResource

__all__ = ["problem_assets"]


def _eval_set_asset(name: str, built: ExperimentSpec) -> dg.AssetsDefinition:
    @dg.asset(
        key=eval_set_key(name),
        group_name=PROBLEMS_GROUP,
        kinds=node_kinds(eval_set_key(name), "jsonl"),
        description=f"The {name} evaluation problems, normalised by Goedel's rule made safe.",
    )
    def eval_problems(context: dg.AssetExecutionContext, experiment: ExperimentResource):
        spec = experiment.model(built)
        result = materialize_eval_set(
            name, spec.eval_sets[name], experiment.asset_dir(context.asset_key)
        )
        counts = result.result
        kept = {p.problem_id for p in read_records(result.folder / PROBLEMS_FILE, Problem)}
        listed = known_defects_of(spec.eval_sets[name], kept)
        defects = None if listed is None else listed.defects
        context.log.info(
            f"{name}: {counts.rows_in} rows, {counts.supported} supported, "
            f"{counts.unsupported} unsupported, {counts.written} written; "
            + (
                "no defect list for this copy"
                if defects is None
                else f"{len(defects)} known defective"
            )
        )
        return step_materialization(
            result,
            experiment.data_root(),
            {
                "problems": dg.MetadataValue.int(counts.written),
                "unsupported_reasons": histogram(counts.unsupported_reasons or {"(none)": 0}),
                "known_defects": defects_table(defects),
            },
        )

    return eval_problems


def _decontamination_asset(built: ExperimentSpec) -> dg.AssetsDefinition:
    @dg.asset(
        key=DECONTAMINATION_KEY,
        group_name=PROBLEMS_GROUP,
        deps=[eval_set_key(name) for name in built.eval_sets],
        kinds={"json"},
        description="Statement hashes, names and informal n-grams of the scored evaluation sets "
        "(and every MOBench informal text) that the training pool must not contain.",
    )
    def decontamination_sets(context: dg.AssetExecutionContext, experiment: ExperimentResource):
        spec = experiment.model(built)
        scored = {name: experiment.complete_folder(eval_set_key(name)) for name in spec.eval_sets}
        mobench = next(
            (scored[name] for name, s in spec.eval_sets.items() if s.format == "mobench"), None
        )
        result = materialize_decontamination_sets(
            scored, mobench, experiment.asset_dir(context.asset_key), spec.pool
        )
        return step_materialization(result, experiment.data_root())

    return decontamination_sets


def _pool_candidates_asset(built: ExperimentSpec) -> dg.AssetsDefinition:
    @dg.asset(
        key=POOL_CANDIDATES_KEY,
        group_name=PROBLEMS_GROUP,
        deps=[DECONTAMINATION_KEY],
        kinds={"parquet", "jsonl"},
        description="The pool's shards streamed, filtered, decontaminated (layers 1-4) and "
        "ranked by sha256(seed|problem_id); the K smallest, in rank order.",
    )
    def train_pool_candidates(context: dg.AssetExecutionContext, experiment: ExperimentResource):
        spec = experiment.model(built)
        started = time.monotonic()
        reporter = ProgressReporter(context, "pool rows screened")

        def progress(done: int, total: int) -> None:
            reporter(done, total, done / max(time.monotonic() - started, 1e-9), "rows")

        result = materialize_pool_candidates(
            spec.pool,
            experiment.complete_folder(DECONTAMINATION_KEY),
            experiment.asset_dir(context.asset_key),
            progress=progress,
        )
        counts = result.result
        drops = counts.drops()
        elapsed = time.monotonic() - started
        return step_materialization(
            result,
            experiment.data_root(),
            {
                "candidates": dg.MetadataValue.int(counts.written),
                "dropped_by_layer": histogram(drops, key="layer"),
                "where_rows_went": dg.MetadataValue.md(
                    png_image(
                        funnel_plot(
                            counts.funnel(),
                            title="the pool funnel: rows left after each filter layer",
                            unit="rows",
                        ),
                        "the pool funnel",
                    )
                ),
                "rows_per_s": dg.MetadataValue.float(
                    display_number(counts.rows_in / max(elapsed, 1e-9))
                ),
            },
        )

    return train_pool_candidates


def problem_assets(built: ExperimentSpec) -> list[dg.AssetsDefinition]:
    """The problem assets of `built`: each eval set, the decontamination sets, the pool's
    candidates."""
    return [
        *(_eval_set_asset(name, built) for name in built.eval_sets),
        _decontamination_asset(built),
        _pool_candidates_asset(built),
    ]
