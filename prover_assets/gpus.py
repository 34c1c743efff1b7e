"""The GPUs this box has: what `training.gpus: all` resolves to where a step runs."""

from __future__ import annotations

from prover_assets.config import TrainingSpec

__all__ = ["training_gpus", "training_ranks", "visible_gpu_count"]


def visible_gpu_count() -> int:
    """CUDA devices this process sees (after `CUDA_VISIBLE_DEVICES`); 0 without CUDA."""
    import torch  # here, not at import: loading the definitions imports no torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def training_gpus(training: TrainingSpec, device: str, visible: int | None = None) -> list[int]:
    """The GPUs training uses on a box of `visible` GPUs (None: this box), none on CPU."""
    if device != "cuda":
        return []
    if training.gpus != "all":
        return training.resolved_gpus(0)
    return training.resolved_gpus(visible_gpu_count() if visible is None else visible)


def training_ranks(training: TrainingSpec, device: str, visible: int | None = None) -> int:
    """Training's data-parallel ranks on a box of `visible` GPUs (None: this box): one per GPU
    it uses, one on CPU."""
    return max(len(training_gpus(training, device, visible)), 1)
