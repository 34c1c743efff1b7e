"""Record the sha256 of the pre-registration block (run once, when the design is registered).

python scripts/record_prereg_hash.py configs/prereg.md
"""

import re
import sys
from pathlib import Path

from prover_assets.report.prereg import block_sha256, read_prereg

if __name__ == "__main__":
    path = Path(sys.argv[1])
    prereg = read_prereg(path)
    text = path.read_text(encoding="utf-8")
    updated = re.sub(
        r"<!-- PREREG:SHA256 [0-9a-f]{64} -->",
        f"<!-- PREREG:SHA256 {block_sha256(prereg.block)} -->",
        text,
    )
    path.write_text(updated, encoding="utf-8")
    print(block_sha256(prereg.block))
