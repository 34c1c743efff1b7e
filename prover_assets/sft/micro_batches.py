"""The schedule's packed micro-batches as the Trainer reads them: as tensors, per rank in the
order it trains them (a padding micro-batch with every label ignored), one per step with
no attention mask and no KV cache."""

from __future__ import annotations

from typing import Any

from prover_assets.sft.packing import Schedule
from prover_assets.sft.ranks import PADDING
from prover_assets.sft.shards import IGNORE_INDEX, SftDataset, pack

__all__ = ["PackedDataset", "RankDataset", "collate"]


class PackedDataset:
    """The schedule's micro-batches as torch tensors (the Trainer's dataset)."""

    def __init__(self, dataset: SftDataset, schedule: Schedule) -> None:
        self.dataset = dataset
        self.schedule = schedule

    def __len__(self) -> int:
        return len(self.schedule)

    def __getitem__(self, micro_step: int) -> dict[str, Any]:
        import torch

        batch = pack(self.dataset, self.schedule.micro_batches[micro_step])
        return {
            "input_ids": torch.from_numpy(batch.input_ids),
            "labels": torch.from_numpy(batch.labels),
            "position_ids": torch.from_numpy(batch.position_ids),
            "micro_step": micro_step,
        }


class RankDataset:
    """One rank's micro-batches, in the order it trains them (`rank_micro_steps`); a padding
    micro-batch is the schedule's first with every label ignored."""

    def __init__(self, packed: PackedDataset, micro_steps: list[int]) -> None:
        self.packed = packed
        self.micro_steps = micro_steps

    def __len__(self) -> int:
        return len(self.micro_steps)

    def __getitem__(self, index: int) -> dict[str, Any]:
        micro_step = self.micro_steps[index]
        if micro_step != PADDING:
            return self.packed[micro_step]
        item = self.packed[0]
        return {**item, "labels": item["labels"].clone().fill_(IGNORE_INDEX), "micro_step": PADDING}


def collate(items: list[dict[str, Any]]) -> dict[str, Any]:
    """One packed micro-batch per step. No attention mask and no KV cache: then transformers
    reads the restarting position ids as sequence boundaries and masks attention across them
    (with a cache it would not, and rows would see each other)."""
    (item,) = items
    return {
        "input_ids": item["input_ids"].unsqueeze(0),
        "labels": item["labels"].unsqueeze(0),
        "position_ids": item["position_ids"].unsqueeze(0),
        "use_cache": False,
        "micro_step": item["micro_step"],
    }
