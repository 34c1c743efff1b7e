"""Benchmark: the canary's cost per proof (one more command after each job's last).

Through the real client and worker on the REPL double (a warm process, the pty, the env count):
the seconds of `ReplProcess.canary` alone, and of whole jobs (proof, `#print axioms`, canary)
for scale. The reference is the seed system's median seconds per proof on real
Lean, 2.5 s (`shared/docs/LEAN_VERIFIER.md`): the canary's share of a proof is its seconds over
that. On real Lean the canary also costs Lean's elaboration of `#check <name>` for a name that
resolves to nothing, which the double does not model (no Lean here).

    python benchmarks/bench_canary.py [--jobs N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from prover_assets.lean.containment import containment
from prover_assets.lean.repl import ReplProcess
from prover_assets.verify.worker import LeanJob, ReplWorker
from prover_assets_tests.lean_double import DOUBLE

REFERENCE_PROOF_S = 2.5  # the seed system's median per proof on real Lean
HEADER = "import Mathlib"


def canary_seconds(rounds: int) -> list[float]:
    """Each canary's round trip on one warm REPL."""
    process = ReplProcess(DOUBLE, sandbox=False)
    process.start()
    try:
        env = process.send({"cmd": HEADER}, 30)["env"]
        seconds = []
        for _ in range(rounds):
            started = time.perf_counter()
            process.canary(env, 30)
            seconds.append(time.perf_counter() - started)
        return seconds
    finally:
        process.close()


def job_seconds(jobs: int) -> list[float]:
    """Each whole job's seconds on one worker (no recycling within the run)."""
    worker = ReplWorker(
        0,
        lambda: ReplProcess(DOUBLE, sandbox=False),
        header_timeout_s=30,
        check_timeout_s=30,
        recycle_after=10 * jobs,
        memory_ceiling_mb=float("inf"),
    )
    body = "theorem t (x : ℕ) (h₀ : 0 < x) : 0 < x + 1 := by\n  omega"
    worker.warm(HEADER)
    seconds = []
    try:
        for i in range(jobs):
            job = LeanJob(("bench", i), HEADER, body, "t", 30.0, statement_check=None)
            started = time.perf_counter()
            worker.run(job)
            seconds.append(time.perf_counter() - started)
    finally:
        worker.close()
    return seconds


def start_seconds(sandbox: bool, starts: int = 10) -> float:
    """The median seconds from starting a REPL to its first answer."""
    seconds = []
    for _ in range(starts):
        process = ReplProcess(DOUBLE, sandbox=sandbox)
        started = time.perf_counter()
        process.start()
        try:
            process.send({"cmd": HEADER}, 30)
            seconds.append(time.perf_counter() - started)
        finally:
            process.close()
    return statistics.median(seconds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=300)
    args = parser.parse_args()
    canary = statistics.median(canary_seconds(args.jobs))
    job = statistics.median(job_seconds(args.jobs))
    print(f"{args.jobs} canaries, {args.jobs} jobs, REPL double, one warm process")
    print(f"canary per proof: {canary * 1e3:.2f} ms (median); a whole job: {job * 1e3:.2f} ms")
    print(f"share of a job on the double: {canary / job:.1%}")
    print(
        f"ratio to the reference ({REFERENCE_PROOF_S} s a proof on real Lean): {canary / REFERENCE_PROOF_S:.5f}"
    )
    held = containment()
    if held.mechanism != "bwrap":
        print(f"sandbox start cost: not measured, {held.how}")
        return 0
    bare, boxed = start_seconds(sandbox=False), start_seconds(sandbox=True)
    print(f"REPL start to first answer: {bare * 1e3:.0f} ms bare, {boxed * 1e3:.0f} ms in bwrap")
    return 0


if __name__ == "__main__":
    sys.exit(main())
