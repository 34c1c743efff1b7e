"""A double of vLLM's `LLMEngine` step interface (add_request / step / has_unfinished_requests)
that models continuous batching: at most `max_num_seqs` requests decode at once, each step
gives every running request one token and costs `step_s` of a clock (virtual by default), and a
free slot takes the next waiting request at once. SIMULATED: no model runs; a request's
completion length comes from `length_of`."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ContinuousBatchingDouble"]


@dataclass(frozen=True)
class Completion:
    token_ids: tuple[int, ...]
    text: str
    finish_reason: str


@dataclass(frozen=True)
class RequestOutput:
    request_id: str
    finished: bool
    outputs: list[Completion]


@dataclass
class _Running:
    request_id: str
    length: int
    max_tokens: int
    done: int = 0


@dataclass
class ContinuousBatchingDouble:
    length_of: Callable[[str, Any, Any], int]  # (request id, prompt, params) -> tokens wanted
    max_num_seqs: int
    step_s: float = 1.0
    now_s: float = 0.0  # the virtual clock: advanced by `step_s` per step
    steps: int = 0
    busy_slot_steps: int = 0  # sum over steps of the running requests: tokens decoded
    _waiting: deque[_Running] = field(default_factory=deque)
    _running: list[_Running] = field(default_factory=list)

    def add_request(self, request_id: str, prompt: Any, params: Any) -> None:
        max_tokens = params["max_tokens"] if isinstance(params, dict) else params.max_tokens
        length = min(self.length_of(request_id, prompt, params), max_tokens)
        self._waiting.append(_Running(request_id, length, max_tokens))

    def has_unfinished_requests(self) -> bool:
        return bool(self._waiting or self._running)

    def step(self) -> list[RequestOutput]:
        while self._waiting and len(self._running) < self.max_num_seqs:
            self._running.append(self._waiting.popleft())
        self.steps += 1
        self.now_s += self.step_s
        self.busy_slot_steps += len(self._running)
        outputs, still = [], []
        for request in self._running:
            request.done += 1
            if request.done >= request.length:
                finish = "length" if request.length >= request.max_tokens else "stop"
                completion = Completion(tuple([1] * request.length), "", finish)
                outputs.append(RequestOutput(request.request_id, True, [completion]))
            else:
                still.append(request)
        self._running = still
        return outputs

    def advance(self) -> list[RequestOutput]:
        """Every step up to the next finish at once (what `step` would do that many times):
        the same schedule and clock, in one call per finishing request instead of per token."""
        while self._waiting and len(self._running) < self.max_num_seqs:
            self._running.append(self._waiting.popleft())
        if not self._running:
            return []
        skip = min(r.length - r.done for r in self._running) - 1
        self.steps += skip
        self.now_s += skip * self.step_s
        self.busy_slot_steps += skip * len(self._running)
        for request in self._running:
            request.done += skip
        return self.step()

    def utilisation(self) -> float:
        """Decoded tokens over slot-steps: how full the batch was."""
        return self.busy_slot_steps / max(1, self.steps * self.max_num_seqs)
