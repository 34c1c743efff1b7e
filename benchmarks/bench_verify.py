"""Benchmark: verifier worker utilisation on the seed system's service-time mix (SYNTHETIC).

Service times are drawn log-normal with the seed system's median 2.5 s and p90 38.6 s, capped at
the 180 s budget (proofs that reach it are timeouts: the client kills the REPL and starts a fresh
one, which re-imports the header), then divided by --scale so that the registered workload runs
in about a minute. Every proof goes through the product's LocalReplBackend (work-stealing pool,
REPL processes, JSON over pipes, default LocalLeanSettings: the warm spare included) to the REPL
double, which sleeps for the proof's service time (`--@fake delay`) and answers `#print axioms`.
The header import is modelled as --import-s seconds before scaling; the double's own
interpreter start-up (about 0.12 s, 6 s unscaled at --scale 50) comes on top. The workers are
warmed before the clock starts, as the product's self-test warms them before every batch.

    utilisation = sum of service times / (workers x wall)

Reported for 1,952 samples (244 x 8, the registered evaluation) and 235 (the seed system's
run), for the product's order (likely-long first, by a length proxy whose rank correlation with
the service time is --proxy-correlation), first-in-first-out, and the seed system's chunks of
64 with a barrier after each (on 1,952 samples only the product's order unless --compare). Also the client's own per-proof overhead: the wall time per proof
of zero-delay proofs through one worker. Targets: >= 97 % on 1,952 samples and >= 92 % on 235 (the seed: 57 %).

    python benchmarks/bench_verify.py [--scale 50] [--workers 8] [--seed 0] [--compare]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from prover_assets.config import LocalLeanSettings
from prover_assets.verify.backends import LocalReplBackend
from prover_assets.verify.worker import LeanJob
from prover_assets_tests.factories import make_pins
from prover_assets_tests.lean_double import DOUBLE

ROOT = Path(__file__).resolve().parents[1]
MEDIAN_S, P90_S, BUDGET_S = 2.5, 38.6, 180.0
Z90 = 1.2815515655446004  # the standard normal's 90th percentile
SEED_UTILISATION = 0.57
TARGET = 0.97
TARGET_235 = 0.92
CHUNK = 64
HEADER = "import Mathlib\nimport Aesop\nset_option maxHeartbeats 400000\nopen BigOperators Real Nat Topology Rat"


@dataclass(frozen=True)
class Workload:
    service_s: np.ndarray  # scaled, capped at the scaled budget
    proxy: np.ndarray  # a length proxy, rank-correlated with the service time
    budget_s: float


def draw(samples: int, *, scale: float, correlation: float, seed: int) -> Workload:
    rng = np.random.default_rng(seed)
    sigma = (math.log(P90_S) - math.log(MEDIAN_S)) / Z90
    z = rng.standard_normal(samples)
    service = np.minimum(np.exp(math.log(MEDIAN_S) + sigma * z), BUDGET_S) / scale
    noise = rng.standard_normal(samples)
    proxy = np.exp(correlation * z + math.sqrt(1 - correlation**2) * noise)
    return Workload(service, proxy, BUDGET_S / scale)


def jobs_of(workload: Workload, *, longest_first: bool) -> list[LeanJob]:
    jobs = []
    for i, (service, proxy) in enumerate(zip(workload.service_s, workload.proxy, strict=True)):
        timeout = service >= workload.budget_s
        delay = workload.budget_s * 2 if timeout else service
        padding = "x" * int(40 * proxy)  # the body's length is the product's priority
        body = (
            f"theorem bench_{i} : True := by\n  --@fake delay {delay:.6f}\n  trivial\n-- {padding}"
        )
        jobs.append(
            LeanJob(
                key=(i,),
                header=HEADER,
                body=body,
                theorem_name=f"bench_{i}",  # the axiom check, as for every complete proof
                budget_s=workload.budget_s,
                priority=float(len(body)) if longest_first else 0.0,
            )
        )
    return jobs


def backend(workers: int, import_s: float) -> LocalReplBackend:
    """The product's local backend with the default LocalLeanSettings (recycling, memory ceiling,
    retries); no sandbox, so that `unshare` costs are not charged to the client."""
    default = {name: field.default for name, field in LocalLeanSettings.model_fields.items()}
    return LocalReplBackend(
        [*DOUBLE, "--import-delay", f"{import_s:.6f}"],
        pins=make_pins(),
        workers=workers,
        memory_ceiling_mb=default["memory_ceiling_mb"],
        recycle_after=default["recycle_after"],
        retries=default["infrastructure_retries"],
        check_timeout_s=default["check_timeout_factor"] * default["budget_s"],
        sandbox=False,
    )


def run(
    jobs: Sequence[LeanJob], workers: int, import_s: float, *, chunk: int | None
) -> tuple[float, dict]:
    """Wall seconds to verify `jobs`, the workers warmed first as the product's self-test warms
    them before a batch (REPLs started, header imported; restarts after timeouts inside the
    clock, from the warm spare)."""
    outcomes: dict[str, int] = {}
    with backend(workers, import_s) as lean:
        lean.warm(HEADER)
        started = time.monotonic()
        batches = [jobs[i : i + chunk] for i in range(0, len(jobs), chunk)] if chunk else [jobs]
        for batch in batches:
            for result in lean.run(batch):
                kind = result.failure or "answered"
                outcomes[kind] = outcomes.get(kind, 0) + 1
        wall = time.monotonic() - started
    return wall, outcomes


def client_overhead_s(proofs: int = 300) -> float:
    """Wall seconds per zero-delay proof through one worker: the client, the pipes and the
    double together (proof and `#print axioms`), so an upper bound on the client's own."""
    workload = Workload(np.zeros(proofs), np.ones(proofs), 60.0)
    jobs = jobs_of(workload, longest_first=False)
    with backend(1, 0.0) as lean:
        list(lean.run(jobs[:5]))  # start the REPL and import the header outside the clock
        started = time.monotonic()
        list(lean.run([replace(job, key=("timed", *job.key)) for job in jobs]))
        return (time.monotonic() - started) / proofs


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.corrcoef(np.argsort(np.argsort(a)), np.argsort(np.argsort(b)))[0, 1])


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=float, default=50.0)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--import-s", type=float, default=10.0, help="header import, unscaled")
    parser.add_argument("--proxy-correlation", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--compare", action="store_true", help="also FIFO and chunk barriers on 1,952 (+3 min)"
    )
    args = parser.parse_args(argv)
    import_s = args.import_s / args.scale

    print("SYNTHETIC workload (log-normal service times, seed system's mix), REPL double")
    overhead = client_overhead_s()
    print(f"client overhead: {overhead * 1000:.2f} ms per proof (one worker, zero-delay proofs)")
    figures: dict[tuple[int, str], float] = {}
    for samples in (1952, 235):
        workload = draw(
            samples, scale=args.scale, correlation=args.proxy_correlation, seed=args.seed
        )
        unscaled = workload.service_s * args.scale
        timeouts = int((workload.service_s >= workload.budget_s).sum())
        print(
            f"\n{samples} samples: median {statistics.median(unscaled):.2f} s, "
            f"p90 {np.percentile(unscaled, 90):.1f} s, mean {unscaled.mean():.1f} s, "
            f"{timeouts} at the {BUDGET_S:.0f} s budget ({100 * timeouts / samples:.1f} %), "
            f"scaled 1/{args.scale:g}; proxy rank correlation "
            f"{spearman(workload.proxy, workload.service_s):.2f}"
        )
        orders: dict[str, Callable[[], tuple[float, dict]]] = {
            "work-stealing, likely-long first (product)": lambda w=workload: run(
                jobs_of(w, longest_first=True), args.workers, import_s, chunk=None
            ),
            "work-stealing, first in first out": lambda w=workload: run(
                jobs_of(w, longest_first=False), args.workers, import_s, chunk=None
            ),
            f"chunks of {CHUNK} with barriers (seed system)": lambda w=workload: run(
                jobs_of(w, longest_first=False), args.workers, import_s, chunk=CHUNK
            ),
        }
        if samples == 1952 and not args.compare:
            orders = dict(list(orders.items())[:1])
        ideal = max(workload.service_s.sum() / args.workers, workload.service_s.max())
        for name, measure in orders.items():
            wall, outcomes = measure()
            utilisation = workload.service_s.sum() / (args.workers * wall)
            figures[(samples, name)] = utilisation
            print(
                f"  {name:45s} wall {wall:6.1f} s (lower bound {ideal:5.1f} s)  "
                f"utilisation {100 * utilisation:5.1f} %  {outcomes}"
            )
    product = figures[(1952, "work-stealing, likely-long first (product)")]
    small = figures[(235, "work-stealing, likely-long first (product)")]
    print(
        f"\nutilisation on 1,952 samples: {100 * product:.1f} % = {product / TARGET:.3f} x the "
        f"{100 * TARGET:.0f} % target, {product / SEED_UTILISATION:.2f} x the seed system's "
        f"{100 * SEED_UTILISATION:.0f} %; on 235: {100 * small:.1f} % = "
        f"{small / TARGET_235:.3f} x the {100 * TARGET_235:.0f} % target"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
