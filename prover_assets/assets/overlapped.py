"""The overlapped schedule's generation and verdicts: one graph-backed asset per pair, each
folder with one writer, the GPU and the Lean workers at work at once.

Two ops and no edge between them. `generate`, in the GPU's pool, writes the generations folder;
`verify`, in the Lean workers' pool, writes the verdicts folder, judging each sample as it is
committed (`SiblingGeneration`), and the multiprocess executor runs them side by side. `verify`
waits for the same upstream steps as `generate`, so it never waits for a generation that
cannot start; an executor without processes runs it second (its priority), once the
generation has ended. It follows `generate` through the run's event log: once that step
succeeded, the rest is verified and the manifest written; once it failed for good, the
verdicts made are kept for the resume and `verify` fails too. Materialized without its
generation (a subset), `verify` reads the complete generation through its gates, as the
exclusive schedule's verdict asset does. Each folder keeps its own lease: the Lean workers are
the `lean` pool's and the lease's (`verify.stages.lean_workers_lease`).

Run config goes to the op: `ops: {<pair>: {ops: {generate: {config: {recompute: true}}}}}`,
`<pair>` being the generation key's Python name with `_with_verdicts`.
"""

from collections.abc import Callable

import dagster as dg

from prover_assets.assets.generation import (
    RETRY,
    GenerationConfig,
    GenerationNode,
    generate,
)
from prover_assets.assets.keys import Schedule, iteration_partitions, node_kinds
from prover_assets.assets.retries import fail_fast
from prover_assets.assets.verification import VerdictNode, VerifyConfig, verify
from prover_assets.config import ExperimentSpec
from prover_assets.resources import ExperimentResource, GpuResource, LeanResource
from prover_assets.verify.stages import GenerationOutcome, SiblingGeneration

__all__ = ["GENERATE", "VERIFY", "generation_outcome", "overlapped_pair", "pair_name"]

GENERATE = "generate"
VERIFY = "verify"
# Under an executor without processes the two ops run one after the other: the generation first.
_AFTER_ITS_GENERATION = {"dagster/priority": "-1"}
_ENDED = {dg.DagsterEventType.STEP_SUCCESS, dg.DagsterEventType.STEP_FAILURE}


def pair_name(generation: dg.AssetKey) -> str:
    """The graph of a generation and its verdicts, named for the generation's key."""
    return f"{generation.to_python_identifier()}_with_verdicts"


def generation_outcome(
    instance: dg.DagsterInstance, run_id: str, step_key: str
) -> GenerationOutcome:
    """How the generation step `step_key` of run `run_id` stands, from the run's event log: a
    retry is still running (its failure is final only once no retry is left)."""
    records = instance.get_records_for_run(run_id, of_type=_ENDED).records
    for record in records:
        if record.event_log_entry.step_key == step_key:
            event = record.event_log_entry.dagster_event
            succeeded = event is not None and event.event_type is dg.DagsterEventType.STEP_SUCCESS
            return GenerationOutcome.COMPLETE if succeeded else GenerationOutcome.FAILED
    return GenerationOutcome.RUNNING


def _op_name(generation: dg.AssetKey, step: str) -> str:
    """The name of a pair's op: `step` (GENERATE or VERIFY) of the pair of `generation`."""
    return f"{pair_name(generation)}__{step}"


def _as_output(done: dg.MaterializeResult) -> dg.Output:
    """What an op of a graph-backed asset returns for what an asset's body made."""
    return dg.Output(None, metadata=dict(done.metadata or {}), data_version=done.data_version)


def _step_op(
    name: str, upstream: list[str], pool: str, description: str, tags: dict[str, str] | None = None
) -> Callable[[Callable[..., dg.Output]], dg.OpDefinition]:
    """The op decorator of one of a pair's steps: ordered after `upstream` (no value passed),
    one output of nothing but its materialization's metadata."""
    return lambda compute: dg.op(
        name=name,
        ins={input_name: dg.In(dg.Nothing) for input_name in upstream},
        out=dg.Out(dg.Nothing),
        pool=pool,
        retry_policy=RETRY,
        tags=tags,
        description=description,
    )(fail_fast(compute))


def _generate_op(
    node: GenerationNode, built: ExperimentSpec, schedule: Schedule, upstream: list[str]
) -> dg.OpDefinition:
    @_step_op(_op_name(node.key, GENERATE), upstream, schedule.gpu_pool, node.description)
    def generate_op(
        context: dg.OpExecutionContext,
        config: GenerationConfig,
        experiment: ExperimentResource,
        gpu: GpuResource,
        lean: LeanResource,
    ) -> dg.Output:
        return _as_output(generate(context, config, node, built, schedule, experiment, gpu, lean))

    return generate_op


def _verify_op(
    node: VerdictNode, built: ExperimentSpec, schedule: Schedule, upstream: list[str]
) -> dg.OpDefinition:
    @_step_op(
        _op_name(node.generation, VERIFY),
        upstream,
        schedule.lean_pool,
        node.description,
        tags=_AFTER_ITS_GENERATION,
    )
    def verify_op(
        context: dg.OpExecutionContext,
        config: VerifyConfig,
        experiment: ExperimentResource,
        lean: LeanResource,
    ) -> dg.Output:
        sibling = None
        if node.generation in context.selected_asset_keys:
            # Both ops are nodes of the pair's graph: the generation's step key is its handle.
            generation_step = f"{context.op_handle.parent}.{_op_name(node.generation, GENERATE)}"
            sibling = SiblingGeneration(
                lambda: generation_outcome(context.instance, context.run_id, generation_step)
            )
        return _as_output(verify(context, config, node, built, experiment, lean, sibling))

    return verify_op


def overlapped_pair(
    generation: GenerationNode, verdicts: VerdictNode, built: ExperimentSpec, schedule: Schedule
) -> dg.AssetsDefinition:
    """`generation` and its `verdicts` as one asset of two ops, each writing its own folder."""
    upstream = list(dict.fromkeys([*generation.deps, verdicts.problems[0]]))
    names = {key: key.to_python_identifier() for key in upstream}
    generate_op = _generate_op(generation, built, schedule, [names[k] for k in generation.deps])
    verify_op = _verify_op(verdicts, built, schedule, list(names.values()))
    graph = dg.GraphDefinition(
        name=pair_name(generation.key),
        node_defs=[generate_op, verify_op],
        input_mappings=[
            *(
                dg.InputMapping(
                    graph_input_name=names[k],
                    mapped_node_name=generate_op.name,
                    mapped_node_input_name=names[k],
                )
                for k in generation.deps
            ),
            *(
                dg.InputMapping(
                    graph_input_name=name,
                    mapped_node_name=verify_op.name,
                    mapped_node_input_name=name,
                )
                for name in names.values()
            ),
        ],
        output_mappings=[
            dg.OutputMapping("generations", generate_op.name, "result"),
            dg.OutputMapping("verdicts", verify_op.name, "result"),
        ],
    )
    return dg.AssetsDefinition.from_graph(
        graph,
        keys_by_input_name={name: key for key, name in names.items()},
        keys_by_output_name={"generations": generation.key, "verdicts": verdicts.key},
        internal_asset_deps={
            "generations": set(generation.deps),
            "verdicts": {generation.key, verdicts.problems[0]},
        },
        partitions_def=iteration_partitions(built.iterations) if generation.per_iteration else None,
        group_names_by_output_name={"generations": generation.group, "verdicts": verdicts.group},
        descriptions_by_output_name={
            "generations": generation.description,
            "verdicts": verdicts.description,
        },
        tags_by_output_name={
            "generations": _kinds(generation.key, "jsonl"),
            "verdicts": _kinds(verdicts.key, "lean", "jsonl"),
        },
        can_subset=True,
    )


def _kinds(key: dg.AssetKey, *formats: str) -> dict[str, str]:
    """`node_kinds` as the tags a graph-backed asset's outputs carry them in."""
    return {f"dagster/kind/{kind}": "" for kind in node_kinds(key, *formats)}
