"""The experiment's rules across expert iterations, as pure functions of the spec and the
iteration: which model samples an iteration's train pool, which pool rounds come before it (the
problems they solved are left out when only unsolved ones are sampled again), which are its SFT
data, and where its training starts. Each answers with what to read, as `OutputRef`s (an
asset's key path, the iteration it was made for, the file in its folder): the Dagster layer and
the checks resolve them against the manifests, and neither says the rules again.

An iteration is named by its partition: "1" to "K", or None in the one-iteration graph, whose
keys, paths and jobs are the registered design's.
"""

from __future__ import annotations

from dataclasses import dataclass

from prover_assets.config import ExperimentSpec
from prover_assets.generation.stages import GENERATIONS_FILE
from prover_assets.records.layout import key_path
from prover_assets.verify.stages import VERDICTS_FILE

__all__ = [
    "EXPORTED_MODEL_PATH",
    "OutputRef",
    "iteration_number",
    "iteration_partition",
    "iterations_before",
    "pool_generations_path",
    "pool_model",
    "pool_round_refs",
    "pool_verdicts_path",
    "previous_iteration",
    "sft_iterations",
    "sft_round_refs",
    "solved_before_refs",
    "training_start",
]

# The registered seed's export: what the next iteration's pool is sampled with.
EXPORTED_MODEL_PATH = ("exported_model",)


@dataclass(frozen=True)
class OutputRef:
    """An output a step reads: the asset (its key's path), the iteration it was made for (None:
    an unpartitioned asset, or the one iteration's), and the file in its folder (None: the
    folder)."""

    asset: tuple[str, ...]
    partition: str | None = None
    file: str | None = None


def pool_generations_path(round: int) -> tuple[str, ...]:
    """The key path of the train pool's generations of correction round `round` (0: the first
    samples), in folder `generations/pool/r<round>`."""
    return key_path(("generations", "pool", f"r{round}"))


def pool_verdicts_path(round: int) -> tuple[str, ...]:
    """The key path of the train pool's verdicts of correction round `round`, in folder
    `verdicts/pool/r<round>`."""
    return key_path(("verdicts", "pool", f"r{round}"))


def iteration_number(partition: str | None) -> int:
    """The iteration a per-iteration asset's partition is (None: the one iteration)."""
    return 1 if partition is None else int(partition)


def iteration_partition(iterations: int, number: int) -> str | None:
    """The partition of iteration `number` in a graph of `iterations` (None: the one
    iteration's assets are unpartitioned)."""
    return str(number) if iterations > 1 else None


def iterations_before(partition: str | None) -> list[str]:
    """The partitions of every iteration before `partition`, first to last."""
    return [str(i) for i in range(1, iteration_number(partition))]


def previous_iteration(partition: str | None) -> str | None:
    """The partition of the iteration before `partition`; None for the first (whose model is
    the baseline)."""
    number = iteration_number(partition)
    return None if number == 1 else str(number - 1)


def pool_model(partition: str | None) -> OutputRef | None:
    """The model that samples the train pool in iteration `partition`: the baseline in the
    first (None), then the registered seed's export of the iteration before. Not a graph edge:
    the export depends on this iteration's pool rounds, so the edge to the one before would be
    a cycle; the export's manifest is checked when it is read instead."""
    previous = previous_iteration(partition)
    return None if previous is None else OutputRef(EXPORTED_MODEL_PATH, previous)


def pool_round_refs(
    spec: ExperimentSpec, partition: str | None
) -> list[tuple[OutputRef, OutputRef]]:
    """The (generations, verdicts) of every pool round of iteration `partition`: round 0, then
    each correction round."""
    return [
        (
            OutputRef(pool_generations_path(r), partition, GENERATIONS_FILE),
            OutputRef(pool_verdicts_path(r), partition, VERDICTS_FILE),
        )
        for r in range(spec.corrections.rounds + 1)
    ]


def solved_before_refs(
    spec: ExperimentSpec, partition: str | None
) -> list[tuple[OutputRef, OutputRef]]:
    """The pool rounds whose solved problems iteration `partition`'s round 0 leaves out: every
    round of every iteration before it when `iteration.problems` is `unsolved`, none when it is
    `all`."""
    if spec.iteration.problems != "unsolved":
        return []
    return [
        pair for earlier in iterations_before(partition) for pair in pool_round_refs(spec, earlier)
    ]


def sft_iterations(spec: ExperimentSpec, partition: str | None) -> list[str | None]:
    """The iterations whose pool rounds' accepted proofs are iteration `partition`'s SFT data:
    its own, or (`iteration.sft_data: cumulative`) every iteration's so far."""
    if spec.iteration.sft_data == "iteration":
        return [partition]
    return [*iterations_before(partition), partition]


def sft_round_refs(
    spec: ExperimentSpec, partition: str | None
) -> list[tuple[OutputRef, OutputRef]]:
    """The pool rounds of iteration `partition`'s SFT data, iteration by iteration."""
    return [
        pair
        for iteration in sft_iterations(spec, partition)
        for pair in pool_round_refs(spec, iteration)
    ]


def training_start(
    spec: ExperimentSpec, export: tuple[str, ...], partition: str | None
) -> OutputRef | None:
    """The model iteration `partition`'s LoRA trains on: the base model (None), or with
    `iteration.start: previous` the same seed's export (`export`, its key path) of the
    iteration before."""
    previous = previous_iteration(partition)
    if spec.iteration.start == "base" or previous is None:
        return None
    return OutputRef(export, previous)
