"""Benchmark: the SFT builder on a SYNTHETIC input of the seed system's size.

400 pool problems (real Lean Workbook statements) x 8 samples = 3,200 generations of about
33 KB each (~106 MB of JSONL, completions of ~3,400 token ids), 45% accepted; labelled
synthetic. The build (read, filter, write shards, read back through the trainer's dataset and
collate) runs in a fresh process that reports its own wall time and peak RSS.
Reference: the seed system took 6.0 s and 671 MB; the targets are <= 2 s and <= 220 MB.

    python benchmarks/bench_sft.py
"""

from __future__ import annotations

import json
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks/.out/sft"
SEED_WALL_S, SEED_RSS_MB = 6.0, 671.0
TARGET_WALL_S, TARGET_RSS_MB = 2.0, 220.0
EOS = 151645


def write_input() -> None:
    from synthetic import round0_sample, verifier_info

    from prover_assets.config import SftSpec
    from prover_assets.lean.protocol import GOEDEL_HEADER
    from prover_assets.lean.statements import alpha_sha, normalise_statement, statement_sha
    from prover_assets.problems.decontamination import DecontaminationSets
    from prover_assets.records import (
        Message,
        Problem,
        publish_records,
    )
    from prover_assets_tests.pool_fixtures import goedel_pset_rows

    rng = random.Random(7)
    OUT.mkdir(parents=True, exist_ok=True)
    statements = [r for r in goedel_pset_rows() if r["source"] == "leanworkbook"][:400]
    problems = []
    for row in statements:
        text = normalise_statement(row["formal_statement"])
        problems.append(
            Problem(
                problem_id=row["problem_id"],
                source="synthetic",
                split="train",
                formal_statement=text,
                informal_prefix="",
                statement_sha=statement_sha(text),
                alpha_sha=alpha_sha(text),
                header=GOEDEL_HEADER.strip(),
            )
        )
    publish_records(OUT / "pool.jsonl", problems)
    generations, verdicts = [], []
    info = verifier_info({"budget_s": 180.0})
    for problem in problems:
        signature = problem.formal_statement[
            problem.formal_statement.index("theorem") :
        ].removesuffix(" sorry")
        for idx in range(8):
            tactic = f"nlinarith [sq_nonneg (a - {idx}), sq_nonneg (b + {idx % 3})]"
            plan = "We reason step by step. " * 320
            text = f"{plan}\n```lean4\n{signature}\n  {tactic}\n```"
            code = GOEDEL_HEADER + f"{signature}\n  {tactic}"
            completion = [rng.randrange(100, 150000) for _ in range(3400)] + [EOS]
            generation, verdict = round0_sample(
                problem.problem_id,
                idx,
                code=code,
                completion_text=text,
                prompt_ids=[rng.randrange(100, 150000) for _ in range(300)],
                completion_ids=completion,
                messages=[Message(role="user", content="p")],
                model_rev="0" * 40,
                rejection=None if rng.random() < 0.45 else "compile_error",
                verifier=info,
            )
            generations.append(generation)
            verdicts.append(verdict)
    publish_records(OUT / "generations.jsonl", generations)
    publish_records(OUT / "verdicts.jsonl", verdicts)
    sets = DecontaminationSets(
        frozenset(),
        frozenset(),
        frozenset(),
        13,
        8,
        frozenset(),
        frozenset(),
        frozenset(),
        frozenset(),
    )
    (OUT / "sets.json").write_text(json.dumps(sets.to_json()))
    model = OUT / "tokenizer"
    model.mkdir(exist_ok=True)
    (model / "generation_config.json").write_text(json.dumps({"eos_token_id": [EOS, 151643]}))
    (model / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|im_end|>"}))
    (model / "tokenizer.json").write_text(
        json.dumps({"added_tokens": [{"id": EOS, "content": "<|im_end|>"}]})
    )
    (OUT / "spec.json").write_text(
        SftSpec(
            cap=16384,
            max_per_problem=4,
            exclude_solved_all=True,
            fill_duplicates=False,
            max_seq_len=18432,
        ).model_dump_json()
    )


def build_once() -> None:
    """Runs in a fresh process: the build alone, its wall time and peak RSS."""
    import shutil

    started = time.monotonic()
    from prover_assets.config import SftSpec
    from prover_assets.sft.stages import materialize_shards

    imported = time.monotonic()
    shutil.rmtree(OUT / "shards", ignore_errors=True)
    spec = SftSpec.model_validate_json((OUT / "spec.json").read_text())
    result = materialize_shards(
        OUT / "shards",
        generation_files=[OUT / "generations.jsonl"],
        verdict_files=[OUT / "verdicts.jsonl"],
        pool_file=OUT / "pool.jsonl",
        sets_file=OUT / "sets.json",
        base_model_dir=OUT / "tokenizer",
        spec=spec,
        samples_per_problem=8,
    )
    finished = time.monotonic()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        json.dumps(
            {
                "wall_s": finished - started,
                "build_s": finished - imported,
                "peak_rss_mb": rss,
                "counts": result.result.model_dump(mode="json"),
            }
        )
    )


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--build-once":
        build_once()
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "--write-input":
        write_input()
        return 0
    started = time.monotonic()
    # Each step in its own process: a forked child counts its parent's pages in its peak RSS.
    subprocess.run([sys.executable, __file__, "--write-input"], check=True)
    size = (OUT / "generations.jsonl").stat().st_size / 1e6
    print(
        f"SYNTHETIC input: 3,200 generations, {size:.0f} MB, written in {time.monotonic() - started:.0f} s"
    )
    runs = []
    for _ in range(3):
        output = subprocess.run(
            [sys.executable, __file__, "--build-once"], capture_output=True, text=True, check=True
        )
        runs.append(json.loads(output.stdout.strip().splitlines()[-1]))
    best = min(runs, key=lambda r: r["build_s"])
    counts = best["counts"]
    print(
        f"rows written {counts['counts']['written']} of {counts['counts']['candidates']} "
        f"candidates; read back: {counts['read_back']}"
    )
    print(
        f"build wall: {best['build_s']:.2f} s (best of 3: read, filter, write, read back, manifest) vs seed "
        f"{SEED_WALL_S} s: {SEED_WALL_S / best['build_s']:.1f}x faster; target {TARGET_WALL_S} s: ratio "
        f"{best['build_s'] / TARGET_WALL_S:.2f}"
    )
    walls = ", ".join(f"{run['wall_s']:.2f}" for run in runs)
    print(f"process wall with imports: {best['wall_s']:.2f} s (all runs: {walls})")
    print(
        f"peak RSS: {best['peak_rss_mb']:.0f} MB vs seed {SEED_RSS_MB:.0f} MB: {SEED_RSS_MB / best['peak_rss_mb']:.1f}x "
        f"smaller; target {TARGET_RSS_MB:.0f} MB: ratio {best['peak_rss_mb'] / TARGET_RSS_MB:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
