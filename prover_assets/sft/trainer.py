"""LoRA training on transformers' Trainer and peft, resumable to the micro-step.

`python -m prover_assets.sft.trainer RUN.json` trains; it exits 0 when training finished and
143 when a SIGTERM made it save and stop (rerunning resumes). Design:
- the schedule (packed micro-batches of every epoch) is fixed up front and read in order, so
  the Trainer's own resume (model, optimizer, scheduler, RNG, data position) is exact;
- checkpoints every `save_every` micro-steps (whole optimizer steps), the last `keep` kept;
  each is marked complete once saved, and an unmarked (partial) one is deleted at start;
- a SIGTERM lets the current optimizer step finish, saves, and stops;
- one trainer per output folder: it holds the folder's lock for its lifetime;
- every micro-step's rows go to `data_order.jsonl` (micro-steps after the resumed checkpoint
  are dropped from it first, since they were lost), so order can be audited;
- on several GPUs, one rank per GPU under torchrun (DDP), each training the micro-steps
  `sft/ranks.py` assigns it; rank 0 alone holds the lock, prepares the folder, and writes the
  order log (every rank's micro-steps), the metrics, progress, markers and summary.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import signal
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from prover_assets.children import FolderBusyError, die_with_parent, hold_folder
from prover_assets.config import TrainingSpec
from prover_assets.model_loading import load_causal_lm
from prover_assets.records.progress import TrainingProgress
from prover_assets.sft.attention import attention_implementation
from prover_assets.sft.loss import HiddenStatesTap
from prover_assets.sft.micro_batches import PackedDataset, RankDataset, collate
from prover_assets.sft.packing import Schedule, training_schedule
from prover_assets.sft.ranks import PADDING, Ranks, rank_micro_steps
from prover_assets.sft.shards import SftDataset

__all__ = [
    "CHECKPOINTS",
    "COMPLETE_MARKER",
    "DATA_ORDER_FILE",
    "FINAL_ADAPTER",
    "METRICS_FILE",
    "PROGRESS_FILE",
    "STOPPED_EXIT_CODE",
    "TrainRun",
    "complete_checkpoints",
    "main",
    "run_mean_loss",
    "train",
]

STOPPED_EXIT_CODE = 143
BUSY_EXIT_CODE = 75  # another trainer holds the output folder (EX_TEMPFAIL)
CHECKPOINTS = "checkpoints"
COMPLETE_MARKER = ".complete"
DATA_ORDER_FILE = "data_order.jsonl"
METRICS_FILE = "metrics.jsonl"
FINAL_ADAPTER = "adapter"
SUMMARY_FILE = "summary.json"
PROGRESS_FILE = "progress.jsonl"  # this run's progress, one `TrainingProgress` per logged step


@dataclass(frozen=True)
class TrainRun:
    """What the trainer child is asked to do: shards, base model, output folder, training spec,
    device."""

    shards_dir: str
    base_model_dir: str
    output_dir: str
    training: dict[str, Any]  # a TrainingSpec
    device: str  # "cpu" or "cuda"
    lock_wait_s: float = 60.0  # how long to wait for a predecessor on the folder to exit
    ranks: int = 1  # data-parallel processes (torchrun's); one per GPU the config gives
    # torch's threads on the CPU, shared by the ranks (`prover_assets/cpu_threads.py`); None:
    # the environment's
    cpu_threads: int | None = None

    def threads_per_rank(self) -> int | None:
        """Each rank's share of `cpu_threads`, at least one."""
        return None if self.cpu_threads is None else max(1, self.cpu_threads // self.ranks)

    def spec(self) -> TrainingSpec:
        return TrainingSpec.model_validate(self.training)


def complete_checkpoints(folder: Path) -> list[Path]:
    """The checkpoints marked complete, oldest first (a partial one is never resumed from)."""
    if not folder.exists():
        return []
    found = [
        p
        for p in folder.iterdir()
        if p.name.startswith("checkpoint-") and (p / COMPLETE_MARKER).exists()
    ]
    return sorted(found, key=lambda p: int(p.name.split("-")[1]))


def _remove_partial_checkpoints(folder: Path) -> list[str]:
    removed = []
    if folder.exists():
        for path in folder.iterdir():
            if path.name.startswith("checkpoint-") and not (path / COMPLETE_MARKER).exists():
                shutil.rmtree(path)
                removed.append(path.name)
    return removed


def _truncate_log(path: Path, field: str, below: int) -> None:
    """Keep the log lines whose `field` is below `below`: the rest were lost with the run."""
    if not path.exists():
        return
    kept = [line for line in path.read_text().splitlines() if json.loads(line)[field] < below]
    path.write_text("".join(line + "\n" for line in kept))


def _warmup(arguments: type, ratio: float) -> dict[str, float]:
    """transformers 5 folded `warmup_ratio` into `warmup_steps` (a float below 1 is a ratio)."""
    import inspect

    if "warmup_ratio" in inspect.signature(arguments.__init__).parameters:
        return {"warmup_ratio": ratio}
    return {"warmup_steps": float(ratio)}


def _lora_model(run: TrainRun, spec: TrainingSpec, bf16: bool) -> Any:
    """The base model with fresh LoRA adapters (seeded right before: their A matrices are
    random)."""
    import torch
    import transformers
    from peft import LoraConfig, get_peft_model

    transformers.set_seed(spec.seed)
    base = load_causal_lm(
        run.base_model_dir,
        torch.bfloat16 if bf16 else torch.float32,
        attn_implementation=attention_implementation(run.device, spec.attention),
    )
    base.config.use_cache = False
    if spec.gradient_checkpointing:
        # Non-reentrant: it back-propagates into the LoRA weights although the frozen layer
        # inputs need no gradient; the input gradients are what peft's recipe asks for anyway.
        non_reentrant = {"use_reentrant": False}
        # transformers 5.2x renamed it (the old name warns); the GPU image's may predate that.
        if hasattr(base, "activation_checkpointing_enable"):
            base.activation_checkpointing_enable(activation_checkpointing_kwargs=non_reentrant)
        else:
            base.gradient_checkpointing_enable(gradient_checkpointing_kwargs=non_reentrant)
        base.enable_input_require_grads()
    if spec.pad_token_id is not None:
        base.config.pad_token_id = spec.pad_token_id
    lora = LoraConfig(
        r=spec.lora_r,
        lora_alpha=spec.lora_alpha,
        lora_dropout=spec.lora_dropout,
        target_modules=list(spec.target_modules),
        task_type="CAUSAL_LM",
    )
    transformers.set_seed(spec.seed)
    return get_peft_model(base, lora)


def _training_arguments(
    spec: TrainingSpec, checkpoints: Path, steps: int, *, bf16: bool, device: str, ranks: int
) -> Any:
    from transformers import TrainingArguments

    return TrainingArguments(
        output_dir=str(checkpoints),
        per_device_train_batch_size=1,
        gradient_accumulation_steps=spec.gradient_accumulation // ranks,
        # Every LoRA weight gets a gradient each micro-step (a padding one back-propagates
        # zeros), so DDP need not search the graph for unused ones.
        ddp_find_unused_parameters=False,
        learning_rate=spec.learning_rate,
        lr_scheduler_type=spec.lr_scheduler,
        **_warmup(TrainingArguments, spec.warmup_ratio),
        num_train_epochs=1,
        max_steps=steps,
        save_strategy="steps",
        save_steps=spec.save_every // spec.gradient_accumulation,
        save_total_limit=spec.keep_checkpoints,
        logging_steps=1,
        report_to=[],
        seed=spec.seed,
        data_seed=spec.seed,
        bf16=bf16,
        use_cpu=device == "cpu",
        dataloader_num_workers=0,
        remove_unused_columns=False,
        disable_tqdm=True,
    )


def run_mean_loss(metrics: Path) -> float | None:
    """The mean of every optimizer step's logged loss in the metrics file (one line per step:
    `logging_steps=1`), the steps logged before a resume included; None before any step."""
    per_step = {}
    for line in metrics.read_text(encoding="utf-8").splitlines() if metrics.exists() else []:
        logged = json.loads(line)
        if "loss" in logged:
            per_step[logged["step"]] = logged["loss"]
    return sum(per_step.values()) / len(per_step) if per_step else None


def _stop_and_mark(
    output: Path,
    stop_requested: dict[str, bool],
    tokens: list[int],
    first_step: int,
    ranks: Ranks,
) -> Any:
    """The callback that saves and stops at the next step end once SIGTERM came to any rank
    (all ranks stop at the same step), marks each saved checkpoint complete once every rank has
    saved its part, and (rank 0) appends every log line to the metrics file and a
    `TrainingProgress` line per logged step (tokens trained by this run: `tokens[0]`) to the
    progress file, which the parent reads as it goes."""
    from transformers import TrainerCallback

    started = time.monotonic()

    checkpoints = output / CHECKPOINTS

    class StopAndMark(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if ranks.any(stop_requested["flag"]):
                stop_requested["flag"] = True
                control.should_save = True
                control.should_training_stop = True
            return control

        def on_save(self, args, state, control, **kwargs):
            ranks.barrier()  # every rank's RNG state is written
            if ranks.main:
                folder = checkpoints / f"checkpoint-{state.global_step}"
                marker = json.dumps({"global_step": state.global_step, "ranks": ranks.world})
                (folder / COMPLETE_MARKER).write_text(marker)
            return control

        def on_log(self, args, state, control, logs=None, **kwargs):
            if not ranks.main:
                return control
            logs = dict(logs or {})
            if "train_loss" in logs:
                # HF's final train_loss is the mean of this process's steps only
                # (`_finalize_training`): after a resume, of the resumed part. The run's is
                # the mean of every step's own.
                logs["train_loss"] = run_mean_loss(output / METRICS_FILE)
            with open(output / METRICS_FILE, "a", encoding="utf-8") as handle:
                handle.write(json.dumps({"step": state.global_step, **logs}) + "\n")
            progress = TrainingProgress(
                step=state.global_step,
                steps=state.max_steps,
                loss=(logs or {}).get("loss"),
                tokens=tokens[0],
                elapsed_s=time.monotonic() - started,
                first_step=first_step,
            )
            with open(output / PROGRESS_FILE, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(asdict(progress)) + "\n")
            return control

    return StopAndMark()


def _packed_trainer(
    order_log: Path, schedule: Schedule, lengths: Any, tokens: list[int], ranks: Ranks
) -> type:
    """A Trainer that reads its rank's micro-batches in order and, on rank 0, logs every rank's
    micro-step as it is trained and adds its tokens (rows' `lengths`) to `tokens[0]`."""
    from torch.utils.data import DataLoader, SequentialSampler
    from transformers import Trainer

    class PackedTrainer(Trainer):
        def get_train_dataloader(self) -> DataLoader:
            # Not prepared by accelerate: it would shard the rank's micro-batches again and
            # pad the shards with repeats (a row trained twice).
            return DataLoader(
                self.train_dataset,
                batch_size=1,
                sampler=SequentialSampler(self.train_dataset),
                collate_fn=self.data_collator,
                num_workers=0,
            )

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            trained = ranks.gather(int(inputs.pop("micro_step")))
            if ranks.main:
                with open(order_log, "a", encoding="utf-8") as handle:
                    for micro_step in sorted(m for m in trained if m != PADDING):
                        rows = list(schedule.micro_batches[micro_step])
                        tokens[0] += int(sum(lengths[r] for r in rows))
                        handle.write(json.dumps({"micro_step": micro_step, "rows": rows}) + "\n")
            return super().compute_loss(
                model, inputs, return_outputs=return_outputs, num_items_in_batch=num_items_in_batch
            )

    return PackedTrainer


def _tokens_trained(
    dataset: SftDataset, schedule: Schedule, first_micro_step: int, end_micro_step: int
) -> int:
    return sum(
        sum(dataset.index[r].length for r in schedule.micro_batches[m])
        for m in range(first_micro_step, min(len(schedule), end_micro_step))
    )


def _plan_summary(
    run: TrainRun, spec: TrainingSpec, schedule: Schedule, dataset: SftDataset, bf16: bool
) -> dict[str, Any]:
    """The parts of the summary that do not depend on how far this run got."""
    import torch

    return {
        "micro_steps": len(schedule),
        "packing_efficiency": schedule.packing_efficiency,
        "rows": len(dataset),
        "epochs": spec.epochs,
        "bf16": bf16,
        "cpu_threads": torch.get_num_threads(),
        "run": asdict(run),
    }


def _resume_point(output: Path) -> tuple[str | None, int]:
    """The newest complete checkpoint and its step (None, 0 for a fresh start)."""
    resume = complete_checkpoints(output / CHECKPOINTS)
    resumed_step = int(resume[-1].name.split("-")[1]) if resume else 0
    return (str(resume[-1]) if resume else None), resumed_step


def _prepare_folder(output: Path, spec: TrainingSpec) -> list[str]:
    """Rank 0, before any rank reads the folder: remove the partial checkpoints, and cut the
    order and metrics logs back to the newest complete one, so nothing after it is counted
    twice. Returns the partial checkpoints removed."""
    removed = _remove_partial_checkpoints(output / CHECKPOINTS)
    _, resumed_step = _resume_point(output)
    _truncate_log(output / DATA_ORDER_FILE, "micro_step", resumed_step * spec.gradient_accumulation)
    _truncate_log(output / METRICS_FILE, "step", resumed_step + 1)
    return removed


def _peak_memory_gib(device: str) -> float | None:
    """The most GPU memory torch allocated in this process (None on CPU)."""
    if device != "cuda":
        return None
    import torch

    return torch.cuda.max_memory_allocated() / 2**30


def _optimizer_steps(micro_steps: int, spec: TrainingSpec) -> int:
    """The schedule's optimizer steps (its last may have fewer micro-steps), cut at
    `max_steps`."""
    steps = math.ceil(micro_steps / spec.gradient_accumulation)
    return steps if spec.max_steps is None else min(steps, spec.max_steps)


def _join(run: TrainRun, ranks: Ranks) -> list[str]:
    """Join the other ranks, each on its share of the CPU threads; rank 0 prepares the folder
    before any rank reads it. Returns the partial checkpoints it removed."""
    import torch

    if ranks.world != run.ranks:
        raise RuntimeError(
            f"{run.output_dir}: the run asks for {run.ranks} ranks, not {ranks.world}"
        )
    # set, not left to $OMP_NUM_THREADS: torch caps that at the cores, torchrun sets it to 1
    if (per_rank := run.threads_per_rank()) is not None:
        torch.set_num_threads(per_rank)
    ranks.start(run.device)
    removed: list[str] = []
    if ranks.main:
        Path(run.output_dir).mkdir(parents=True, exist_ok=True)
        removed = _prepare_folder(Path(run.output_dir), run.spec())
    ranks.barrier()  # the other ranks read the folder as rank 0 left it
    return removed


def _train_until_stopped(trainer: Any, resume_from: str | None, stop: dict[str, bool]) -> float:
    """Train to the end, a SIGTERM setting `stop` (the callback then saves and stops); the
    seconds it took."""

    def request_stop(signum: int, frame: Any) -> None:
        stop["flag"] = True

    previous = signal.signal(signal.SIGTERM, request_stop)
    started = time.monotonic()
    try:
        trainer.train(resume_from_checkpoint=resume_from)
    finally:
        signal.signal(signal.SIGTERM, previous)
    return time.monotonic() - started


def train(run: TrainRun, ranks: Ranks | None = None) -> dict[str, Any]:
    """Train (or resume) as one of `ranks` (default: one process); returns a summary whose
    `status` is `done` or `stopped` (rank 0 writes it and the logs)."""
    import transformers

    transformers.utils.logging.disable_progress_bar()
    ranks = ranks or Ranks()
    removed = _join(run, ranks)
    spec = run.spec()
    output = Path(run.output_dir)
    checkpoints = output / CHECKPOINTS
    dataset = SftDataset(Path(run.shards_dir))
    schedule = training_schedule(
        dataset.lengths(), spec.tokens_per_micro_batch, epochs=spec.epochs, seed=spec.seed
    )
    steps = _optimizer_steps(len(schedule), spec)
    bf16 = spec.uses_bf16(run.device)
    resume_from, resumed_step = _resume_point(output)
    order_log = output / DATA_ORDER_FILE
    micro_steps = rank_micro_steps(
        len(schedule), steps, spec.gradient_accumulation, ranks.world, ranks.rank
    )

    model = _lora_model(run, spec, bf16)
    stop_requested = {"flag": False}
    tokens = [0]
    trainer = _packed_trainer(order_log, schedule, dataset.lengths(), tokens, ranks)(
        model=model,
        args=_training_arguments(
            spec, checkpoints, steps, bf16=bf16, device=run.device, ranks=ranks.world
        ),
        train_dataset=RankDataset(PackedDataset(dataset, schedule), micro_steps),
        data_collator=collate,
        compute_loss_func=HiddenStatesTap(model, spec.loss_chunk_tokens).loss,
        callbacks=[_stop_and_mark(output, stop_requested, tokens, resumed_step, ranks)],
    )
    seconds = _train_until_stopped(trainer, resume_from, stop_requested)
    stopped = stop_requested["flag"] and trainer.state.global_step < steps
    first = resumed_step * spec.gradient_accumulation
    end = trainer.state.global_step * spec.gradient_accumulation
    trained_tokens = _tokens_trained(dataset, schedule, first, end)
    if not ranks.main:
        return {"status": "stopped" if stopped else "done"}
    summary = {
        "status": "stopped" if stopped else "done",
        "global_step": trainer.state.global_step,
        "max_steps": steps,
        "resumed_from_step": resumed_step,
        "removed_partial_checkpoints": removed,
        "trained_micro_steps_this_run": max(end - first, 0),
        "tokens_per_s_this_run": trained_tokens / seconds if seconds > 0 else None,
        "peak_memory_gib": _peak_memory_gib(run.device),
        "ranks": ranks.world,
        "attention": attention_implementation(run.device, spec.attention),
        **_plan_summary(run, spec, schedule, dataset, bf16),
    }
    if not stopped:
        model.save_pretrained(output / FINAL_ADAPTER)
    (output / SUMMARY_FILE).write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def main(argv: list[str]) -> int:
    """The trainer child: `python -m prover_assets.sft.trainer RUN.json`; holds the folder while it
    trains."""
    run = TrainRun(**json.loads(Path(argv[0]).read_text()))
    ranks = Ranks.from_env()
    if ranks.world > 1:
        die_with_parent()  # torchrun starts each rank in a session of its own
    try:
        # One lock for the folder, rank 0's; the others wait for it at the first barrier.
        holding = (
            hold_folder(Path(run.output_dir), wait_s=run.lock_wait_s)
            if ranks.main
            else contextlib.nullcontext()
        )
        with holding:
            summary = train(run, ranks)
    except FolderBusyError as exc:
        print(f"refused: {exc}", flush=True)
        return BUSY_EXIT_CODE
    if ranks.main:
        print(json.dumps({k: v for k, v in summary.items() if k != "run"}), flush=True)
    return STOPPED_EXIT_CODE if summary["status"] == "stopped" else 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main(sys.argv[1:]))
