"""Benchmark: header imports per REPL process in a pool round of the demo.

The demo's 60 pool statements (one header of their own, `set_option maxHeartbeats 400000`),
one sample each, verified by its simulated Lean settings (2 workers and the warm spare) through
`materialize_verdicts` with the real self-test. Each import is an `import Mathlib` on real Lean
(about 10 s and several GB); the reference is one per REPL process. Prints the verdict step's
`header_imports` and the ratio to the reference.

    python benchmarks/bench_header_imports.py
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
from pathlib import Path

import pyarrow.parquet as pq

from prover_assets.config import SimulatedLeanSettings
from prover_assets.lean.statements import parse_statement
from prover_assets.records import publish_records
from prover_assets.verify.backends import backend_from_settings
from prover_assets.verify.self_test import self_test
from prover_assets.verify.stages import materialize_verdicts
from prover_assets.verify.verifier import StrictVerifier, VerifierPolicy
from prover_assets_tests.factories import make_generation, make_problem

POOL = Path(__file__).parents[1] / "prover_assets/data/demo/pool-00000-of-00001.parquet"
SETTINGS = SimulatedLeanSettings(
    workers=2, budget_s=30.0, header_timeout_s=30.0, commit_every=8, rule="planted_tactic", seed=1
)


def main() -> int:
    rows = pq.read_table(POOL).to_pylist()
    problems = [
        make_problem(
            r["problem_id"],
            r["formal_statement"],
            header=parse_statement(r["formal_statement"]).header,
        )
        for r in rows
    ]
    samples = [
        make_generation(
            r["problem_id"],
            0,
            completion_text=f"```lean4\n{r['formal_statement'].rsplit('sorry', 1)[0]}\n  nlinarith\n```",
        )
        for r in rows
    ]
    root = Path(tempfile.mkdtemp(prefix="bench-imports-"))
    publish_records(root / "problems.jsonl", problems)
    publish_records(root / "generations.jsonl", samples)

    def require_self_test(verifier: StrictVerifier, header: str) -> None:
        if not (outcome := self_test(verifier.backend, SETTINGS.budget_s, header)).passed:
            raise SystemExit(f"self-test failed: {outcome.description}")

    with backend_from_settings(SETTINGS) as backend:
        verifier = StrictVerifier(
            backend, VerifierPolicy(budget_s=SETTINGS.budget_s, feedback=False)
        )
        step = materialize_verdicts(
            root / "verdicts",
            generations_file=root / "generations.jsonl",
            problems_file=root / "problems.jsonl",
            open_verifier=lambda: contextlib.nullcontext(verifier),
            self_test=require_self_test,
            commit_every=SETTINGS.commit_every,
        )
    imports = step.result.header_imports
    headers = len({p.header for p in problems})
    print(
        f"{len(samples)} samples, {headers} distinct header(s), {step.result.verified_now} verified"
    )
    print(f"header imports: {imports} (total {sum(imports.values())})")
    print(f"ratio to the reference (1 per REPL process): {max(imports.values()) / headers:.2f}")
    return 0 if max(imports.values()) == headers else 1


if __name__ == "__main__":
    sys.exit(main())
