"""Real pool statements in the Goedel-Pset-v1 shape, for tests, benchmarks and the demo shard.

The Lean Workbook, PutnamBench, ProofNet and FormalMATH statements of `data/pool-sources/` are
turned into rows `{problem_id, formal_statement, informal_statement, source}` whose statements
carry a header and end `:= by sorry`, then written as parquet shards.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

SOURCES = Path(__file__).parent / "data" / "pool-sources"
POOL_HEADER = (
    "import Mathlib\nimport Aesop\nset_option maxHeartbeats 400000\n"
    "open BigOperators Real Nat Topology Rat\n\n"
)
_OPEN_BY = re.compile(r":=\s*(by)?\s*$")
_THEOREM_NAME = re.compile(r"theorem\s+(\S+)")
SCHEMA = pa.schema(
    [
        ("problem_id", pa.string()),
        ("formal_statement", pa.string()),
        ("informal_statement", pa.string()),
        ("source", pa.string()),
    ]
)


def _close(statement: str) -> str:
    return _OPEN_BY.sub(":= by sorry", statement.rstrip())


def _strip_doc(text: str) -> str:
    return re.sub(r"^\s*/-[-!]?|-/\s*$", "", text).strip()


def _leanworkbook() -> Iterator[dict]:
    seen: set[str] = set()
    for name in (
        "leanworkbook_train_6K",
        "leanworkbook_hard",
        "leanworkbook_full",
        "leanworkbook_test",
    ):
        for line in (SOURCES / f"{name}.jsonl").read_text().splitlines():
            row = json.loads(line)
            statement = row["formal_statement"]
            theorem = _THEOREM_NAME.search(statement)
            if theorem is None or theorem.group(1) in seen:
                continue
            seen.add(theorem.group(1))
            if not statement.lstrip().startswith("import"):
                statement = POOL_HEADER + statement
            yield {
                "problem_id": f"leanworkbook-{theorem.group(1)}",
                "formal_statement": _close(statement),
                "informal_statement": None,
                "source": "leanworkbook",
            }


def _putnam_and_proofnet() -> Iterator[dict]:
    for line in (SOURCES / "putnam.jsonl").read_text().splitlines():
        row = json.loads(line)
        yield {
            "problem_id": f"putnam-{row['name']}",
            "formal_statement": _close(row["header"] + "\n" + row["formal_statement"]),
            "informal_statement": row["informal_statement"],
            "source": "putnam",
        }
    for line in (SOURCES / "proofnet.jsonl").read_text().splitlines():
        row = json.loads(line)
        yield {
            "problem_id": f"proofnet-{row['name']}",
            "formal_statement": _close(row["header"] + "\n" + row["formal_statement"]),
            "informal_statement": _strip_doc(row["informal_prefix"]),
            "source": "proofnet",
        }


def _formalmath() -> Iterator[dict]:
    for row in json.loads((SOURCES / "FormalMATH_lite.json").read_text()):
        yield {
            "problem_id": f"formalmath-{row['theorem_names']}",
            "formal_statement": _close(row["autoformalization"]),
            "informal_statement": row["refined_statement"],
            "source": "formalmath",
        }


def goedel_pset_rows() -> list[dict]:
    """Every pool-source statement as a Goedel-Pset-shaped row (about 15,000 rows)."""
    rows: dict[str, dict] = {}
    for row in (*_leanworkbook(), *_putnam_and_proofnet(), *_formalmath()):
        rows.setdefault(row["problem_id"], row)
    return list(rows.values())


def write_shards(
    rows: Sequence[dict], folder: Path, *, shards: int = 1, row_group_size: int = 2048
) -> list[Path]:
    """Write `rows` round-robin into `shards` parquet files."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for index in range(shards):
        part = list(rows[index::shards])
        table = pa.Table.from_pylist(part, schema=SCHEMA)
        path = folder / f"train-{index:05d}-of-{shards:05d}.parquet"
        pq.write_table(table, path, row_group_size=row_group_size)
        paths.append(path)
    return paths
