"""Data-parallel training: which rank trains which micro-step, how the ranks are launched, and
the few collectives the trainer needs (each a no-op in one process).

The rule: optimizer step s covers the schedule's micro-steps [s·GA, (s+1)·GA), as in one
process; of those, rank r of N trains the micro-steps j with j ≡ r (mod N), GA/N of them (GA
must be a multiple of N). Every rank trains the same number of micro-batches, so every backward
meets the others' all-reduce: where the schedule runs out, a rank trains a padding micro-batch
(a real one with every label ignored: zero loss, zero gradient, never logged).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

__all__ = ["PADDING", "Ranks", "rank_micro_steps", "trainer_command"]

PADDING = -1  # the micro-step index of a padding micro-batch


@dataclass(frozen=True)
class Ranks:
    """This process's place among the training processes (torchrun's environment)."""

    rank: int = 0
    world: int = 1
    local: int = 0

    @classmethod
    def from_env(cls) -> Ranks:
        return cls(
            rank=int(os.environ.get("RANK", 0)),
            world=int(os.environ.get("WORLD_SIZE", 1)),
            local=int(os.environ.get("LOCAL_RANK", 0)),
        )

    @property
    def main(self) -> bool:
        """Rank 0: the one that holds the folder and writes logs, checkpoints' markers and the
        summary."""
        return self.rank == 0

    def start(self, device: str) -> None:
        """Join the process group (NCCL on GPUs, gloo on CPU) before anything collective."""
        if self.world == 1:
            return
        import torch
        import torch.distributed as dist

        if device == "cuda":
            torch.cuda.set_device(self.local)
        dist.init_process_group(backend="nccl" if device == "cuda" else "gloo")

    def barrier(self) -> None:
        if self.world > 1:
            import torch.distributed as dist

            dist.barrier()

    def gather(self, value: Any) -> list[Any]:
        """Every rank's `value`, in rank order, on every rank."""
        if self.world == 1:
            return [value]
        import torch.distributed as dist

        values: list[Any] = [None] * self.world
        dist.all_gather_object(values, value)
        return values

    def any(self, flag: bool) -> bool:
        """Whether any rank's `flag` is set (all ranks get the same answer)."""
        return any(self.gather(flag))


def rank_micro_steps(
    micro_steps: int, optimizer_steps: int, gradient_accumulation: int, ranks: int, rank: int
) -> list[int]:
    """The schedule's micro-steps that `rank` of `ranks` trains, in order, `PADDING` where the
    schedule has run out before the last optimizer step is full for every rank."""
    if gradient_accumulation % ranks:
        raise ValueError(
            f"gradient_accumulation {gradient_accumulation} is not a multiple of the {ranks} "
            "ranks: each rank must train the same number of micro-steps per optimizer step"
        )
    covered = min(micro_steps, optimizer_steps * gradient_accumulation)
    per_rank = -(-covered // ranks)  # every rank the same count: the last may pad
    return [j if (j := k * ranks + rank) < covered else PADDING for k in range(per_rank)]


def trainer_command(run_file: str, ranks: int) -> list[str]:
    """The trainer child's command: the module itself for one rank, torchrun (standalone: one
    machine, a free port) for several."""
    module = ["-m", "prover_assets.sft.trainer", run_file]
    if ranks == 1:
        return [sys.executable, *module]
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={ranks}",
        "--max-restarts=0",
        *module,
    ]
