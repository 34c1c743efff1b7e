"""The pool's parquet shards read strictly: a shard that cannot be opened or read, a missing
column, or a row whose id or statement a `Problem` cannot take is an error naming the shard,
the row (from 0, as parquet counts) and the column; and the scan cut into tasks of consecutive
row groups, a few per worker."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import TypeAdapter, ValidationError

from prover_assets.config import PoolColumns, PoolSpec
from prover_assets.records.models import ProblemId

__all__ = [
    "PoolInputError",
    "ScanTask",
    "check_row",
    "open_shard",
    "plan_scan",
    "shard_batches",
    "shard_column",
]


class PoolInputError(ValueError):
    """A pool shard or its contents cannot be used (wrong columns, duplicate ids, ...)."""


@dataclass(frozen=True)
class ScanTask:
    """Consecutive row groups of one shard, scanned by one worker with the pool's spec;
    `dataset` names the rows' source where the shard has no source column."""

    path: str
    row_groups: tuple[int, ...]
    spec: PoolSpec
    dataset: str


def shard_column(batch: Any, name: str | None, path: str) -> list[Any] | None:
    """The batch's column `name` as values (None when the spec names no such column); a column
    the shard lacks is an error naming it and the shard's columns."""
    if name is None:
        return None
    if name not in batch.schema.names:
        raise PoolInputError(f"{path}: no column {name!r}; columns are {batch.schema.names}")
    return batch.column(name).to_pylist()


_PROBLEM_ID = TypeAdapter(ProblemId)


def _unreadable(path: str | Path, exc: Exception) -> PoolInputError:
    return PoolInputError(f"{path}: not a readable parquet file ({exc})")


def open_shard(path: str | Path) -> pq.ParquetFile:
    """The shard opened for reading, or an error naming it (pyarrow's names no file)."""
    try:
        return pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise _unreadable(path, exc) from exc


def shard_batches(parquet: pq.ParquetFile, task: ScanTask, columns: list[str]) -> Iterator[Any]:
    """The task's row groups in batches; a page that cannot be read is an error naming the
    shard (a file with bytes before its data opens, then fails here)."""
    batches = parquet.iter_batches(
        batch_size=task.spec.batch_rows, row_groups=list(task.row_groups), columns=columns
    )
    while True:
        try:
            batch = next(batches)
        except StopIteration:
            return
        except (pa.ArrowException, OSError) as exc:
            raise _unreadable(task.path, exc) from exc
        yield batch


def check_row(where: str, problem_id: object, text: object, columns: PoolColumns) -> None:
    """A row's id and statement are what a `Problem` takes; else an error naming the shard,
    the row (from 0, as parquet counts) and the column."""
    if not isinstance(problem_id, str):
        raise PoolInputError(f"{where}: {columns.problem_id} is {problem_id!r}, not a string")
    try:
        _PROBLEM_ID.validate_python(problem_id)
    except ValidationError:
        raise PoolInputError(
            f"{where}: {columns.problem_id} {problem_id!r} is empty, padded with whitespace or "
            "holds a byte-order mark"
        ) from None
    if not isinstance(text, str):
        raise PoolInputError(
            f"{where} ({problem_id}): {columns.formal_statement} is {type(text).__name__}, "
            "not a string"
        )


def plan_scan(paths: Sequence[Path], spec: PoolSpec, dataset: str) -> tuple[list[ScanTask], int]:
    """The scan of `paths` as tasks (a few per worker, so that the workers balance; each keeps
    its own top K), and the rows the shards hold in all."""
    tasks = []
    total_rows = 0
    for path in paths:
        metadata = open_shard(path).metadata
        total_rows += metadata.num_rows
        groups = list(range(metadata.num_row_groups))
        # A few tasks per worker so that the pool balances; each task keeps its own top K.
        per_task = max(1, len(groups) // (spec.workers * 4) or 1)
        for start in range(0, len(groups), per_task):
            tasks.append(
                ScanTask(str(path), tuple(groups[start : start + per_task]), spec, dataset)
            )
    return tasks, total_rows
