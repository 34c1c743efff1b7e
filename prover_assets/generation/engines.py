"""Generation engines behind one interface: vLLM on GPUs, transformers on CPU (or GPU).

`GenerationEngine.generate(requests)` takes prompt token ids, a per-request seed and
`max_tokens`, and yields one result per request as it finishes: completion token ids (the EOS
token included when the model stopped), the text, `finish_reason` (`stop` or `length`), and
the sampling fields the request carried. Every engine sends every field of `SamplingSettings`
explicitly: a field left out is filled by whatever serves it (`vllm serve` takes the model's
`generation_config.json`, Qwen3's `top_k: 20`; transformers its own `top_k: 50`), so two
engines would sample differently under one config. Heavy libraries are imported lazily.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from prover_assets.records import SAMPLING_FIELDS

if TYPE_CHECKING:
    from prover_assets.config import EngineSettings

__all__ = [
    "COMPLETED_FINISHES",
    "GenerationEngine",
    "GenerationRequest",
    "GenerationResult",
    "SamplingSettings",
    "TransformersEngine",
    "open_engine",
]

log = logging.getLogger(__name__)

# The finishes that end a completion; any other (vLLM's `abort`, or a reason added later) means
# the engine gave up on the request, an infrastructure failure to retry, never a sample
COMPLETED_FINISHES = ("stop", "length")


@dataclass(frozen=True)
class SamplingSettings:
    """Every sampling field of every sample of a batch, each sent explicitly. The defaults are
    the neutral values (no cut, no penalty): the registered design names only temperature,
    top-p and top-k, and means nothing else changes the distribution."""

    temperature: float
    top_p: float
    top_k: int  # 0: no top-k cut (vLLM's and transformers' "disabled")
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0

    def __post_init__(self) -> None:
        if tuple(f.name for f in fields(self)) != SAMPLING_FIELDS:
            raise TypeError("SamplingSettings must name exactly the recorded sampling fields")

    def carried(self) -> dict[str, float | int]:
        """The fields as a request carries them, named as the record names them."""
        return asdict(self)


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
    sampling: Mapping[str, float | int]  # the sampling fields the request carried; one left
    # out is absent (its value was the server's default, unknown here)


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
        if sampling.presence_penalty or sampling.frequency_penalty:
            raise ValueError(
                "transformers has no presence or frequency penalty: sample with the vllm engine, "
                "or set them to 0"
            )
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
        settings = self.sampling
        sampling: dict[str, Any] = {
            "do_sample": settings.temperature > 0,
            "repetition_penalty": settings.repetition_penalty,
        }
        if settings.temperature > 0:
            sampling.update(
                temperature=settings.temperature,
                top_p=settings.top_p,
                top_k=settings.top_k,
                min_p=settings.min_p,
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
        return GenerationResult(request.key, tuple(completion), text, finish, settings.carried())

    def generate(self, requests: Sequence[GenerationRequest]) -> Iterator[GenerationResult]:
        for request in requests:
            yield self._one(request)


def open_engine(
    settings: EngineSettings,
    model_path: Path,
    model_rev: str,
    sampling: SamplingSettings,
    *,
    max_model_len: int,
    seed: int,
    workdir: Path,
    commit_every: int,
) -> GenerationEngine:
    """The engine `settings` name, sampling the model at `model_path` (revision `model_rev`,
    the step's asset input) with `sampling`; `workdir` holds its children's folders."""
    if settings.engine == "transformers":
        return TransformersEngine(
            model_path, sampling, device=settings.device, dtype=settings.dtype
        )
    if settings.engine == "openai":
        from prover_assets.generation.openai_engine import OpenAICompletionsEngine

        assert settings.served_model is not None  # the settings' validator requires it
        return OpenAICompletionsEngine(
            settings.urls,
            settings.served_model,
            sampling,
            model_root=str(model_path),
            requests_per_replica=settings.requests_per_replica,
            retries=settings.http_retries,
        )
    from prover_assets.generation.vllm_engine import VllmEngine, VllmSpec

    spec = VllmSpec(
        model_path=str(model_path),
        model_rev=model_rev,
        tensor_parallel_size=settings.tensor_parallel_size,
        pipeline_parallel_size=settings.pipeline_parallel_size,
        max_model_len=max_model_len,
        gpu_memory_utilization=settings.gpu_memory_utilization,
        max_num_seqs=settings.max_num_seqs,
        dtype=settings.dtype,
        seed=seed,
        enforce_eager=settings.enforce_eager,
        sampling=sampling,
        chunk=commit_every,
    )
    return VllmEngine(
        spec, workdir=workdir, gpus=settings.gpus, batch_invariant=settings.batch_invariant
    )
