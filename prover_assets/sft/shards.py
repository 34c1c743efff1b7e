"""SFT shards: token files the trainer memory-maps, one row index, and the collate path.

Layout of an `sft_shards` folder:
- `tokens-NNNNN.bin`: uint32 token ids, rows back to back (`input_ids = prompt_ids +
  completion_ids`, exactly as sampled);
- `rows.jsonl`: one `RowIndex` per row (which shard, where, how long, where the prompt ends,
  and the SFT-row fields of the contract);
- `manifest.json`: counts and the sha256 of every file.

`SftDataset` reads rows back as `SftRow` records (the contract, validated); `pack` builds the
trainer's micro-batches: rows concatenated, position ids restarting at 0 on each row (so the
model's attention never crosses a row boundary) and labels -100 on every prompt token. All of it
is numpy: the builder's read-back uses the trainer's own path without importing torch.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from prover_assets.records import SftRow, iter_records

__all__ = [
    "IGNORE_INDEX",
    "ROWS_FILE",
    "PackedBatch",
    "RowIndex",
    "SftDataset",
    "ShardWriter",
    "pack",
]

ROWS_FILE = "rows.jsonl"
IGNORE_INDEX = -100
SHARD_TOKENS = 1 << 28  # 1 GiB of uint32 per shard


class RowIndex(BaseModel):
    """Where a row's tokens are, and the contract's SFT-row fields (all but the tokens)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    schema_version: Literal[1] = 1
    row: Annotated[int, Field(ge=0)]
    shard: str
    offset: Annotated[int, Field(ge=0)]
    length: Annotated[int, Field(gt=1)]
    prompt_len: Annotated[int, Field(gt=0)]
    kind: Literal["first", "correction"]
    round: Annotated[int, Field(ge=0)]
    sample_idx: Annotated[int, Field(ge=0)]
    cap_tokens: Annotated[int, Field(gt=0)]
    proof_sha: str
    model_rev: str
    problem_id: str

    @property
    def key(self) -> int:
        return self.row


def shard_name(index: int) -> str:
    """The file name of token shard `index`."""
    return f"tokens-{index:05d}.bin"


class ShardWriter:
    """Writes rows to token shards and the row index. The folder is published as a whole by
    its caller, so nothing here needs to be durable before `close` (which fsyncs)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self._index = open(folder / ROWS_FILE, "w", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self._shard = 0
        self._offset = 0
        self._handle = open(folder / shard_name(0), "wb")  # noqa: SIM115 - closed in close()
        self.rows = 0
        self.tokens = 0

    def write(
        self,
        input_ids: np.ndarray,
        *,
        prompt_len: int,
        kind: str,
        round: int,
        sample_idx: int,
        cap_tokens: int,
        proof_sha: str,
        model_rev: str,
        problem_id: str,
    ) -> None:
        ids = np.asarray(input_ids, dtype=np.uint32)
        if self._offset + len(ids) > SHARD_TOKENS:
            self._next_shard()
        entry = RowIndex(
            row=self.rows,
            shard=shard_name(self._shard),
            offset=self._offset,
            length=len(ids),
            prompt_len=prompt_len,
            kind=kind,
            round=round,
            sample_idx=sample_idx,
            cap_tokens=cap_tokens,
            proof_sha=proof_sha,
            model_rev=model_rev,
            problem_id=problem_id,
        )
        self._handle.write(ids.tobytes())
        self._index.write(entry.model_dump_json() + "\n")
        self._offset += len(ids)
        self.rows += 1
        self.tokens += len(ids)

    def write_row(self, row: SftRow) -> None:
        """Write a contract row (tests and tools; the builder writes its arrays directly)."""
        self.write(
            np.asarray(row.input_ids),
            prompt_len=row.prompt_len,
            kind=row.kind,
            round=row.round,
            sample_idx=row.sample_idx,
            cap_tokens=row.cap_tokens,
            proof_sha=row.proof_sha,
            model_rev=row.model_rev,
            problem_id=row.problem_id,
        )

    def _next_shard(self) -> None:
        self._close_shard()
        self._shard += 1
        self._offset = 0
        self._handle = open(self.folder / shard_name(self._shard), "wb")  # noqa: SIM115

    def _close_shard(self) -> None:
        self._handle.flush()
        os.fsync(self._handle.fileno())
        self._handle.close()

    def shard_paths(self) -> list[Path]:
        return [self.folder / shard_name(i) for i in range(self._shard + 1)]

    def close(self) -> None:
        self._close_shard()
        self._index.flush()
        os.fsync(self._index.fileno())
        self._index.close()


class SftDataset:
    """The rows of an `sft_shards` folder, memory-mapped; `dataset[i]` is an `SftRow`."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.index = list(iter_records(folder / ROWS_FILE, RowIndex))
        self._maps: dict[str, np.ndarray] = {}

    def __len__(self) -> int:
        return len(self.index)

    def tokens(self, i: int) -> np.ndarray:
        entry = self.index[i]
        if entry.shard not in self._maps:
            path = self.folder / entry.shard
            self._maps[entry.shard] = (
                np.memmap(path, dtype=np.uint32, mode="r")
                if path.stat().st_size
                else np.zeros(0, np.uint32)
            )
        return self._maps[entry.shard][entry.offset : entry.offset + entry.length]

    def __getitem__(self, i: int) -> SftRow:
        entry = self.index[i]
        return SftRow(
            input_ids=self.tokens(i).astype(np.int64).tolist(),
            prompt_len=entry.prompt_len,
            kind=entry.kind,
            round=entry.round,
            sample_idx=entry.sample_idx,
            cap_tokens=entry.cap_tokens,
            n_completion=entry.length - entry.prompt_len,
            proof_sha=entry.proof_sha,
            model_rev=entry.model_rev,
            problem_id=entry.problem_id,
        )

    def __iter__(self) -> Iterator[SftRow]:
        for i in range(len(self)):
            yield self[i]

    def lengths(self) -> list[int]:
        return [entry.length for entry in self.index]


@dataclass(frozen=True)
class PackedBatch:
    """One micro-batch: rows back to back in one sequence (shape [T])."""

    input_ids: np.ndarray  # int64 [T]
    labels: np.ndarray  # int64 [T]; IGNORE_INDEX on prompt tokens
    position_ids: np.ndarray  # int64 [T]; 0 at the start of every row
    rows: tuple[int, ...]  # dataset indices, in order
    spans: tuple[tuple[int, int], ...]  # (start, end) of each row in the sequence


def pack(dataset: SftDataset, rows: Sequence[int]) -> PackedBatch:
    """The trainer's collate: rows concatenated; loss only on completion tokens."""
    pieces, labels, positions, spans = [], [], [], []
    start = 0
    for i in rows:
        ids = dataset.tokens(i).astype(np.int64)
        prompt_len = dataset.index[i].prompt_len
        label = ids.copy()
        label[:prompt_len] = IGNORE_INDEX
        pieces.append(ids)
        labels.append(label)
        positions.append(np.arange(len(ids), dtype=np.int64))
        spans.append((start, start + len(ids)))
        start += len(ids)
    return PackedBatch(
        input_ids=np.concatenate(pieces),
        labels=np.concatenate(labels),
        position_ids=np.concatenate(positions),
        rows=tuple(rows),
        spans=tuple(spans),
    )
