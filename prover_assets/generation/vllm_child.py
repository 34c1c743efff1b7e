"""The vLLM child process: `python -m prover_assets.generation.vllm_child RUN_DIR`.

Reads `spec.json` and `requests.jsonl` from RUN_DIR and feeds every request to vLLM's engine at
once (prompts as token ids, one `SamplingParams` per request with its own seed, n=1), so that
continuous batching keeps the GPU's `max_num_seqs` slots full: no chunk waits for its longest
sample. Each result is written as it finishes; `results.jsonl` is flushed and fsynced every
`chunk` results (and at the end), so the parent commits while generation continues.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any, Protocol

from prover_assets.children import hold_folder

__all__ = ["StepEngine", "main", "stream_results"]


class StepEngine(Protocol):
    """The part of vLLM's `LLMEngine` the child drives: requests in up front, outputs as each
    finishes (`RequestOutput.finished`)."""

    def add_request(self, request_id: str, prompt: Any, params: Any) -> None: ...

    def step(self) -> list[Any]: ...

    def has_unfinished_requests(self) -> bool: ...


def _row(request: dict[str, Any], output: Any) -> dict[str, Any]:
    completion = output.outputs[0]
    return {
        "key": request["key"],
        "completion_ids": list(completion.token_ids),
        "completion_text": completion.text,
        "finish_reason": "length" if completion.finish_reason == "length" else "stop",
    }


def stream_results(
    engine: StepEngine,
    requests: Sequence[dict[str, Any]],
    params_of: Callable[[dict[str, Any]], Any],
    out: IO[str],
    *,
    commit_every: int,
) -> int:
    """Add every request, step the engine until none is left, write each finished one at once;
    make the file durable every `commit_every` results and at the end. Returns how many."""
    for index, request in enumerate(requests):
        engine.add_request(
            str(index), {"prompt_token_ids": request["prompt_ids"]}, params_of(request)
        )
    written = 0
    while engine.has_unfinished_requests():
        for output in engine.step():
            if not output.finished:
                continue
            out.write(json.dumps(_row(requests[int(output.request_id)], output)) + "\n")
            written += 1
            if written % commit_every == 0:
                _commit(out)
    _commit(out)
    return written


def _commit(out: IO[str]) -> None:
    out.flush()
    os.fsync(out.fileno())


def main(run: Path) -> int:
    """The vLLM child: generate the requests in the run folder (one engine per step folder)."""
    with hold_folder(run.parent):  # one vLLM engine per generation step's folder
        return _generate(run)


def _generate(run: Path) -> int:
    from vllm import LLM, SamplingParams

    spec = json.loads((run / "spec.json").read_text())
    requests = [json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines()]
    llm = LLM(
        model=spec["model_path"],
        tensor_parallel_size=spec["tensor_parallel_size"],
        pipeline_parallel_size=spec["pipeline_parallel_size"],
        max_model_len=spec["max_model_len"],
        gpu_memory_utilization=spec["gpu_memory_utilization"],
        max_num_seqs=spec["max_num_seqs"],
        dtype=spec["dtype"],
        seed=spec["seed"],
        enforce_eager=spec["enforce_eager"],
    )

    def params_of(request: dict[str, Any]) -> SamplingParams:
        return SamplingParams(
            n=1,
            temperature=spec["temperature"],
            top_p=spec["top_p"],
            top_k=spec["top_k"] if spec["top_k"] is not None else -1,
            max_tokens=request["max_tokens"],
            seed=request["seed"],
        )

    with open(run / "results.jsonl", "a", encoding="utf-8") as out:
        stream_results(llm.llm_engine, requests, params_of, out, commit_every=spec["chunk"])
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
