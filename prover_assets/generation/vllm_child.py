"""The vLLM child process: `python -m prover_assets.generation.vllm_child RUN_DIR`.

Reads `spec.json` and `requests.jsonl` from RUN_DIR, loads the model, writes `ready.json` (the
folder vLLM loaded and its revision, for the parent to check), then feeds every request to
vLLM's engine at once (prompts as token ids, one `SamplingParams` per request with its own seed,
n=1, every sampling field explicit), so that continuous batching keeps the GPU's
`max_num_seqs` slots full: no chunk waits for its longest sample. Requests ask for final-only
outputs: vLLM's default (cumulative) would build an output for every running sequence at every
step, as `LLM.generate` avoids. Each result is written as it finishes; `results.jsonl` is
flushed and fsynced every `chunk` results (and at the end), so the parent commits while
generation continues. A request that finishes other than `stop` or `length` (vLLM's `abort`,
or a reason added later) says nothing about the model: it is added again with the same seed, at
most `abort_retries` times, and never recorded as a completion.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any, Protocol

from pydantic import ConfigDict, TypeAdapter

from prover_assets.children import hold_folder
from prover_assets.generation.engines import COMPLETED_FINISHES
from prover_assets.generation.revision import RevisionError, model_revision
from prover_assets.records import SAMPLING_FIELDS, SamplingSettings, publish_text

__all__ = [
    "READY_FILE",
    "SPEC_FILE",
    "EngineAborted",
    "StepEngine",
    "VllmSpec",
    "main",
    "read_spec",
    "served_identity",
    "stream_results",
    "write_spec",
]

READY_FILE = "ready.json"  # written once the model is loaded: what the engine serves
SPEC_FILE = "spec.json"  # written by the parent: the child's `VllmSpec`


@dataclass(frozen=True)
class VllmSpec:
    """What a vLLM child needs, written by the parent as `spec.json` and read back whole:
    every field typed, none unknown (a parent and a child of two versions disagree loudly)."""

    __pydantic_config__ = ConfigDict(extra="forbid", strict=True)

    model_path: str
    model_rev: str  # the revision the step's asset input names; the child must serve it
    tensor_parallel_size: int
    pipeline_parallel_size: int
    max_model_len: int
    gpu_memory_utilization: float
    max_num_seqs: int
    dtype: str
    seed: int
    enforce_eager: bool
    sampling: SamplingSettings
    chunk: int  # results are made durable after every `chunk` that finish
    abort_retries: int = 2  # a request vLLM aborts is added again, at most this many times


_SPEC_JSON = TypeAdapter(VllmSpec)


def write_spec(run: Path, spec: VllmSpec) -> None:
    """`spec` as the child in `run` reads it."""
    (run / SPEC_FILE).write_bytes(_SPEC_JSON.dump_json(spec))


def read_spec(run: Path) -> VllmSpec:
    """The spec the parent wrote in `run`; raises naming each field that is missing, unknown
    or of the wrong type."""
    return _SPEC_JSON.validate_json((run / SPEC_FILE).read_bytes())


class EngineAborted(RuntimeError):
    """A request vLLM kept ending without a completion."""


class StepEngine(Protocol):
    """The part of vLLM's `LLMEngine` the child drives: requests in up front, outputs as each
    finishes (`RequestOutput.finished`)."""

    def add_request(self, request_id: str, prompt: Any, params: Any) -> None: ...

    def step(self) -> list[Any]: ...

    def has_unfinished_requests(self) -> bool: ...


def _row(request: dict[str, Any], output: Any, params: Any) -> dict[str, Any]:
    completion = output.outputs[0]
    return {
        "key": request["key"],
        "completion_ids": list(completion.token_ids),
        "completion_text": completion.text,
        "finish_reason": completion.finish_reason,
        "sampling": {name: getattr(params, name) for name in SAMPLING_FIELDS},
    }


def stream_results(
    engine: StepEngine,
    requests: Sequence[dict[str, Any]],
    params_of: Callable[[dict[str, Any]], Any],
    out: IO[str],
    *,
    commit_every: int,
    abort_retries: int,
) -> int:
    """Add every request, step the engine until none is left, write each completed one at once
    (with the sampling its params carried); add an aborted one again; make the file durable
    every `commit_every` results and at the end. Returns how many were written."""
    attempts: dict[str, tuple[int, int, Any]] = {}  # request id -> (index, attempt, params)

    def add(index: int, attempt: int) -> None:
        request_id, params = f"{index}.{attempt}", params_of(requests[index])
        attempts[request_id] = (index, attempt, params)
        engine.add_request(request_id, {"prompt_token_ids": requests[index]["prompt_ids"]}, params)

    for index in range(len(requests)):
        add(index, 0)
    written = 0
    while engine.has_unfinished_requests():
        for output in engine.step():
            if not output.finished:
                continue
            index, attempt, params = attempts.pop(output.request_id)
            finish = output.outputs[0].finish_reason
            if finish not in COMPLETED_FINISHES:
                if attempt >= abort_retries:
                    _commit(out)
                    raise EngineAborted(
                        f"sample {requests[index]['key']} finished {finish!r} on "
                        f"{attempt + 1} attempts"
                    )
                print(f"sample {requests[index]['key']} finished {finish!r}; again", flush=True)
                add(index, attempt + 1)
                continue
            out.write(json.dumps(_row(requests[index], output, params)) + "\n")
            written += 1
            if written % commit_every == 0:
                _commit(out)
    _commit(out)
    return written


def _commit(out: IO[str]) -> None:
    out.flush()
    os.fsync(out.fileno())


def served_identity(served_path: str, declared_rev: str) -> dict[str, str]:
    """What `ready.json` says: the folder the engine loaded and that folder's revision (read
    from the folder itself; a folder whose revision cannot be read says why)."""
    try:
        revision = model_revision(Path(served_path), declared_rev)
    except (RevisionError, OSError) as exc:
        revision = f"unreadable ({exc})"
    return {"model_path": served_path, "model_rev": revision}


def main(run: Path) -> int:
    """The vLLM child: generate the requests in the run folder (one engine per engine folder)."""
    with hold_folder(run.parent):  # one vLLM engine per engine folder
        return _generate(run)


def _generate(run: Path) -> int:
    from vllm import LLM, SamplingParams
    from vllm.sampling_params import RequestOutputKind

    spec = read_spec(run)
    requests = [json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines()]
    llm = LLM(
        model=spec.model_path,
        tensor_parallel_size=spec.tensor_parallel_size,
        pipeline_parallel_size=spec.pipeline_parallel_size,
        max_model_len=spec.max_model_len,
        gpu_memory_utilization=spec.gpu_memory_utilization,
        max_num_seqs=spec.max_num_seqs,
        dtype=spec.dtype,
        seed=spec.seed,
        enforce_eager=spec.enforce_eager,
    )
    identity = served_identity(llm.llm_engine.model_config.model, spec.model_rev)
    publish_text(run / READY_FILE, json.dumps(identity) + "\n")

    def params_of(request: dict[str, Any]) -> Any:
        return SamplingParams(
            n=1,
            **asdict(spec.sampling),
            max_tokens=request["max_tokens"],
            seed=request["seed"],
            stop=[],
            logprobs=None,
            output_kind=RequestOutputKind.FINAL_ONLY,
        )

    with open(run / "results.jsonl", "a", encoding="utf-8") as out:
        stream_results(
            llm.llm_engine,
            requests,
            params_of,
            out,
            commit_every=spec.chunk,
            abort_retries=spec.abort_retries,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
