"""The pool's shards: the scan cut into tasks of consecutive row groups, and a row whose id or
statement a `Problem` cannot take refused naming where it is."""

from __future__ import annotations

import pytest

from prover_assets.config import PoolColumns, PoolSpec
from prover_assets.problems.shards import (
    PoolInputError,
    check_row,
    open_shard,
    plan_scan,
    shard_column,
)
from prover_assets_tests.pool_fixtures import write_shards


def rows(count: int) -> list[dict]:
    return [
        {
            "problem_id": f"p{i}",
            "formal_statement": f"theorem t{i} : True := by sorry",
            "informal_statement": None,
            "source": "s",
        }
        for i in range(count)
    ]


def pool_spec(workers: int) -> PoolSpec:
    return PoolSpec(
        dataset="test/pool",
        revision="r",
        shards=[{"path": "x", "sha256": "0" * 64}],
        seed=1,
        candidates=10,
        size=5,
        workers=workers,
        batch_rows=100,
    )


def test_one_worker_takes_each_shard_in_quarters_of_its_row_groups_and_all_rows_are_counted(
    tmp_path,
):
    # Two shards of 8 row groups of 2 rows (32 rows, round-robin): 8 // (1 worker x 4) = 2
    # groups per task.
    paths = write_shards(rows(32), tmp_path, shards=2, row_group_size=2)
    tasks, total = plan_scan(paths, pool_spec(workers=1), "test/pool")
    assert total == 32
    assert [(task.path, task.row_groups) for task in tasks] == [
        (str(path), groups) for path in paths for groups in [(0, 1), (2, 3), (4, 5), (6, 7)]
    ]
    assert {task.dataset for task in tasks} == {"test/pool"}


def test_more_workers_than_row_groups_give_one_group_per_task(tmp_path):
    (path,) = write_shards(rows(6), tmp_path, row_group_size=2)
    tasks, total = plan_scan([path], pool_spec(workers=8), "d")
    assert (total, [task.row_groups for task in tasks]) == (6, [(0,), (1,), (2,)])


COLUMNS = PoolColumns()


@pytest.mark.parametrize(
    ("problem_id", "text", "message"),
    [
        (7, "theorem t : True := by sorry", "here: problem_id is 7, not a string"),
        (
            " p1",
            "theorem t : True := by sorry",
            "here: problem_id ' p1' is empty, padded with whitespace or holds a byte-order mark",
        ),
        (
            "",
            "theorem t : True := by sorry",
            "here: problem_id '' is empty, padded with whitespace or holds a byte-order mark",
        ),
        ("p1", None, "here (p1): formal_statement is NoneType, not a string"),
        ("p1", 3, "here (p1): formal_statement is int, not a string"),
    ],
)
def test_a_row_a_problem_cannot_take_is_refused_naming_its_column(problem_id, text, message):
    with pytest.raises(PoolInputError) as refused:
        check_row("here", problem_id, text, COLUMNS)
    assert str(refused.value) == message


def test_a_row_a_problem_can_take_passes():
    assert check_row("here", "p1", "theorem t : True := by sorry", COLUMNS) is None


def test_a_column_the_spec_names_and_the_shard_lacks_is_named_with_the_shards_columns(tmp_path):
    (path,) = write_shards(rows(2), tmp_path)
    batch = next(open_shard(path).iter_batches())
    with pytest.raises(PoolInputError) as refused:
        shard_column(batch, "statement", str(path))
    assert str(refused.value) == (
        f"{path}: no column 'statement'; columns are "
        "['problem_id', 'formal_statement', 'informal_statement', 'source']"
    )
    assert shard_column(batch, None, str(path)) is None
    assert shard_column(batch, "problem_id", str(path)) == ["p0", "p1"]


def test_a_file_that_is_not_parquet_is_refused_with_pyarrows_reason(tmp_path):
    path = tmp_path / "x.parquet"
    path.write_bytes(b"not parquet at all")
    with pytest.raises(PoolInputError) as refused:
        open_shard(path)
    message = str(refused.value)
    assert message.startswith(f"{path}: not a readable parquet file (")
    assert "Parquet magic bytes not found" in message
