"""Benchmark: TransformersEngine's milliseconds per generated token, its sampling loop (a
problem's samples together) against HF `generate` (the reference: the engine's `_one`, one
`generate` call per sample, as the engine sampled before the loop).

The tiny demo model (Qwen3 architecture, hidden 128, 2 layers, vocab 1024, untrained: it
rarely stops before the budget) on CPU, in float32, at the demo's sampling (temperature 0.6,
top-p 0.95, no top-k); --problems times --rows samples of up to --max-tokens tokens each (the
demo samples 4 a problem), each problem's rows through both paths in turn (so that a load on
the machine weighs on both alike), whose completions must be the same tokens. Prints each
path's ms per generated token over all samples and the ratio of the loop's to the reference's;
fails when a completion differs.

    python benchmarks/bench_transformers_engine.py [--problems 3] [--rows 4] [--max-tokens 128]
        [--threads N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from prover_assets.demo.tiny_model import build_tiny_model
from prover_assets.generation.engines import GenerationRequest, TransformersEngine
from prover_assets.records import SamplingSettings

DEMO_SAMPLING = SamplingSettings(temperature=0.6, top_p=0.95, top_k=0)
PROMPT = (
    "Complete the following Lean 4 code:\n\n```lean4\nimport Mathlib\n\n"
    "theorem demo (a b : ℕ) (h : a ≤ b) : a + (b - a) = b := by\n"
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", type=int, default=3)
    parser.add_argument("--rows", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument(
        "--threads", type=int, default=None, help="torch threads (default: torch's)"
    )
    args = parser.parse_args()

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    folder = build_tiny_model(
        Path(tempfile.mkdtemp(prefix="bench-engine-")) / "model",
        hidden_size=128,
        layers=2,
        vocab_size=1024,
    )
    engine = TransformersEngine(folder, DEMO_SAMPLING)
    if not engine.uses_loop:
        print("the engine samples the tiny model through generate: nothing to compare")
        return 1
    prompt = tuple(engine.tokenizer(PROMPT)["input_ids"])
    engine._one(GenerationRequest(("warm",), prompt, 8, 0))  # first-call costs out of the clock

    seconds = {"loop": 0.0, "generate": 0.0}
    tokens = 0
    for problem in range(args.problems):
        requests = [
            GenerationRequest(("bench", problem, row), prompt, args.max_tokens, problem * 97 + row)
            for row in range(args.rows)
        ]
        start = time.perf_counter()
        batched = list(engine.generate(requests))
        seconds["loop"] += time.perf_counter() - start
        start = time.perf_counter()
        alone = [engine._one(request) for request in requests]
        seconds["generate"] += time.perf_counter() - start
        if batched != alone:
            print(f"problem {problem}: a completion of the loop differs from generate's")
            return 1
        tokens += sum(len(result.completion_ids) for result in alone)

    loop_ms, generate_ms = (seconds[path] * 1000 / tokens for path in ("loop", "generate"))
    print(
        f"{args.problems} problems x {args.rows} samples, {tokens} tokens, prompt {len(prompt)} "
        f"tokens, torch threads {torch.get_num_threads()}; every completion identical"
    )
    print(f"generate (reference): {generate_ms:.2f} ms/token")
    print(f"sampling loop:        {loop_ms:.2f} ms/token")
    print(f"ratio to the reference: {loop_ms / generate_ms:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
