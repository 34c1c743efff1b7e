"""SIMULATED `vllm` for the CPU tests: `LLM(model=..., **engine args)` whose `llm_engine` is a
continuous-batching double of vLLM's step interface; no model is loaded and nothing is sampled.
A completion's ids come from sha256(prompt ids, seed, sampling) (the completions double's rule),
so they depend on nothing else: not on the GPU slice, the batch, or the other requests.

Put this folder first on PYTHONPATH to stand in for vLLM. Faults are scripted per engine child
by `FAKE_VLLM_SCRIPT`: JSON mapping a child's `CUDA_VISIBLE_DEVICES` to
`{"die_after": n}` (the process exits with 9 once n requests have finished),
`{"abort_seeds": [...]}` (the first attempt of those seeds ends `abort`),
`{"serves": path}` (the engine reports another model folder), `{"load_fails": true}`,
`{"load_fails_once": true}` (the first load in a `VLLM_CACHE_ROOT` fails, as a start that
races or runs out of memory once), `{"load_s": s}` (the load takes s seconds, as an 8B model's
load, compile and CUDA-graph capture take minutes), `{"load_until": path}` (the load waits until
that file exists), `{"exit_code": c}` (the process, its work done, exits with c: a teardown that
crashes, as a CUDA or NCCL error at exit does). Each load prints the `VLLM_CACHE_ROOT` it was
given."""

from __future__ import annotations

import atexit
import json
import os
import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, ClassVar

from prover_assets.records import SAMPLING_FIELDS
from prover_assets_tests.doubles.completions_server import completion_ids
from prover_assets_tests.doubles.step_engine import ContinuousBatchingDouble, RequestOutput

from .sampling_params import RequestOutputKind, SamplingParams

__all__ = ["LLM", "RequestOutputKind", "SamplingParams"]


def _script() -> dict[str, Any]:
    scripts = json.loads(os.environ.get("FAKE_VLLM_SCRIPT", "{}"))
    return scripts.get(os.environ.get("CUDA_VISIBLE_DEVICES", ""), {})


def _tokens(request_id: str, prompt: Any, params: SamplingParams) -> tuple[int, ...]:
    sampling = {name: getattr(params, name) for name in SAMPLING_FIELDS}
    ids, _ = completion_ids(list(prompt["prompt_token_ids"]), params.seed, 10**6, sampling)
    return tuple(ids)


@dataclass
class _Engine(ContinuousBatchingDouble):
    script: dict[str, Any] = field(default_factory=dict)
    model_config: Any = None
    finished: int = 0
    aborted_seeds: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.aborts = self._aborts_first_attempt

    def _aborts_first_attempt(self, request_id: str, prompt: Any, params: Any) -> bool:
        if params.seed not in self.script.get("abort_seeds", ()):
            return False
        first = params.seed not in self.aborted_seeds
        self.aborted_seeds.add(params.seed)
        return first

    def step(self) -> list[RequestOutput]:
        if self.finished >= self.script.get("die_after", float("inf")):
            os._exit(9)  # a GPU fault: no cleanup, no flush
        outputs = super().step()
        self.finished += sum(o.finished for o in outputs)
        return outputs


class LLM:
    instances: ClassVar[list[LLM]] = []  # every engine made in this process, for in-process tests

    def __init__(self, model: str, **engine_args: Any) -> None:
        script = _script()
        print(
            "SIMULATED vllm: CUDA_VISIBLE_DEVICES="
            f"{os.environ.get('CUDA_VISIBLE_DEVICES')} "
            f"VLLM_BATCH_INVARIANT={os.environ.get('VLLM_BATCH_INVARIANT')}",
            flush=True,
        )
        print(f"SIMULATED vllm: VLLM_CACHE_ROOT={os.environ.get('VLLM_CACHE_ROOT')}", flush=True)
        time.sleep(script.get("load_s", 0))
        while "load_until" in script and not os.path.exists(script["load_until"]):
            time.sleep(0.02)
        if "exit_code" in script:
            atexit.register(os._exit, script["exit_code"])
        if script.get("load_fails"):
            raise RuntimeError("SIMULATED: the model did not load")
        if script.get("load_fails_once"):
            marker = os.path.join(os.environ["VLLM_CACHE_ROOT"], "simulated-load-failed")
            if not os.path.exists(marker):
                os.makedirs(os.path.dirname(marker), exist_ok=True)
                open(marker, "w").close()
                raise RuntimeError("SIMULATED: the first load failed")
        self.engine_args = {"model": model, **engine_args}
        self.llm_engine = _Engine(
            lambda *args: 0,
            max_num_seqs=engine_args.get("max_num_seqs", 256),
            tokens_of=_tokens,
            script=script,
            model_config=SimpleNamespace(model=script.get("serves", model)),
        )
        LLM.instances.append(self)
