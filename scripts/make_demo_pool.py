"""Write the demo's pool shard: a slice of real Lean Workbook statements in the Goedel-Pset
shape (prover_assets/data/demo/). Run from the project root; then record the printed sha256
in configs/demo.yaml (pool.shards[0].sha256)."""

from pathlib import Path

from prover_assets.records import sha256_file
from prover_assets_tests.pool_fixtures import goedel_pset_rows, write_shards

ROWS = 60

if __name__ == "__main__":
    rows = [row for row in goedel_pset_rows() if row["source"] == "leanworkbook"][:ROWS]
    folder = Path("prover_assets/data/demo")
    (path,) = write_shards(rows, folder, shards=1, row_group_size=32)
    final = folder / "pool-00000-of-00001.parquet"
    path.rename(final)
    print(final, sha256_file(final))
