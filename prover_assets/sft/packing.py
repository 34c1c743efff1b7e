"""The training schedule: every epoch's rows packed into micro-batches, in a seeded order.

Rows are packed first-fit-decreasing by length (length-aware, so micro-batches are full), into
micro-batches of at most `capacity` tokens; the micro-batches of each epoch are then shuffled
with a seed derived from (seed, epoch). The whole schedule is fixed before training starts, so
a resumed run continues with exactly the micro-step it stopped at, and every row is seen
exactly `epochs` times.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Schedule", "first_fit_decreasing", "training_schedule"]


def first_fit_decreasing(
    lengths: Sequence[int], capacity: int, rows: Sequence[int]
) -> list[list[int]]:
    """Pack `rows` (indices into `lengths`) into bins of at most `capacity` tokens."""
    order = sorted(rows, key=lambda row: (-lengths[row], row))
    bins: list[list[int]] = []
    space: list[int] = []
    for row in order:
        size = lengths[row]
        if size > capacity:
            raise ValueError(f"row {row} has {size} tokens, more than a micro-batch's {capacity}")
        for index, free in enumerate(space):
            if size <= free:
                bins[index].append(row)
                space[index] -= size
                break
        else:
            bins.append([row])
            space.append(capacity - size)
    return bins


@dataclass(frozen=True)
class Schedule:
    """The training order: micro-batches of row indices, each within the token budget."""

    micro_batches: tuple[tuple[int, ...], ...]  # dataset rows of each micro-step, in order
    capacity: int
    epochs: int
    real_tokens: int

    def __len__(self) -> int:
        return len(self.micro_batches)

    @property
    def packing_efficiency(self) -> float:
        """Real tokens / tokens computed, where each micro-batch is budgeted at capacity."""
        return (
            self.real_tokens / (len(self.micro_batches) * self.capacity)
            if self.micro_batches
            else 0.0
        )


def training_schedule(lengths: Sequence[int], capacity: int, *, epochs: int, seed: int) -> Schedule:
    """Micro-batches of `epochs` passes over rows of `lengths`: each pass packed first-fit
    decreasing into `capacity` tokens, its bins in an order seeded by (seed, epoch)."""
    micro_batches: list[tuple[int, ...]] = []
    for epoch in range(epochs):
        bins = first_fit_decreasing(lengths, capacity, range(len(lengths)))
        order = np.random.default_rng([seed, epoch]).permutation(len(bins))
        micro_batches += [tuple(bins[i]) for i in order]
    return Schedule(tuple(micro_batches), capacity, epochs, int(sum(lengths)) * epochs)
