"""The names of the graph's jobs: `jobs.py` builds each (Dagster), and the domain names them
here, never again: the preflight's gate refuses a heavy job without a passing preflight, the demo
launches them in order."""

from __future__ import annotations

__all__ = [
    "BASELINE",
    "CANDIDATE_EVAL",
    "FULL_ROUND",
    "HEAVY",
    "ITERATION",
    "OPERATIONS",
    "POOL_ROUND",
    "PREFLIGHT",
    "PROBLEMS",
    "REPORT",
    "SFT",
]

PREFLIGHT = "preflight"
PROBLEMS = "problems"
BASELINE = "baseline"
POOL_ROUND = "pool_round"
SFT = "sft"
CANDIDATE_EVAL = "candidate_eval"
REPORT = "report"
FULL_ROUND = "full_round"  # a graph of one iteration
ITERATION = "iteration"  # a graph of several: one iteration whole
OPERATIONS = "operations"

# The jobs that spend GPU and Lean hours: each refuses to launch without a passing preflight.
HEAVY = frozenset({BASELINE, POOL_ROUND, SFT, CANDIDATE_EVAL, FULL_ROUND, ITERATION})
