"""Generation engines behind one interface: vLLM on GPUs, transformers on CPU (or GPU).

`GenerationEngine.generate(requests)` takes prompt token ids, a per-request seed and
`max_tokens`, and yields one result per request as it finishes: completion token ids (the EOS
token included when the model stopped), the text, and `finish_reason` (`stop` or `length`).
Heavy libraries are imported lazily, never at module import time.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from prover_assets.children import forget_child, spawn_tied

__all__ = [
    "GenerationEngine",
    "GenerationRequest",
    "GenerationResult",
    "SamplingSettings",
    "TransformersEngine",
    "VllmEngine",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SamplingSettings:
    """Temperature, top-p and top-k of every sample of a batch."""

    temperature: float
    top_p: float
    top_k: int | None


@dataclass(frozen=True)
class GenerationRequest:
    """One sample to generate: its prompt ids, its token budget and its seed."""

    key: tuple
    prompt_ids: tuple[int, ...]
    max_tokens: int
    seed: int


@dataclass(frozen=True)
class GenerationResult:
    """What an engine returns for one request: the completion's ids and text and why it ended."""

    key: tuple
    completion_ids: tuple[int, ...]
    completion_text: str
    finish_reason: Literal["stop", "length"]


class GenerationEngine(ABC):
    """An engine that generates batches of requests (vLLM or transformers); a context manager."""

    name: str

    @abstractmethod
    def generate(self, requests: Sequence[GenerationRequest]) -> Iterator[GenerationResult]:
        """One result per request, in any order, as each finishes."""

    def describe(self) -> dict[str, Any]:
        return {"engine": self.name}

    def close(self) -> None:  # noqa: B027 - optional hook
        pass

    def __enter__(self) -> GenerationEngine:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class TransformersEngine(GenerationEngine):
    """HF `generate`, one call per sample: a batched call shares one random stream, so only
    one call per sample makes a sample's seed reproduce it."""

    name = "transformers"

    def __init__(
        self,
        model_path: Path,
        sampling: SamplingSettings,
        *,
        device: str = "cpu",
        dtype: str = "float32",
    ) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        self._torch = torch
        self.model_path = model_path
        self.sampling = sampling
        self.device = device
        self.dtype = dtype
        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        self.model = AutoModelForCausalLM.from_pretrained(model_path, dtype=getattr(torch, dtype))
        self.model.to(device).eval()
        eos = self.model.generation_config.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, list) else [eos]) | {self.tokenizer.eos_token_id}
        self.pad_id = (
            self.tokenizer.pad_token_id
            if self.tokenizer.pad_token_id is not None
            else min(self.eos_ids)
        )

    def describe(self) -> dict[str, Any]:
        return {"engine": self.name, "device": self.device, "dtype": self.dtype}

    def _one(self, request: GenerationRequest) -> GenerationResult:
        torch = self._torch
        generator_seed = request.seed % (2**63)
        torch.manual_seed(generator_seed)
        prompt = torch.tensor([list(request.prompt_ids)], device=self.device)
        sampling: dict[str, Any] = {"do_sample": self.sampling.temperature > 0}
        if self.sampling.temperature > 0:
            sampling.update(
                temperature=self.sampling.temperature,
                top_p=self.sampling.top_p,
                top_k=self.sampling.top_k or 0,
            )
        with torch.no_grad():
            output = self.model.generate(
                prompt,
                attention_mask=torch.ones_like(prompt),
                max_new_tokens=request.max_tokens,
                eos_token_id=sorted(self.eos_ids),
                pad_token_id=self.pad_id,
                **sampling,
            )
        completion = output[0, prompt.shape[1] :].tolist()
        stopped = next((i for i, token in enumerate(completion) if token in self.eos_ids), None)
        if stopped is not None:
            completion = completion[: stopped + 1]
        finish = "stop" if stopped is not None else "length"
        text = self.tokenizer.decode(completion, skip_special_tokens=True)
        return GenerationResult(request.key, tuple(completion), text, finish)

    def generate(self, requests: Sequence[GenerationRequest]) -> Iterator[GenerationResult]:
        for request in requests:
            yield self._one(request)


@dataclass(frozen=True)
class VllmSpec:
    """What the vLLM child process needs: everything plain, to travel as JSON."""

    model_path: str
    tensor_parallel_size: int
    pipeline_parallel_size: int
    max_model_len: int
    gpu_memory_utilization: float
    max_num_seqs: int
    dtype: str
    seed: int
    enforce_eager: bool
    temperature: float
    top_p: float
    top_k: int | None
    chunk: (
        int  # results are made durable after every `chunk` that finish (all requests run at once)
    )


class VllmEngine(GenerationEngine):
    """`vllm.LLM` in a child process with its own session; output to a log file; the exact
    process group signalled at the end (vLLM's engine process can outlive its parent and hold
    its pipes). Requests and results travel as JSON lines through files."""

    name = "vllm"

    def __init__(self, spec: VllmSpec, *, workdir: Path) -> None:
        self.spec = spec
        self.workdir = workdir
        self.log_path = workdir / "vllm.log"

    def describe(self) -> dict[str, Any]:
        return {"engine": self.name, **{k: v for k, v in asdict(self.spec).items() if k != "chunk"}}

    def generate(self, requests: Sequence[GenerationRequest]) -> Iterator[GenerationResult]:
        if not requests:
            return
        self.workdir.mkdir(parents=True, exist_ok=True)
        run = Path(tempfile.mkdtemp(prefix="vllm-run-", dir=self.workdir))
        (run / "spec.json").write_text(json.dumps(asdict(self.spec)))
        with open(run / "requests.jsonl", "w", encoding="utf-8") as handle:
            for r in requests:
                handle.write(
                    json.dumps(
                        {
                            "key": list(r.key),
                            "prompt_ids": list(r.prompt_ids),
                            "max_tokens": r.max_tokens,
                            "seed": r.seed,
                        }
                    )
                    + "\n"
                )
        results_path = run / "results.jsonl"
        results_path.touch()
        with open(self.log_path, "ab") as log_file:
            child = spawn_tied(
                [sys.executable, "-m", "prover_assets.generation.vllm_child", str(run)],
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        try:
            yield from self._follow(child, results_path, len(requests))
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=30)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pid, signal.SIGKILL)
            forget_child(child)

    def _follow(
        self, child: subprocess.Popen[bytes], path: Path, expected: int
    ) -> Iterator[GenerationResult]:
        seen = 0
        with open(path, encoding="utf-8") as handle:
            buffer = ""
            while seen < expected:
                chunk = handle.read()
                if chunk:
                    buffer += chunk
                    *lines, buffer = buffer.split("\n")
                    for line in lines:
                        row = json.loads(line)
                        seen += 1
                        yield GenerationResult(
                            tuple(row["key"]),
                            tuple(row["completion_ids"]),
                            row["completion_text"],
                            row["finish_reason"],
                        )
                    continue
                if child.poll() is not None:
                    raise RuntimeError(
                        f"the vLLM process exited with {child.returncode} after {seen} of "
                        f"{expected} results; see {self.log_path}"
                    )
                time.sleep(0.5)
