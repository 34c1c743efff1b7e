"""SIMULATED `vllm.sampling_params` for the CPU tests: the names, fields and defaults the
product uses, as vLLM (v1, 0.32) defines them; no sampling happens here."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any


class RequestOutputKind(Enum):
    CUMULATIVE = 0  # vLLM's default: the whole output so far, at every step
    DELTA = 1
    FINAL_ONLY = 2


@dataclass
class SamplingParams:
    n: int = 1
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    seed: int | None = None
    stop: Any = None
    max_tokens: int | None = 16
    logprobs: int | None = None
    output_kind: RequestOutputKind = RequestOutputKind.CUMULATIVE
