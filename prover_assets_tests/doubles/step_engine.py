"""A double of vLLM's `LLMEngine` step interface (add_request / step / has_unfinished_requests)
that models continuous batching: at most `max_num_seqs` requests decode at once, each step
gives every running request one token and costs `step_s` of a clock (virtual by default), and a
free slot takes the next waiting request at once. SIMULATED: no model runs; a request's
completion is `tokens_of(request id, prompt, params)` (or `length_of` tokens of id 1).

No kinder than vLLM (v1 `OutputProcessor`): a request whose params do not ask for
`RequestOutputKind.FINAL_ONLY` gets an output built at every step it runs (vLLM's default is
`CUMULATIVE`), counted in `outputs_built`; a request `aborts` picks ends after one step with
`finish_reason` "abort" and no tokens, as vLLM reports a request it gave up."""

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
    finish_reason: str | None


@dataclass(frozen=True)
class RequestOutput:
    request_id: str
    finished: bool
    outputs: list[Completion]


@dataclass
class _Running:
    request_id: str
    tokens: tuple[int, ...]
    max_tokens: int
    final_only: bool
    aborted: bool
    done: int = 0

    @property
    def length(self) -> int:
        return 1 if self.aborted else len(self.tokens)


def _param(params: Any, name: str, default: Any) -> Any:
    return params.get(name, default) if isinstance(params, dict) else getattr(params, name, default)


def _text(tokens: tuple[int, ...]) -> str:
    return " ".join(f"t{t}" for t in tokens)


def _final_only(params: Any) -> bool:
    kind = _param(params, "output_kind", None)
    return getattr(kind, "name", kind) == "FINAL_ONLY"


@dataclass
class ContinuousBatchingDouble:
    length_of: Callable[[str, Any, Any], int]  # (request id, prompt, params) -> tokens wanted
    max_num_seqs: int
    step_s: float = 1.0
    tokens_of: Callable[[str, Any, Any], tuple[int, ...]] | None = None  # overrides length_of
    aborts: Callable[[str, Any, Any], bool] = lambda request_id, prompt, params: False
    now_s: float = 0.0  # the virtual clock: advanced by `step_s` per step
    steps: int = 0
    busy_slot_steps: int = 0  # sum over steps of the running requests: tokens decoded
    outputs_built: int = 0  # RequestOutputs made, finished or not
    added: list[tuple[str, Any]] = field(default_factory=list)  # (request id, params) in order
    _waiting: deque[_Running] = field(default_factory=deque)
    _running: list[_Running] = field(default_factory=list)

    def add_request(self, request_id: str, prompt: Any, params: Any) -> None:
        self.added.append((request_id, params))
        max_tokens = _param(params, "max_tokens", None)
        if self.tokens_of is not None:
            tokens = self.tokens_of(request_id, prompt, params)
        else:
            tokens = (1,) * self.length_of(request_id, prompt, params)
        self._waiting.append(
            _Running(
                request_id,
                tuple(tokens[:max_tokens]),
                max_tokens,
                _final_only(params),
                self.aborts(request_id, prompt, params),
            )
        )

    def has_unfinished_requests(self) -> bool:
        return bool(self._waiting or self._running)

    def _admit(self) -> None:
        while self._waiting and len(self._running) < self.max_num_seqs:
            self._running.append(self._waiting.popleft())

    def step(self) -> list[RequestOutput]:
        self._admit()
        self.steps += 1
        self.now_s += self.step_s
        self.busy_slot_steps += len(self._running)
        outputs, still = [], []
        for request in self._running:
            request.done += 1
            if request.done >= request.length:
                if request.aborted:
                    completion = Completion((), "", "abort")
                else:
                    stopped = request.length < request.max_tokens
                    completion = Completion(
                        request.tokens, _text(request.tokens), "stop" if stopped else "length"
                    )
                outputs.append(RequestOutput(request.request_id, True, [completion]))
            else:
                still.append(request)
                if not request.final_only:
                    tokens = request.tokens[: request.done]
                    so_far = Completion(tokens, _text(tokens), None)
                    outputs.append(RequestOutput(request.request_id, False, [so_far]))
        self.outputs_built += len(outputs)
        self._running = still
        return outputs

    def advance(self) -> list[RequestOutput]:
        """Every step up to the next finish at once (what `step` would do that many times):
        the same schedule, clock and outputs built, in one call per finishing request instead
        of per token; only the last step's outputs are returned."""
        self._admit()
        if not self._running:
            return []
        skip = min(r.length - r.done for r in self._running) - 1
        self.steps += skip
        self.now_s += skip * self.step_s
        self.busy_slot_steps += skip * len(self._running)
        self.outputs_built += skip * sum(not r.final_only for r in self._running)
        for request in self._running:
            request.done += skip
        return self.step()

    def utilisation(self) -> float:
        """Decoded tokens over slot-steps: how full the batch was."""
        return self.busy_slot_steps / max(1, self.steps * self.max_num_seqs)
