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
run), for the product's order, likely-long first: by the measured history of each proof's
statement (`verify/history.py`, from an earlier run of the same problems, as the candidate's
evaluation has the baseline's), and by length alone (a first run: a length proxy whose rank
correlation with the service time is --proxy-correlation); also first-in-first-out and the
seed system's chunks of 64 with a barrier after each (on 1,952 samples only the product's
orders unless --compare), and longest first by the true service times, which no product
knows: the bound on what any order can reach. Samples come 8 per problem; a share --problem-share of the
log-service time's variance is the problem's (ASSUMED: no per-problem verify times were
measured for this repository), the rest the sample's, drawn afresh for the earlier run.
Also the client's own per-proof overhead: the wall time per proof of zero-delay proofs through
one worker. Targets: >= 97 % on 1,952 samples and >= 92 % on 235 (the seed: 57 %), with history.

    python benchmarks/bench_verify.py [--scale 50] [--workers 8] [--seed 0 1 2] [--samples 235]
        [--problem-share 0.6] [--compare]

With several seeds it also prints each order's median, minimum and runs at the target.
"""

from __future__ import annotations

import argparse
import itertools
import math
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from prover_assets.config import LocalLeanSettings
from prover_assets.records.hashing import sha256_text
from prover_assets.verify.backends import LocalReplBackend
from prover_assets.verify.history import CostHistory, LeanCost
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
SAMPLES_PER_PROBLEM = 8
PRODUCT = "likely-long first by measured history (product)"
FIRST_RUN = "likely-long first by length (product, no history)"
CLAIRVOYANT = "longest first by true service time (no product can)"
HEADER = "import Mathlib\nimport Aesop\nset_option maxHeartbeats 400000\nopen BigOperators Real Nat Topology Rat"


@dataclass(frozen=True)
class Workload:
    service_s: np.ndarray  # scaled, capped at the scaled budget
    proxy: np.ndarray  # a length proxy, rank-correlated with the service time
    problem: np.ndarray  # each sample's problem
    earlier_s: np.ndarray  # an earlier run of the same problems (scaled) ...
    earlier_proxy: np.ndarray  # ... and its length proxies
    budget_s: float


def draw(
    samples: int, *, scale: float, correlation: float, problem_share: float, seed: int
) -> Workload:
    rng = np.random.default_rng(seed)
    sigma = (math.log(P90_S) - math.log(MEDIAN_S)) / Z90
    problem = np.arange(samples) // SAMPLES_PER_PROBLEM
    difficulty = rng.standard_normal(problem.max() + 1)[problem]

    def one_run() -> tuple[np.ndarray, np.ndarray]:
        own = rng.standard_normal(samples)
        z = math.sqrt(problem_share) * difficulty + math.sqrt(1 - problem_share) * own
        service = np.minimum(np.exp(math.log(MEDIAN_S) + sigma * z), BUDGET_S) / scale
        noise = rng.standard_normal(samples)
        return service, np.exp(correlation * z + math.sqrt(1 - correlation**2) * noise)

    service, proxy = one_run()
    earlier, earlier_proxy = one_run()
    return Workload(service, proxy, problem, earlier, earlier_proxy, BUDGET_S / scale)


def statement_of(problem: int) -> str:
    return f"theorem bench_problem_{problem} : True"


def body_of(i: int, delay_s: float, proxy: float) -> str:
    padding = "x" * int(40 * proxy)  # the body's length stands for the code's
    return f"theorem bench_{i} : True := by\n  --@fake delay {delay_s:.6f}\n  trivial\n-- {padding}"


def earlier_run(workload: Workload) -> CostHistory:
    """The history an earlier run of the same problems left."""
    return CostHistory(
        LeanCost(
            seq=i,
            statement_sha256=sha256_text(statement_of(int(problem))),
            code_chars=len(body_of(i, seconds, proxy)),
            lean_s=float(seconds),
            timed_out=bool(seconds >= workload.budget_s),
        )
        for i, (problem, seconds, proxy) in enumerate(
            zip(workload.problem, workload.earlier_s, workload.earlier_proxy, strict=True)
        )
    )


def jobs_of(
    workload: Workload, order: CostHistory | None, *, clairvoyant: bool = False
) -> list[LeanJob]:
    """The workload's jobs, prioritised by `order` as the verifier's `prepare` does (None:
    first in, first out), or `clairvoyant`ly by their true service times: the order no product
    can know, which bounds what any order reaches."""
    jobs = []
    for i, (service, proxy, problem) in enumerate(
        zip(workload.service_s, workload.proxy, workload.problem, strict=True)
    ):
        timeout = service >= workload.budget_s
        body = body_of(i, workload.budget_s * 2 if timeout else service, proxy)
        priority = order.predicted_s(statement_of(int(problem)), len(body)) if order else 0.0
        if clairvoyant:
            priority = float(service)
        jobs.append(
            LeanJob(
                key=(i,),
                header=HEADER,
                body=body,
                theorem_name=f"bench_{i}",  # the axiom check, as for every complete proof
                budget_s=workload.budget_s,
                priority=priority,
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
    none = np.zeros(proofs)
    workload = Workload(none, np.ones(proofs), np.arange(proofs), none, none, 60.0)
    jobs = jobs_of(workload, None)
    with backend(1, 0.0) as lean:
        list(lean.run(jobs[:5]))  # start the REPL and import the header outside the clock
        started = time.monotonic()
        list(lean.run([replace(job, key=("timed", *job.key)) for job in jobs]))
        return (time.monotonic() - started) / proofs


def predicted_by_history(workload: Workload) -> np.ndarray:
    """Each sample's predicted seconds from the earlier run (the product's rule)."""
    return np.array([job.priority for job in jobs_of(workload, earlier_run(workload))])


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.corrcoef(np.argsort(np.argsort(a)), np.argsort(np.argsort(b)))[0, 1])


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=float, default=50.0)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--import-s", type=float, default=10.0, help="header import, unscaled")
    parser.add_argument("--proxy-correlation", type=float, default=0.5)
    parser.add_argument("--seed", type=int, nargs="+", default=[0], help="one run per seed")
    parser.add_argument(
        "--problem-share",
        type=float,
        default=0.6,
        help="share of the log-service time's variance that is the problem's (ASSUMED)",
    )
    parser.add_argument("--samples", type=int, nargs="+", default=[1952, 235])
    parser.add_argument(
        "--compare", action="store_true", help="also FIFO and chunk barriers on 1,952 (+3 min)"
    )
    args = parser.parse_args(argv)
    import_s = args.import_s / args.scale

    print("SYNTHETIC workload (log-normal service times, seed system's mix), REPL double")
    overhead = client_overhead_s()
    print(f"client overhead: {overhead * 1000:.2f} ms per proof (one worker, zero-delay proofs)")
    figures: dict[tuple[int, str], list[float]] = {}
    for seed, samples in itertools.product(args.seed, args.samples):
        workload = draw(
            samples,
            scale=args.scale,
            correlation=args.proxy_correlation,
            problem_share=args.problem_share,
            seed=seed,
        )
        unscaled = workload.service_s * args.scale
        timeouts = int((workload.service_s >= workload.budget_s).sum())
        print(
            f"\nseed {seed}, {samples} samples: median {statistics.median(unscaled):.2f} s, "
            f"p90 {np.percentile(unscaled, 90):.1f} s, mean {unscaled.mean():.1f} s, "
            f"{timeouts} at the {BUDGET_S:.0f} s budget ({100 * timeouts / samples:.1f} %), "
            f"scaled 1/{args.scale:g}; proxy rank correlation "
            f"{spearman(workload.proxy, workload.service_s):.2f}, history rank correlation "
            f"{spearman(predicted_by_history(workload), workload.service_s):.2f}"
        )
        orders: dict[str, Callable[[], tuple[float, dict]]] = {
            PRODUCT: lambda w=workload: run(
                jobs_of(w, earlier_run(w)), args.workers, import_s, chunk=None
            ),
            FIRST_RUN: lambda w=workload: run(
                jobs_of(w, CostHistory()), args.workers, import_s, chunk=None
            ),
            CLAIRVOYANT: lambda w=workload: run(
                jobs_of(w, None, clairvoyant=True), args.workers, import_s, chunk=None
            ),
            "work-stealing, first in first out": lambda w=workload: run(
                jobs_of(w, None), args.workers, import_s, chunk=None
            ),
            f"chunks of {CHUNK} with barriers (seed system)": lambda w=workload: run(
                jobs_of(w, None), args.workers, import_s, chunk=CHUNK
            ),
        }
        if samples == 1952 and not args.compare:
            orders = dict(list(orders.items())[:3])
        ideal = max(workload.service_s.sum() / args.workers, workload.service_s.max())
        for name, measure in orders.items():
            wall, outcomes = measure()
            utilisation = workload.service_s.sum() / (args.workers * wall)
            figures.setdefault((samples, name), []).append(utilisation)
            print(
                f"  {name:50s} wall {wall:6.1f} s = {wall / ideal:.2f} x the lower bound "
                f"{ideal:5.1f} s  "
                f"utilisation {100 * utilisation:5.1f} %  {outcomes}"
            )
    for samples, target in ((1952, TARGET), (235, TARGET_235)):
        if (samples, PRODUCT) in figures:
            figure = statistics.median(figures[(samples, PRODUCT)])
            print(
                f"\nutilisation on {samples:,} samples, median of {len(args.seed)} seed(s): "
                f"{100 * figure:.1f} % = {figure / target:.3f} x the {100 * target:.0f} % "
                f"target, {figure / SEED_UTILISATION:.2f} x the seed system's "
                f"{100 * SEED_UTILISATION:.0f} %"
            )
            for name in (PRODUCT, FIRST_RUN, CLAIRVOYANT):
                runs = figures.get((samples, name), [])
                print(
                    f"  {name:50s} median {100 * statistics.median(runs):5.1f} %, "
                    f"min {100 * min(runs):5.1f} %, {sum(u >= target for u in runs)} of "
                    f"{len(runs)} at or above the target"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
