"""The vLLM child process: `python -m prover_assets.generation.vllm_child RUN_DIR`.

Reads `spec.json` and `requests.jsonl` from RUN_DIR, generates with `vllm.LLM` (prompts as
token ids, one `SamplingParams` per request with its own seed, n=1), and appends results to
`results.jsonl` after every chunk, flushed, so the parent commits while generation continues.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from prover_assets.children import hold_folder


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
    with open(run / "results.jsonl", "a", encoding="utf-8") as out:
        for start in range(0, len(requests), spec["chunk"]):
            chunk = requests[start : start + spec["chunk"]]
            params = [
                SamplingParams(
                    n=1,
                    temperature=spec["temperature"],
                    top_p=spec["top_p"],
                    top_k=spec["top_k"] if spec["top_k"] is not None else -1,
                    max_tokens=r["max_tokens"],
                    seed=r["seed"],
                )
                for r in chunk
            ]
            prompts = [{"prompt_token_ids": r["prompt_ids"]} for r in chunk]
            outputs = llm.generate(prompts, params, use_tqdm=False)
            for request, output in zip(chunk, outputs, strict=True):
                completion = output.outputs[0]
                finish = "length" if completion.finish_reason == "length" else "stop"
                out.write(
                    json.dumps(
                        {
                            "key": request["key"],
                            "completion_ids": list(completion.token_ids),
                            "completion_text": completion.text,
                            "finish_reason": finish,
                        }
                    )
                    + "\n"
                )
            out.flush()
            os.fsync(out.fileno())
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
