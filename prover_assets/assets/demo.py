"""Assets of the CPU demo only: the tiny base model, fine-tuned to answer in the output format."""

import dagster as dg

from prover_assets.assets.keys import (
    DEMO_BASE_MODEL,
    DEMO_GROUP,
    TRAIN_POOL,
    Schedule,
    eval_set_key,
)
from prover_assets.assets.metadata import step_materialization
from prover_assets.assets.progress import ProgressReporter
from prover_assets.config import ExperimentSpec, resolve_path
from prover_assets.generation.revision import MODEL_DIR, model_revision
from prover_assets.generation.stages import materialize_demo_model
from prover_assets.problems.stages import PROBLEMS_FILE
from prover_assets.resources import ExperimentResource, GpuResource, LeanResource
from prover_assets.verify.stages import TRAIN_POOL_FILE

__all__ = ["demo_assets"]


def demo_assets(built: ExperimentSpec, schedule: Schedule) -> list[dg.AssetsDefinition]:
    """The demo's base model asset (the tiny model taught the output format); none for a registered
    experiment."""
    if built.demo is None:
        return []

    @dg.asset(
        key=DEMO_BASE_MODEL,
        group_name=DEMO_GROUP,
        pool=schedule.gpu_pool,
        kinds={"pytorch"},
        deps=[TRAIN_POOL, *(eval_set_key(name) for name in built.eval_sets)],
        description="DEMO ONLY: a tiny Qwen3-architecture model with random weights, fine-tuned for "
        "a few CPU seconds on the demo's own statements (evaluation ones included) to answer in the "
        "prover's output format. It measures nothing; it makes every step of the loop run.",
    )
    def demo_base_model(
        context: dg.AssetExecutionContext,
        experiment: ExperimentResource,
        gpu: GpuResource,
        lean: LeanResource,
    ):
        spec = experiment.model(built)
        demo = spec.demo
        assert demo is not None
        files = [
            experiment.complete_file(eval_set_key(name), PROBLEMS_FILE) for name in spec.eval_sets
        ]
        files.append(experiment.complete_file(TRAIN_POOL, TRAIN_POOL_FILE))
        reporter = ProgressReporter(context, "format tuning steps")
        threads = gpu.cpu_threads(lean)
        result = materialize_demo_model(
            experiment.asset_dir(DEMO_BASE_MODEL),
            files,
            hidden_size=demo.tiny_hidden_size,
            layers=demo.tiny_layers,
            vocab_size=demo.tiny_vocab_size,
            steps=demo.finetune_steps,
            seed=spec.generation.seed,
            shared=(
                None
                if demo.shared_tunings is None
                else resolve_path(demo.shared_tunings, "spec.demo.shared_tunings").resolve()
            ),
            progress=lambda at: reporter(at.step, at.steps, at.steps_per_s(), "steps", at.extra()),
            cpu_threads=threads.count,
        )
        counts = result.result
        shared = result.manifest.get("shared_tuning")
        if shared is not None and shared["copied"]:
            context.log.info(
                f"format tuning: copied from {shared['entry']} (same statements, settings, recipe)"
            )
        elif not result.reused:
            context.log.info(f"format tuning on {threads.describe()}")
        context.log.info(
            f"format tuning: loss {counts.first_loss:.3f} -> {counts.final_loss:.3f} "
            f"in {counts.seconds:.0f} s"
        )
        return step_materialization(
            result,
            experiment.data_root(),
            {
                "model_rev": model_revision(result.folder / MODEL_DIR),
            },
        )

    return [demo_base_model]
