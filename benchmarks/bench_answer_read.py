"""Benchmark: reading one large answer from the REPL, in the pieces a pseudo-terminal gives.

An answer arrives in reads of at most 4 KiB from the terminal; `AnswerBuffer` resumes its
search for the blank line where the last one stopped, so its time grows linearly with the
answer. The reference is the reading it replaced (a rescan of the whole buffer after each read,
kept as the tests' oracle, `lean_double.rescanning_take`), which grows with the square: issue 47 measured 1 MB 0.12 s,
3 MB 0.99 s, 6 MB 3.8 s with it. Last, one answer of the largest size read end to end through
`ReplProcess` from the REPL double (the JSON encoding on both sides included).

    python benchmarks/bench_answer_read.py [--sizes-mb 1 5 20]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from prover_assets.lean.repl import AnswerBuffer, ReplProcess
from prover_assets_tests.lean_double import DOUBLE, rescanning_take

PIECE = 4096  # what one read of the terminal gives


def answer_bytes(size_mb: float) -> bytes:
    data = "x" * int(size_mb * (1 << 20))
    return (
        json.dumps({"messages": [{"severity": "info", "data": data}], "env": 0}).encode() + b"\n\n"
    )


def resumable_seconds(answer: bytes) -> float:
    buffer = AnswerBuffer()
    started = time.perf_counter()
    for at in range(0, len(answer), PIECE):
        buffer.feed(answer[at : at + PIECE])
        if buffer.take() is not None:
            break
    return time.perf_counter() - started


def rescanning_seconds(answer: bytes) -> float:
    buffer = bytearray()
    started = time.perf_counter()
    for at in range(0, len(answer), PIECE):
        buffer.extend(answer[at : at + PIECE])
        if rescanning_take(buffer) is not None:
            break
    return time.perf_counter() - started


def end_to_end_seconds(size_mb: float) -> float:
    """One answer of `size_mb` from the REPL double through the pseudo-terminal."""
    with tempfile.TemporaryDirectory() as folder:
        rules = Path(folder) / "rules.json"
        reply = {"messages": [{"severity": "info", "data": "x" * int(size_mb * (1 << 20))}]}
        rules.write_text(json.dumps([{"match": {"substring": "big"}, "reply": reply}]))
        process = ReplProcess([*DOUBLE, "--rules", str(rules)], sandbox=False)
        process.start()
        try:
            started = time.perf_counter()
            process.send({"cmd": "big"}, 600)
            return time.perf_counter() - started
        finally:
            process.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes-mb", type=float, nargs="+", default=[1, 5, 20])
    parser.add_argument("--reference-max-mb", type=float, default=3)
    args = parser.parse_args()
    print(f"{'MB':>6} {'resumable s':>12} {'s per MB':>9} {'rescan s':>9} {'rescan/resumable':>17}")
    for size in args.sizes_mb:
        answer = answer_bytes(size)
        seconds = resumable_seconds(answer)
        reference = rescanning_seconds(answer) if size <= args.reference_max_mb else None
        ratio = f"{reference / seconds:17.1f}" if reference is not None else f"{'(skipped)':>17}"
        rescan = f"{reference:9.3f}" if reference is not None else f"{'-':>9}"
        print(f"{size:6g} {seconds:12.3f} {seconds / size:9.4f} {rescan} {ratio}")
    largest = max(args.sizes_mb)
    print(
        f"end to end through ReplProcess, {largest:g} MB answer: {end_to_end_seconds(largest):.2f} s"
    )


if __name__ == "__main__":
    main()
