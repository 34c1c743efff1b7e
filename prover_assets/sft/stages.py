"""The SFT steps as whole operations: shards (read back), the LoRA checkpoint, the export."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path

from prover_assets.children import forget_child, spawn_tied
from prover_assets.config import SftSpec, TrainingSpec
from prover_assets.cpu_threads import torch_threads
from prover_assets.generation.stages import GENERATIONS_FILE
from prover_assets.gpus import training_gpus
from prover_assets.problems.decontamination import DecontaminationSets
from prover_assets.records import (
    MANIFEST_NAME,
    Problem,
    publish_folder,
    read_manifest,
    read_records,
)
from prover_assets.records.outputs import (
    JOURNAL_EVERY_S,
    StageResult,
    Step,
    StepInputs,
    StepResult,
    distinct_names,
    require_rows,
    verified_outputs,
)
from prover_assets.records.progress import LineTail, TrainingProgress, TrainingProgressCallback
from prover_assets.sft.attention import attention_implementation
from prover_assets.sft.builder import SftCounts, build_sft, read_back
from prover_assets.sft.export import ExportResult
from prover_assets.sft.memory import ModelShape, TrainingMemory, training_memory
from prover_assets.sft.ranks import trainer_command
from prover_assets.sft.shards import ROWS_FILE, SftDataset, ShardWriter
from prover_assets.sft.trainer import (
    DATA_ORDER_FILE,
    FINAL_ADAPTER,
    METRICS_FILE,
    PROGRESS_FILE,
    STOPPED_EXIT_CODE,
    SUMMARY_FILE,
    TrainRun,
)

__all__ = [
    "ReadBackError",
    "SftShardsResult",
    "TrainingInterrupted",
    "TrainingResult",
    "TrainingWontFit",
    "eos_token_ids",
    "export_merge_device",
    "materialize_checkpoint",
    "materialize_export",
    "materialize_shards",
    "planned_memory",
    "recorded_generations",
]

log = logging.getLogger(__name__)
PROGRESS_POLL_S = 2.0  # how often the trainer's progress lines are read while it runs


class ReadBackError(RuntimeError):
    """A written shard does not read back as the rows it was written from."""

    pass


class TrainingInterrupted(RuntimeError):
    """Training saved and stopped (SIGTERM); running the step again resumes it."""


class SftShardsResult(StageResult):
    """The SFT data: where every candidate went, the read-back's verdict, the shard count."""

    counts: SftCounts
    read_back: str
    shards: int


class TrainingResult(StageResult):
    """The trainer's summary of a finished run, and this attempt's wall time."""

    status: str
    global_step: int
    max_steps: int
    resumed_from_step: int
    removed_partial_checkpoints: list[str]
    trained_micro_steps_this_run: int
    tokens_per_s_this_run: float | None
    peak_memory_gib: float | None = None  # measured by torch on the GPU (None on CPU)
    ranks: int = 1  # data-parallel processes
    attention: str | None = None  # the attention implementation it trained with
    cpu_threads: int | None = None  # torch's threads in rank 0 (None: recorded before they were)
    micro_steps: int
    packing_efficiency: float
    rows: int
    epochs: int
    bf16: bool
    wall_s_this_run: float

    def trained_micro_steps(self, gradient_accumulation: int) -> int:
        """The micro-steps the optimizer steps covered (the schedule's last one may be cut by
        `max_steps`)."""
        return min(self.micro_steps, self.global_step * gradient_accumulation)


def eos_token_ids(model_dir: Path) -> set[int]:
    """The ids that end a completion: generation_config's eos ids and the tokenizer's eos token
    (read from the folder's JSON, without loading a model or importing transformers)."""
    ids: set[int] = set()
    generation = model_dir / "generation_config.json"
    if generation.exists():
        eos = json.loads(generation.read_text()).get("eos_token_id")
        ids |= set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
    config = json.loads((model_dir / "tokenizer_config.json").read_text())
    token = config.get("eos_token")
    token = token.get("content") if isinstance(token, dict) else token
    if token is not None:
        added = json.loads((model_dir / "tokenizer.json").read_text()).get("added_tokens", [])
        ids |= {entry["id"] for entry in added if entry["content"] == token}
    if not ids:
        raise ValueError(f"{model_dir}: cannot tell which token ends a completion")
    return ids


def recorded_generations(made_from: Mapping[str, Path]) -> list[Path]:
    """The pool generations a shards step was made from, from its inputs by name
    (`records.outputs.verified_inputs`): what its rows are judged against, whatever the config
    says now."""
    return [path for name, path in made_from.items() if Path(name).name == GENERATIONS_FILE]


def materialize_shards(
    folder: Path,
    *,
    generation_files: Sequence[Path],
    verdict_files: Sequence[Path],
    pool_file: Path,
    sets_file: Path,
    base_model_dir: Path,
    spec: SftSpec,
    samples_per_problem: int,
) -> StepResult[SftShardsResult]:
    """Build and write the SFT shards (resumable, reused when current); every count in the
    manifest."""
    files = [*generation_files, *verdict_files, pool_file, sets_file]
    inputs = StepInputs.hash(distinct_names(files))
    eos = sorted(eos_token_ids(base_model_dir))
    config = {**spec.model_dump(mode="json"), "n_samples": samples_per_problem, "eos_ids": eos}
    step = Step(folder, str(folder), SftShardsResult, inputs, config)
    if (reused := step.reused()) is not None:
        return reused
    pool = read_records(pool_file, Problem)
    sets = DecontaminationSets.from_json(json.loads(sets_file.read_text(encoding="utf-8")))
    build = build_sft(
        generation_files,
        verdict_files,
        pool,
        sets,
        spec=spec,
        samples_per_problem=samples_per_problem,
        eos_ids=set(eos),
    )
    require_rows(len(build.rows), "the SFT data", allow_empty=spec.allow_empty)
    with publish_folder(folder) as staging:
        writer = ShardWriter(staging)
        for row in build.rows:
            row.write_to(writer)
        writer.close()
        outcome = read_back(staging, build.rows)
        if not outcome.passed:
            raise ReadBackError(f"SFT read-back failed: {outcome.description}")
        result = SftShardsResult(
            counts=build.counts, read_back=outcome.description, shards=len(writer.shard_paths())
        )
        return step.publish(staging, result, [*writer.shard_paths(), staging / ROWS_FILE])


def _run_trainer(
    run_file: Path,
    run: TrainRun,
    visible_devices: str,
    log_path: Path,
    progress_file: Path,
    on_progress: TrainingProgressCallback,
) -> int:
    """The trainer (one process, or torchrun and its ranks) in a child process with its own
    session, killed if this process dies, seeing exactly the GPUs `visible_devices` names
    (none: ""); a termination of this process (Dagster stopping the run) is passed on as
    SIGTERM, so the child saves before it exits. While it trains, each progress line it writes
    is passed to `on_progress`."""
    progress_file.unlink(missing_ok=True)  # the lines of this run only
    tail = LineTail(progress_file)
    with open(log_path, "ab") as log_file:
        child = spawn_tied(
            trainer_command(str(run_file), run.ranks),
            stdout=log_file,
            stderr=subprocess.STDOUT,
            env={**os.environ, "CUDA_VISIBLE_DEVICES": visible_devices},
        )
        try:
            while True:
                code = _wait(child, PROGRESS_POLL_S)
                for line in tail.new_lines():
                    on_progress(TrainingProgress(**json.loads(line)))
                if code is not None:
                    return code
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=600)
            raise
        finally:
            forget_child(child)


def _wait(child: subprocess.Popen, timeout_s: float) -> int | None:
    """The child's exit code, or None if it is still running after `timeout_s`."""
    try:
        return child.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return None


def _train(
    folder: Path, run: TrainRun, visible_devices: str, on_progress: TrainingProgressCallback
) -> TrainingResult:
    """Run the trainer child to the end; its summary's counts, with this run's wall time.
    A trainer that saved and stopped raises `TrainingInterrupted`; one that failed, its log.
    (torchrun reports a rank's stop as a failure: the summary rank 0 wrote says which.)"""
    run_file = folder / "run.json"
    run_file.write_text(json.dumps(asdict(run), indent=1))
    (folder / SUMMARY_FILE).unlink(missing_ok=True)  # this run's, or none
    wall = time.monotonic()
    code = _run_trainer(
        run_file, run, visible_devices, folder / "train.log", folder / PROGRESS_FILE, on_progress
    )
    summary = (
        json.loads((folder / SUMMARY_FILE).read_text()) if (folder / SUMMARY_FILE).exists() else {}
    )
    if code == STOPPED_EXIT_CODE or summary.get("status") == "stopped":
        raise TrainingInterrupted(
            f"training saved and stopped at step {summary.get('global_step')}; "
            "run the step again to resume it"
        )
    if code != 0:
        tail = (folder / "train.log").read_text(errors="replace")[-3000:]
        raise RuntimeError(f"training failed with exit code {code}:\n{tail}")
    summary.pop("run")
    return TrainingResult(**summary, wall_s_this_run=time.monotonic() - wall)


class TrainingWontFit(RuntimeError):
    """The memory model says one rank's peak does not fit its card: refused before training."""


def planned_memory(training: TrainingSpec, model_dir: Path, device: str) -> TrainingMemory:
    """The memory model of training `model_dir`'s model (its config.json) on `device`."""
    config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    return training_memory(
        training,
        config,
        attention=attention_implementation(device, training.attention),
        bf16=training.uses_bf16(device),
    )


def materialize_checkpoint(
    folder: Path,
    *,
    shards_dir: Path,
    base_model_dir: Path,
    base_revision: str,
    training: TrainingSpec,
    device: str,
    on_progress: TrainingProgressCallback = lambda progress: None,
    cpu_threads: int | None = None,
) -> StepResult[TrainingResult]:
    """Train (or resume) the LoRA adapter; the folder keeps checkpoints across runs. Every
    shard is re-hashed against the shards' manifest first: training never reads a changed file.
    `on_progress` is told each logged optimizer step as the trainer reports it; `cpu_threads`
    (None: the environment's) is shared by the trainer's ranks."""
    verified_outputs(shards_dir)
    gpus = training_gpus(training, device)
    identity = {
        "shards": read_manifest(shards_dir)["outputs"],
        "base_model_rev": base_revision,
        "training": training.model_dump(mode="json"),
        "device": device,
    }
    if training.gpus == "all":  # what `all` was on this box: a resume on another is refused
        identity["gpus"] = gpus
    inputs = StepInputs.hash({"shards_manifest": shards_dir / MANIFEST_NAME})
    step = Step(folder, str(folder), TrainingResult, inputs, identity)
    if (reused := step.reused()) is not None:
        return reused
    if device == "cuda" and (refusal := planned_memory(training, base_model_dir, device).refusal()):
        raise TrainingWontFit(f"{refusal} (the estimate of prover_assets/sft/memory.py)")
    step.begin_stream()
    run = TrainRun(
        shards_dir=str(shards_dir),
        base_model_dir=str(base_model_dir),
        output_dir=str(folder),
        training=training.model_dump(mode="json"),
        device=device,
        ranks=max(len(gpus), 1),
        cpu_threads=cpu_threads,
    )
    with step.journaled():
        result = _train(folder, run, ",".join(map(str, gpus)), on_progress)
    adapter = folder / FINAL_ADAPTER
    outputs = [
        *sorted(p for p in adapter.iterdir() if p.is_file()),
        folder / METRICS_FILE,
        folder / DATA_ORDER_FILE,
    ]
    return step.finish(result, outputs)


def parity_inputs(shards_dir: Path, count: int = 4, length: int = 96) -> list[list[int]]:
    """Fixed inputs for the export's parity check: the first rows of the SFT data, clipped."""
    dataset = SftDataset(shards_dir)
    return [
        dataset.tokens(i)[:length].astype(int).tolist() for i in range(min(count, len(dataset)))
    ]


def export_merge_device(training: TrainingSpec, device: str, base_model_dir: Path) -> str:
    """Where the export's fp32 merge runs for a base model in `base_model_dir`: the first GPU
    training used when the fp32 model fits it (`sft/export.py::merge_device`), else the host."""
    from prover_assets.sft.export import merge_device

    config = json.loads((base_model_dir / "config.json").read_text(encoding="utf-8"))
    parameters = ModelShape.of(config).parameters()
    return merge_device(training_gpus(training, device), training.gpu_memory_gib, parameters)


def materialize_export(
    folder: Path,
    *,
    checkpoint_dir: Path,
    base_model_dir: Path,
    shards_dir: Path,
    dtype: str,
    on_phase: Callable[[int, int, str], None] = lambda done, total, phase: None,
    cpu_threads: int | None = None,
    merge_on: str = "cpu",
) -> StepResult[ExportResult]:
    """Merge the adapter into the base in fp32 on `merge_on` (`export_merge_device`), cast to
    `dtype`, save it, and check the merge's log-probabilities against the adapter's and the
    cast's drift against the base's; `on_phase` is told as each phase of the export begins; on
    the host the merge runs on `cpu_threads` of torch's threads (None: as they are)."""
    from prover_assets.generation.revision import MODEL_DIR
    from prover_assets.sft.export import export_merged

    verified_outputs(checkpoint_dir)  # the adapter as trained, byte for byte
    adapter = checkpoint_dir / FINAL_ADAPTER
    inputs = StepInputs.hash({"checkpoint_manifest": checkpoint_dir / MANIFEST_NAME})
    identity = {"dtype": dtype, "merge": "float32", "merge_on": merge_on}
    step = Step(folder, str(folder), ExportResult, inputs, identity)
    if (reused := step.reused()) is not None:
        return reused
    with (
        publish_folder(folder) as staging,
        torch_threads(cpu_threads),
        step.gpu_memory.sampled(JOURNAL_EVERY_S),
    ):
        result = export_merged(
            base_model_dir,
            adapter,
            staging / MODEL_DIR,
            parity_inputs=parity_inputs(shards_dir),
            dtype=dtype,
            on_phase=on_phase,
            device=merge_on,
        )
        if failures := result.parity_failures():
            raise RuntimeError(
                f"the export does not reproduce the adapter model: {'; '.join(failures)} "
                f"({result.describe()})"
            )
        outputs = sorted(p for p in (staging / MODEL_DIR).iterdir() if p.is_file())
        return step.publish(staging, result, outputs, {"cpu_threads": {"count": cpu_threads}})
