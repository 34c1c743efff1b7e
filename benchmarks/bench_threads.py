"""Benchmark: the demo's format tuning on a loaded host, on the project's thread count
(`prover_assets/cpu_threads.py`, for configs/demo.yaml on this host) against torch's default
(one thread per core, the reference: what every torch process took before the project set it).

The load: one busy process per core but one (another run, a test suite, the Lean workers), for
the whole measurement. Each side tunes the untuned demo model (configs/demo.yaml's tiny model,
hidden 128, 2 layers, vocab 1024) for --steps steps on the first 24 miniF2F statements, in a
fresh process (torch reads its default once), the two sides in turn --rounds times so that a
change of the load weighs on both alike. Prints each side's steps per second (the median of its
rounds) and the ratio of the project's to the reference's. Issue 30 measured, on this 2-core
machine with a demo running beside: 2.3 steps/s on one thread against 0.3 on torch's default.

    python benchmarks/bench_threads.py [--steps 40] [--rounds 2]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "configs" / "demo.yaml"

TUNE = """
import json, shutil, sys, time
from pathlib import Path
import torch
from prover_assets.demo.tiny_model import teach_output_format
from prover_assets.problems.eval_sets import load_minif2f
model, work, data, steps, threads = sys.argv[1:6]
if threads != "default":
    torch.set_num_threads(int(threads))
folder = Path(work)
shutil.rmtree(folder, ignore_errors=True)
shutil.copytree(model, folder)
statements = [p.formal_statement for p in load_minif2f(data)[:24]]
started = time.monotonic()
teach_output_format(folder, statements, steps=int(steps), seed=20261012)
print(json.dumps({"steps_per_s": int(steps) / (time.monotonic() - started),
                  "threads": torch.get_num_threads()}))
"""


def busy() -> None:
    while True:
        pass


@contextlib.contextmanager
def busy_cores(count: int) -> Iterator[int]:
    """`count` processes spinning on the CPU while inside (the other load on the host)."""
    load = [multiprocessing.Process(target=busy, daemon=True) for _ in range(count)]
    for process in load:
        process.start()
    try:
        yield count
    finally:
        for process in load:
            process.kill()


def project_threads() -> int:
    from prover_assets.config import load_run_config
    from prover_assets.cpu_threads import cpu_threads

    config = load_run_config(DEMO)
    return cpu_threads(config.gpu, config.lean, environ={}).count


def tune(model: Path, work: Path, steps: int, threads: str) -> dict:
    from prover_assets.config import resolve_path

    data = resolve_path("package:goedel-prover-v2/minif2f.jsonl", "minif2f")
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    done = subprocess.run(
        [sys.executable, "-c", TUNE, str(model), str(work), str(data), str(steps), threads],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    from prover_assets.demo.tiny_model import build_tiny_model

    work = Path(tempfile.mkdtemp(prefix="bench-threads-"))
    model = build_tiny_model(work / "model", hidden_size=128, layers=2, vocab_size=1024)
    ours = project_threads()
    rates: dict[str, list[float]] = {"default": [], str(ours): []}
    threads: dict[str, int] = {}
    with busy_cores(os.cpu_count() - 1) as load:
        for _ in range(args.rounds):
            for side in rates:
                measured = tune(model, work / "tuned", args.steps, side)
                rates[side].append(measured["steps_per_s"])
                threads[side] = measured["threads"]
    reference = statistics.median(rates["default"])
    project = statistics.median(rates[str(ours)])
    print(f"load: {load} busy processes on {os.cpu_count()} cores; {args.steps} steps a run")
    print(f"torch's default ({threads['default']} threads): {reference:.2f} steps/s")
    print(f"the project's ({threads[str(ours)]} threads): {project:.2f} steps/s")
    print(f"ratio (project / torch's default): {project / reference:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
