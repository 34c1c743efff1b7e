"""What each evaluated run cost: from its two steps' manifests, the generation step's and the
verdict step's wall and CPU seconds as the kernel counted them (`usage`; a verdict step's
children are its REPLs: Lean's own CPU time); from its two streams, the work: the samples and
tokens generated, the samples cut at the cap, the verdicts copied from the cache and the
timeouts run again; per solved problem.

Secondary: the report prints it beside the registered result, never instead of it. A step
resumed after a kill: its work is every attempt's, each committed sample once (read from the
stream, not from the completing attempt's counts, which hold only what it added); its machine
usage is the completing attempt's, and apart, every earlier attempt's as the step's usage
journal last recorded it (`earlier`: a killed attempt's up to its last record, a failed one's
whole): the waste of the resumes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple

from prover_assets.generation.runner import GenerationBatchResult
from prover_assets.operations.eta import (
    TRAINING_STEP,
    EtaEstimate,
    pool_round_label,
    run_label,
    step_names,
)
from prover_assets.records import MANIFEST_NAME, Generation, Verification, iter_records
from prover_assets.records.manifest import read_manifest
from prover_assets.records.usage import StepUsage, recorded_earlier_attempts, recorded_usage
from prover_assets.report.runs import RunFiles
from prover_assets.report.summary import (
    CostRow,
    EtaBesideMeasured,
    EtaRow,
    RunCost,
    StepCost,
)
from prover_assets.report.validity import TrainingFiles
from prover_assets.sft.stages import SftShardsResult, TrainingResult
from prover_assets.verify.runner import VerificationResult

__all__ = [
    "GenerationWork",
    "VerdictWork",
    "cost_rows",
    "eta_beside_measured",
    "generation_work",
    "gpus_held",
    "peak_gpu_gib",
    "round_costs",
    "run_cost",
    "tokens_trained",
    "verdict_work",
]


def run_cost(files: RunFiles) -> RunCost:
    """The cost of the run whose files are `files`, from its steps' manifests (raises naming
    the manifest when either is not its step's)."""
    generation_folder, verdict_folder = files.generations.parent, files.verdicts.parent
    generation_manifest = read_manifest(generation_folder)
    verdict_manifest = read_manifest(verdict_folder)
    # refuses, naming it, a manifest that is not a generation step's
    GenerationBatchResult.of(generation_manifest, generation_folder / MANIFEST_NAME)
    verified = VerificationResult.of(verdict_manifest, verdict_folder / MANIFEST_NAME)
    generated = generation_work(files.generations)
    judged = verdict_work(files.verdicts)
    return RunCost(
        system=files.system,
        eval_set=files.eval_set,
        cap=files.cap,
        generation=recorded_usage(generation_manifest),
        verification=recorded_usage(verdict_manifest),
        generation_earlier=recorded_earlier_attempts(generation_manifest),
        generation_gpus=gpus_held(generation_manifest),
        verification_earlier=recorded_earlier_attempts(verdict_manifest),
        generated=generated.samples,
        tokens_prompted=generated.prompt_tokens,
        tokens_generated=generated.completion_tokens,
        hit_cap=generated.hit_cap,
        verified=judged.verdicts,
        accepted=judged.accepted,
        cached=judged.cached,
        timeouts_rechecked=judged.rechecked,
        infrastructure_reverified=verified.infrastructure_reverified,
    )


class GenerationWork(NamedTuple):
    """What a generation stream holds, every attempt's samples each once."""

    samples: int
    prompt_tokens: int
    completion_tokens: int
    hit_cap: int  # samples cut at the cap


def generation_work(path: Path) -> GenerationWork:
    """The samples of a generation stream, their prompt and completion tokens, and those cut at
    the cap."""
    samples = prompt = tokens = hit_cap = 0
    for generation in iter_records(path, Generation):
        samples += 1
        prompt += len(generation.prompt_ids)
        tokens += len(generation.completion_ids)
        hit_cap += generation.hit_cap
    return GenerationWork(samples, prompt, tokens, hit_cap)


class VerdictWork(NamedTuple):
    """What a verdict stream holds."""

    verdicts: int
    accepted: int
    cached: int  # copied from the cache
    rechecked: int  # timeouts Lean ran again


def verdict_work(path: Path) -> VerdictWork:
    """The verdicts of a verdict stream, those accepted, those copied, and the timeouts Lean
    ran again."""
    verdicts = accepted = cached = rechecked = 0
    for verdict in iter_records(path, Verification):
        verdicts += 1
        accepted += verdict.accepted
        cached += verdict.copied
        rechecked += verdict.timeout_rechecked
    return VerdictWork(verdicts, accepted, cached, rechecked)


def cost_rows(
    costs: Sequence[RunCost], solved: Mapping[tuple[str, str, int], int]
) -> list[CostRow]:
    """Each run's cost with its problems solved (by any of its samples), from which the cost
    of each solved problem and accepted proof follows (`CostRow`)."""
    return [
        CostRow(**dict(cost), solved=solved[(cost.system, cost.eval_set, cost.cap)])
        for cost in costs
    ]


def gpus_held(manifest: Mapping[str, Any]) -> int | None:
    """The GPUs a step held, as its manifest records them: a generation step's engine (vLLM's
    GPU slices; the transformers engine's device), training's device and GPUs, the export's
    merge device; 0 on the host; None where it does not say (a remote server's engine)."""
    engine, config, counts = (manifest.get(k) or {} for k in ("engine", "config", "counts"))
    if "gpu_slices" in engine:
        return len({gpu for gpus in engine["gpu_slices"] for gpu in gpus})
    device = engine.get("device") or config.get("device") or counts.get("merged_on")
    if device is None:
        return None
    if device == "cpu":
        return 0
    if "engine" in engine or "merged_on" in counts:
        return 1  # one engine, or the merge, on one device
    gpus = config.get("gpus", (config.get("training") or {}).get("gpus"))
    return len(gpus) if isinstance(gpus, list) else None


def peak_gpu_gib(usage: StepUsage | None, counts: Mapping[str, Any]) -> float | None:
    """A step's peak GPU memory in GiB: the device memory in use on its fullest GPU as its
    usage read it (every process of the step, vLLM's engines too); else, for a step recorded
    before that was read, what torch allocated as training counts it; None where neither."""
    if usage is not None and usage.peak_gpu_mib is not None:
        return usage.peak_gpu_mib / 1024
    return counts.get("peak_memory_gib")


def _step(step: str, side: Literal["GPU", "Lean", "host"], folder: Path) -> StepCost:
    manifest = read_manifest(folder)
    usage = recorded_usage(manifest)
    return StepCost(
        step=step,
        side=side,
        usage=usage,
        earlier=recorded_earlier_attempts(manifest),
        gpus=gpus_held(manifest) if side == "GPU" else 0,
        peak_gpu_gib=peak_gpu_gib(usage, manifest.get("counts") or {}),
    )


def _sample_steps(label: str, generations: Path, verdicts: Path) -> list[StepCost]:
    generate, verify = step_names(label)
    return [_step(generate, "GPU", generations.parent), _step(verify, "Lean", verdicts.parent)]


def _run_steps(run: RunFiles) -> list[StepCost]:
    return _sample_steps(
        run_label(run.system, run.eval_set, run.cap), run.generations, run.verdicts
    )


def round_costs(
    pairs: Sequence[tuple[RunFiles, RunFiles]],
    pool_rounds: Sequence[tuple[Path, Path]],
    training: TrainingFiles | None,
) -> list[StepCost]:
    """Every step of the round whose output the report reads, in the order a round runs them:
    the baselines, the pool rounds, the SFT data, training and export, the candidates."""
    steps = [step for baseline, _ in pairs for step in _run_steps(baseline)]
    for index, (generations, verdicts) in enumerate(pool_rounds):
        steps += _sample_steps(pool_round_label(index), generations, verdicts)
    if training is not None:
        trained = _step(TRAINING_STEP, "GPU", training.checkpoint)
        steps += [
            _step("SFT shards", "host", training.shards),
            trained.model_copy(
                update={
                    "tokens_trained": tokens_trained(
                        training.shards, TrainingResult.read(training.checkpoint).epochs
                    )
                }
            ),
            _step("export", "GPU", training.export),
        ]
    return steps + [step for _, candidate in pairs for step in _run_steps(candidate)]


def tokens_trained(shards: Path, epochs: int) -> int:
    """The tokens training went through: the SFT rows' (prompt and completion), as the manifest
    of the shards in `shards` records them, times the `epochs` it ran."""
    return SftShardsResult.read(shards).counts.tokens * epochs


def eta_beside_measured(estimate: EtaEstimate, steps: Sequence[StepCost]) -> EtaBesideMeasured:
    """The `eta` asset's hours for each step the report measured (the ETA names steps as
    `round_costs` does), beside the wall the step took: its completing attempt's and its
    earlier attempts', and their ratio; and the totals over those steps."""
    rows = []
    for step in steps:
        hours = estimate.steps.get(step.step)
        if hours is None or step.usage is None:
            continue
        measured = step.usage.wall_s + sum(a.usage.wall_s for a in step.earlier)
        central_s = hours[1] * 3600
        rows.append(
            EtaRow(
                step=step.step,
                eta_s=(hours[0] * 3600, central_s, hours[2] * 3600),
                measured_s=measured,
                ratio=measured / central_s if central_s else None,
            )
        )
    eta_s = sum(r.eta_s[1] for r in rows)
    measured_s = sum(r.measured_s for r in rows)
    low, central, high = estimate.total
    return EtaBesideMeasured(
        materialized_at=estimate.materialized_at,
        sources=dict(estimate.sources),
        round_total_s=(low * 3600, central * 3600, high * 3600),
        rows=rows,
        eta_s=eta_s,
        measured_s=measured_s,
        ratio=measured_s / eta_s if eta_s else None,
    )
