"""Benchmark: the pool candidates builder on a SYNTHETIC Goedel-Pset-sized input.

1,732,594 rows (Goedel-Pset-v1's count) in 4 parquet shards, made by meaning-preserving
mutation of the real pool statements (a fresh theorem name per row, consistent renaming of
one bound variable, inserted comments and whitespace). Labelled synthetic: the real dataset
cannot be downloaded here.

Prints rows/s, wall time and peak RSS, and the ratio to the targets (10 minutes and 1.5 GB on
a 2-core machine).

    python benchmarks/bench_pool.py [--rows N] [--workers W] [--keep]
"""

from __future__ import annotations

import argparse
import random
import re
import resource
import shutil
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from prover_assets.config import PoolSpec
from prover_assets.problems.decontamination import build_decontamination_sets
from prover_assets.problems.eval_sets import load_minif2f, load_mobench
from prover_assets.problems.pool import build_pool_candidates
from prover_assets_tests.pool_fixtures import SCHEMA, goedel_pset_rows

ROOT = Path(__file__).resolve().parents[1]
GOEDEL_PSET_ROWS = 1_732_594
TARGET_SECONDS = 600.0
TARGET_RSS_MB = 1536.0
_BINDER = re.compile(r"\((\w+) : ")


def mutate(row: dict, index: int, rng: random.Random) -> dict:
    """A new row with the same meaning: new name, one binder renamed, trivia inserted."""
    statement = row["formal_statement"]
    theorem = re.search(r"theorem\s+(\S+)", statement)
    name = f"syn_{index}"
    statement = statement.replace(theorem.group(1), name, 1) if theorem else statement
    binder = _BINDER.search(statement)
    if binder and rng.random() < 0.5:
        old = binder.group(1)
        statement = re.sub(rf"\b{re.escape(old)}\b", f"{old}_{index % 97}", statement)
    if rng.random() < 0.3:
        statement = statement.replace(" : ", f" /- c{index % 13} -/ : ", 1)
    if rng.random() < 0.3:
        statement = statement.replace(":= by sorry", ":=\n  by sorry")
    return {**row, "problem_id": f"synthetic-{index}", "formal_statement": statement}


def write_synthetic(folder: Path, rows: int, shards: int) -> list[Path]:
    base = goedel_pset_rows()
    rng = random.Random(20261012)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    per_shard = -(-rows // shards)
    index = 0
    for shard in range(shards):
        path = folder / f"train-{shard:05d}-of-{shards:05d}.parquet"
        with pq.ParquetWriter(path, SCHEMA) as writer:
            remaining = min(per_shard, rows - index)
            while remaining > 0:
                batch = [
                    mutate(base[(index + i) % len(base)], index + i, rng)
                    for i in range(min(50_000, remaining))
                ]
                writer.write_table(
                    pa.Table.from_pylist(batch, schema=SCHEMA), row_group_size=50_000
                )
                index += len(batch)
                remaining -= len(batch)
        paths.append(path)
    return paths


def peak_rss_mb() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return own, children


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=GOEDEL_PSET_ROWS)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--keep", action="store_true", help="keep the synthetic shards")
    args = parser.parse_args()
    folder = ROOT / "benchmarks/.out/pool_shards"
    started = time.monotonic()
    shards = write_synthetic(folder, args.rows, 4)
    print(
        f"SYNTHETIC input: {args.rows:,} rows in 4 shards, written in {time.monotonic() - started:.0f} s"
    )

    data = ROOT / "prover_assets/data/goedel-prover-v2"
    minif2f = load_minif2f(data / "minif2f.jsonl")
    mobench, unsupported = load_mobench(data / "MOBench.jsonl")
    sets = build_decontamination_sets(
        minif2f + mobench,
        [p.informal_prefix for p in mobench] + [u.informal_prefix for u in unsupported],
        long_ngram=13,
        short_ngram=8,
    )
    spec = PoolSpec(
        dataset="synthetic",
        revision="synthetic",
        shards=[{"path": "x", "sha256": "0" * 64}],
        seed=20261012,
        candidates=5000,
        size=2000,
        workers=args.workers,
        batch_rows=8192,
    )
    started = time.monotonic()
    build = build_pool_candidates(shards, spec, sets)
    wall = time.monotonic() - started
    own, children = peak_rss_mb()
    print(build.counts.to_result().model_dump_json())
    print(
        f"pool builder: {args.rows:,} rows in {wall:.1f} s = {args.rows / wall:,.0f} rows/s "
        f"with {args.workers} worker processes"
    )
    print(f"wall time ratio to the 600 s target: {wall / TARGET_SECONDS:.2f}")
    print(
        f"peak RSS: main {own:.0f} MB, largest worker {children:.0f} MB, "
        f"sum {own + children * args.workers:.0f} MB (upper bound); ratio to 1536 MB: "
        f"{(own + children * args.workers) / TARGET_RSS_MB:.2f}"
    )
    if not args.keep:
        shutil.rmtree(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
