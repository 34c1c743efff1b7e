"""Benchmark: the whole demo (`python -m prover_assets.demo` on configs/demo.yaml: preflight,
full round) on a loaded host, on the project's thread count (`prover_assets/cpu_threads.py`)
against torch's default (a thread per core, the reference, set as `gpu.settings.cpu_threads`).

The load: one busy process per core but one, for the whole measurement. The format tuning is
copied from the shipped entry (prover_assets_tests/data/demo-tunings/), as the tests copy it, so
the walls are the loop's sampling, verification, training and export;
`benchmarks/bench_threads.py` measures the tuning alone. Each side runs in a fresh
DAGSTER_HOME and data root, the reference first. Prints each side's wall and the ratio.

    python benchmarks/bench_demo_threads.py
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from bench_threads import busy_cores

ROOT = Path(__file__).resolve().parents[1]
SHIPPED_TUNINGS = ROOT / "prover_assets_tests" / "data" / "demo-tunings"


def demo_wall(work: Path, cpu_threads: int | None) -> float:
    """One whole demo in `work`, with `cpu_threads` (None: the project's rule); its wall."""
    raw = yaml.safe_load((ROOT / "configs" / "demo.yaml").read_text())
    spec = raw["resources"]["experiment"]["config"]["spec"]
    spec["data_root"] = str(work / "data")
    spec["demo"]["shared_tunings"] = str(work / "tunings")
    shutil.copytree(SHIPPED_TUNINGS, work / "tunings")
    if cpu_threads is not None:
        raw["resources"]["gpu"]["config"]["settings"]["cpu_threads"] = cpu_threads
    (work / "config.yaml").write_text(yaml.safe_dump(raw))
    (work / "home").mkdir()
    shutil.copy(ROOT / "dagster.yaml", work / "home" / "dagster.yaml")
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")},
        "DAGSTER_HOME": str(work / "home"),
        "PROVER_ASSETS_CONFIG": str(work / "config.yaml"),
    }
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "prover_assets.demo"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"the demo failed ({done.returncode}):\n{done.stdout[-3000:]}")
    return wall


def main() -> int:
    from prover_assets.cpu_threads import usable_cores

    cores = usable_cores()
    work = Path(tempfile.mkdtemp(prefix="bench-demo-threads-"))
    with busy_cores(cores - 1) as load:
        (work / "default").mkdir()
        reference = demo_wall(work / "default", cores)
        (work / "project").mkdir()
        project = demo_wall(work / "project", None)
    print(f"load: {load} busy processes on {cores} cores")
    print(f"torch's default ({cores} threads): demo wall {reference:.0f} s")
    print(f"the project's rule: demo wall {project:.0f} s")
    print(f"ratio (project / torch's default): {project / reference:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
