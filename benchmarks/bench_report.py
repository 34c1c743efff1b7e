"""Benchmark: the whole report on the registered size, SYNTHETIC verdicts.

244 problems x 8 samples x 2 systems (real miniF2F statements; accepted flags drawn at random,
labelled synthetic), 10,000 bootstrap resamples: load and validate every file, the per-system
tables, the paired comparison, the power table, markdown and plots, the bundle.
Target: under 5 s on this machine.

    python benchmarks/bench_report.py
"""

from __future__ import annotations

import random
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks/.out/report"
TARGET_S = 5.0


def write_runs() -> list:
    from synthetic import round0_sample, verifier_info

    from prover_assets.generation.prompts import round0_messages
    from prover_assets.problems.eval_sets import load_minif2f
    from prover_assets.records import (
        build_manifest,
        publish_records,
        write_manifest,
    )
    from prover_assets.report.runs import RunFiles

    rng = random.Random(11)
    shutil.rmtree(OUT, ignore_errors=True)
    OUT.mkdir(parents=True)
    source = ROOT / "prover_assets/data/goedel-prover-v2/minif2f.jsonl"
    problems = load_minif2f(source)
    publish_records(OUT / "problems.jsonl", problems)
    write_manifest(
        OUT,
        build_manifest(
            folder=OUT,
            asset="eval",
            inputs=[source],
            outputs=[OUT / "problems.jsonl"],
            config={},
            counts={},
            started_at="t",
        ),
    )
    info = verifier_info(
        {
            "budget_s": 180.0,
            "feedback": False,
            "statement_check": "reject",
            "gate": True,
            "axiom_check": True,
            "backend": "local",
        }
    )
    # One prompt per problem, as sampled for both systems: a pair compares like with like.
    prompts = {p.problem_id: [rng.randrange(150000) for _ in range(200)] for p in problems}
    runs = []
    for system, skill, revision in (
        ("baseline", 0.35, "dfd02e6271a58375dfbf3ece0175277cf6b6a89a"),
        ("candidate", 0.40, "sft-" + "c" * 64),
    ):
        generations, verdicts = [], []
        for problem in problems:
            difficulty = rng.random()
            messages = round0_messages(problem.formal_statement)
            for idx in range(8):
                code = f"theorem t : True := by\n  trivial -- {system} {idx}"
                completion = [rng.randrange(150000) for _ in range(400)] + [151645]
                accepted = rng.random() < skill * (1.5 - difficulty)
                generation, verdict = round0_sample(
                    problem.problem_id,
                    idx,
                    code=code,
                    completion_text="...",
                    prompt_ids=prompts[problem.problem_id],
                    completion_ids=completion,
                    messages=messages,
                    model_rev=revision,
                    rejection=None
                    if accepted
                    else rng.choice(["compile_error", "timeout", "no_code"]),
                    verifier=info,
                )
                generations.append(generation)
                verdicts.append(verdict)
        publish_records(OUT / f"{system}_generations.jsonl", generations)
        publish_records(OUT / f"{system}_verdicts.jsonl", verdicts)
        runs.append(
            RunFiles(
                system,
                "minif2f",
                16384,
                OUT / "problems.jsonl",
                OUT / f"{system}_generations.jsonl",
                OUT / f"{system}_verdicts.jsonl",
            )
        )
    return runs


def main() -> int:
    from prover_assets.report.bundle import SUMMARY_FILE
    from prover_assets.report.stages import ReportSettings, materialize_report
    from prover_assets.report.summary import read_summary

    baseline, candidate = write_runs()
    print(
        "SYNTHETIC runs: 244 problems x 8 samples x 2 systems (real miniF2F statements, random verdicts)"
    )
    settings = ReportSettings(
        experiment="benchmark",
        k=8,
        ks=(1, 2, 4, 8),
        alpha=0.05,
        resamples=10_000,
        seed=20261012,
        samples_required=8,
        power_fractions=(0.10, 0.15, 0.20),
        power_gains_points=(2.0, 4.0, 6.0, 8.0),
    )
    started = time.monotonic()
    result = materialize_report(
        OUT / "bundle",
        [(baseline, candidate)],
        [],
        prereg_path=ROOT / "configs/prereg.md",
        config_files=[ROOT / "configs/p2.yaml"],
        settings=settings,
        config={},
    )
    wall = time.monotonic() - started
    comparison = read_summary(result.folder / SUMMARY_FILE).comparisons[0]
    print(f"decision: {comparison.decision} (p = {comparison.p_value:.4g}, {comparison.table})")
    print(
        f"report with 10,000 bootstrap resamples: {wall:.2f} s; target {TARGET_S} s: ratio {wall / TARGET_S:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
