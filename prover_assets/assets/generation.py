"""Generation assets: one per (eval set, system, cap) and one per pool round, in the GPU's pool
(in the overlapped schedule each with its verdicts, `assets/overlapped.py`)."""

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from prover_assets.assets.keys import (
    BASELINE,
    CANDIDATE,
    DEMO_BASE_MODEL,
    POOL_ROUND_GROUP,
    TRAIN_POOL,
    Schedule,
    eval_set_key,
    evaluated_systems,
    generations_key,
    iteration_partitions,
    node_kinds,
    pool_generations_key,
    pool_verdicts_key,
    reference_elaboration_key,
    verdicts_key,
)
from prover_assets.assets.metadata import (
    StepContext,
    generation_work_metadata,
    partition_of,
    step_materialization,
)
from prover_assets.assets.progress import ProgressReporter
from prover_assets.assets.retries import fail_fast, start_attempt
from prover_assets.config import ConfigError, ExperimentSpec
from prover_assets.generation.engines import EngineOpening
from prover_assets.generation.revision import MODEL_DIR, model_revision
from prover_assets.generation.runner import GenerationStats
from prover_assets.generation.stages import (
    GENERATIONS_FILE,
    Samples,
    correction_samples,
    hub_model,
    materialize_generations,
    round0_samples,
)
from prover_assets.iteration import (
    OutputRef,
    pool_model,
    pool_round_refs,
    solved_before_refs,
)
from prover_assets.problems.stages import PROBLEMS_FILE
from prover_assets.resources import ExperimentResource, GpuResource, LeanResource
from prover_assets.verify.stages import REFERENCE_FILE, TRAIN_POOL_FILE, VERDICTS_FILE

__all__ = [
    "GenerationNode",
    "generate",
    "generation_asset",
    "generation_nodes",
    "model_deps",
    "model_for",
    "pool_rounds",
    "resolved",
]

RETRY = dg.RetryPolicy(max_retries=2, delay=30)


class GenerationConfig(dg.Config):
    """Run config of a generation asset: `recompute` moves the old output aside and starts again."""

    recompute: bool = False  # move the existing output aside and generate again


# An SFT export and its iteration partition: the model a candidate (or a later iteration) uses.


def model_deps(spec: ExperimentSpec, export: dg.AssetKey | None = None) -> list[dg.AssetKey]:
    """The assets a model comes from: the export `export`, else the base model (the demo's
    tiny model, or nothing: the hub snapshot is outside the graph)."""
    if export is not None:
        return [export]
    return [DEMO_BASE_MODEL] if spec.model.source == "demo_tiny" else []


def model_for(
    spec: ExperimentSpec, experiment: ExperimentResource, trained: OutputRef | None
) -> tuple[Path, str]:
    """The model folder and its revision: an SFT export (`trained`), else the base model: the
    hub snapshot, or the demo's tiny model."""
    if trained is not None:
        folder = experiment.resolve(trained) / MODEL_DIR
        return folder, model_revision(folder)
    if spec.model.source == "demo_tiny":
        folder = experiment.complete_folder(DEMO_BASE_MODEL) / MODEL_DIR
        return folder, model_revision(folder)
    return hub_model(spec)


def _load_tokenizer(path: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


def _require_schedule(gpu: GpuResource, schedule: Schedule, source: str) -> None:
    """The pools and the executor were fixed when the graph was built: a run config naming
    another schedule would run vLLM beside the Lean workers on a machine sized for neither."""
    if gpu.model().schedule != schedule.name:
        raise ConfigError(
            f"resources.gpu.config.settings.schedule is {gpu.model().schedule!r} in this run's "
            f"config but the graph was built with {schedule.name!r} from {source}: change it "
            "in that file and reload the code location"
        )


# The samples of a generation asset, from the spec, the upstream files and its partition.
SampleChoice = Callable[[ExperimentSpec, ExperimentResource, str | None], Samples]


@dataclass(frozen=True)
class GenerationNode:
    """One generation asset of the graph: its key, the model it samples (by partition), its
    group, the assets it waits for, its samples, and whether it is made per iteration."""

    key: dg.AssetKey
    model: Callable[[str | None], OutputRef | None]
    group: str
    deps: tuple[dg.AssetKey, ...]
    description: str
    samples: SampleChoice
    per_iteration: bool


def generate(
    context: StepContext,
    config: GenerationConfig,
    node: GenerationNode,
    built: ExperimentSpec,
    schedule: Schedule,
    experiment: ExperimentResource,
    gpu: GpuResource,
    lean: LeanResource | None,
) -> dg.MaterializeResult:
    """The samples of `node` (resumable, reused when current), as a step of either schedule;
    `lean` sizes torch's threads beside the Lean workers (the overlapped pair's only)."""
    spec = experiment.model(built)
    _require_schedule(gpu, schedule, experiment.source)
    partition = partition_of(context)
    folder = experiment.asset_dir(node.key, partition)
    start_attempt(context, folder, GENERATIONS_FILE, recompute=config.recompute)
    chosen = node.samples(spec, experiment, partition)
    model_path, model_rev = model_for(spec, experiment, node.model(partition))
    result = materialize_generations(
        folder,
        chosen,
        opening=EngineOpening(
            model_path=model_path,
            model_rev=model_rev,
            sampling=spec.generation.sampling,
            max_model_len=spec.model.max_model_len,
            seed=spec.generation.seed,
            workdir=folder,
            commit_every=spec.generation.commit_every,
            cpu_threads=gpu.cpu_threads(lean).count,
        ),
        open_engine=gpu.open_engine,
        load_tokenizer=_load_tokenizer,
        progress=_progress(ProgressReporter(context, "samples")),
        run_id=context.run.run_id,
    )
    return step_materialization(
        result,
        experiment.data_root(),
        {
            "samples": dg.MetadataValue.int(result.result.rows),
            **generation_work_metadata(result.folder / GENERATIONS_FILE),
            "model_rev": model_rev,
        },
    )


def generation_asset(
    node: GenerationNode, built: ExperimentSpec, schedule: Schedule
) -> dg.AssetsDefinition:
    """`node` as an asset of its own (the exclusive schedule: its verdicts come after it)."""

    @dg.asset(
        key=node.key,
        group_name=node.group,
        deps=list(node.deps),
        partitions_def=iteration_partitions(built.iterations) if node.per_iteration else None,
        pool=schedule.gpu_pool,
        retry_policy=RETRY,
        kinds=node_kinds(node.key, "jsonl"),
        description=node.description,
    )
    @fail_fast
    def generations(
        context: dg.AssetExecutionContext,
        config: GenerationConfig,
        experiment: ExperimentResource,
        gpu: GpuResource,
    ) -> dg.MaterializeResult:
        return generate(context, config, node, built, schedule, experiment, gpu, None)

    return generations


def _progress(reporter: ProgressReporter) -> Callable[[GenerationStats], None]:
    def progress(stats: GenerationStats) -> None:
        # The ETA divides remaining samples by samples/s: the unit of the work left.
        reporter(
            stats.done,
            stats.total,
            stats.samples_per_s(),
            "samples",
            {
                "tokens_per_s": round(stats.tokens_per_s(), 1),
                "hit_cap": stats.hit_cap,
                "no_code": stats.no_code,
            },
        )

    return progress


def generation_nodes(built: ExperimentSpec, schedule: Schedule) -> list[GenerationNode]:
    """Every generation asset of `built`: baseline and candidate per eval set and cap, and each
    pool round."""
    return [*_evaluation_generations(built, schedule), *_pool_generations(built)]


def _evaluation_generations(built: ExperimentSpec, schedule: Schedule) -> list[GenerationNode]:
    """Per system, eval set and cap. Caps run in order, the primary first: a cap's generation
    waits for the previous cap's verdicts (exclusive), or only for its generation (overlapped:
    the GPU goes on while the Lean workers verify). The candidates are per iteration."""
    assets = []
    n = built.generation.n_samples
    for system, export in evaluated_systems(built):
        for eval_set in built.eval_sets:
            previous: dg.AssetKey | None = None
            for cap in built.caps_of(eval_set):
                deps = [
                    eval_set_key(eval_set),
                    reference_elaboration_key(eval_set),
                    *model_deps(built, export),
                ]
                if previous is not None:
                    deps.append(previous)  # caps in order: the primary cap first

                def samples(
                    spec: ExperimentSpec,
                    experiment: ExperimentResource,
                    partition: str | None,
                    *,
                    s=eval_set,
                    c=cap,
                ) -> Samples:
                    return round0_samples(
                        experiment.complete_file(eval_set_key(s), PROBLEMS_FILE),
                        spec.generation.n_samples,
                        c,
                        allow_empty=spec.eval_sets[s].allow_empty,
                        references=experiment.complete_file(
                            reference_elaboration_key(s), REFERENCE_FILE
                        ),
                    )

                assets.append(
                    GenerationNode(
                        generations_key(eval_set, system, cap),
                        model=lambda partition, e=export: (
                            None if e is None else OutputRef(tuple(e.path), partition)
                        ),
                        group=BASELINE if export is None else CANDIDATE,
                        deps=tuple(deps),
                        samples=samples,
                        description=f"{system} samples on {eval_set}: {n} per problem at a completion cap of {cap} tokens.",
                        per_iteration=export is not None,
                    )
                )
                previous = (generations_key if schedule.overlapped else verdicts_key)(
                    eval_set, system, cap
                )
    return assets


def _pool_generations(built: ExperimentSpec) -> list[GenerationNode]:
    """Round 0 on the train pool, then each correction round."""
    assets = []
    n = built.generation.n_samples

    def pool_round0(
        spec: ExperimentSpec, experiment: ExperimentResource, partition: str | None
    ) -> Samples:
        return round0_samples(
            experiment.complete_file(TRAIN_POOL, TRAIN_POOL_FILE),
            spec.generation.n_samples,
            spec.sft.cap,
            allow_empty=spec.pool.allow_empty,
            solved_before=resolved(experiment, solved_before_refs(spec, partition)),
        )

    iterations = (
        f" (per iteration: {built.iteration.problems} problems, sampled with the model of the iteration before)"
        if built.iterations > 1
        else ""
    )
    assets.append(
        GenerationNode(
            pool_generations_key(0),
            model=pool_model,
            group=POOL_ROUND_GROUP,
            deps=(TRAIN_POOL, *model_deps(built)),
            samples=pool_round0,
            description=f"Round 0 on the train pool: {n} samples per problem at cap {built.sft.cap}{iterations}.",
            per_iteration=True,
        )
    )
    for round in range(1, built.corrections.rounds + 1):

        def corrections(
            spec: ExperimentSpec, experiment: ExperimentResource, partition: str | None, *, r=round
        ) -> Samples:
            return correction_samples(
                experiment.complete_file(TRAIN_POOL, TRAIN_POOL_FILE),
                experiment.complete_file(pool_generations_key(r - 1), GENERATIONS_FILE, partition),
                experiment.complete_file(pool_verdicts_key(r - 1), VERDICTS_FILE, partition),
                round=r,
                samples_per_problem=spec.generation.n_samples,
                samples_per_parent=spec.corrections.samples_per_parent,
                allow_empty=spec.corrections.allow_empty,
            )

        assets.append(
            GenerationNode(
                pool_generations_key(round),
                model=pool_model,
                group=POOL_ROUND_GROUP,
                deps=(
                    TRAIN_POOL,
                    pool_generations_key(round - 1),
                    pool_verdicts_key(round - 1),
                    *model_deps(built),
                ),
                samples=corrections,
                description=f"Correction round {round}: failed samples with Lean errors of problems "
                f"unsolved in round {round - 1}, shown their errors.",
                per_iteration=True,
            )
        )
    return assets


def pool_rounds(
    spec: ExperimentSpec, experiment: ExperimentResource, partition: str | None
) -> list[tuple[Path, Path]]:
    """The (generations, verdicts) files of every pool round of iteration `partition`, each
    re-hashed against its manifest."""
    return resolved(experiment, pool_round_refs(spec, partition))


def resolved(
    experiment: ExperimentResource, pairs: list[tuple[OutputRef, OutputRef]]
) -> list[tuple[Path, Path]]:
    """The files of each (generations, verdicts) pair a rule of `prover_assets.iteration`
    names, re-hashed against their manifests."""
    return [(experiment.resolve(g), experiment.resolve(v)) for g, v in pairs]
