"""A double of `vllm serve`'s OpenAI-compatible completions API on 127.0.0.1, in a thread:
`GET /v1/models` and `POST /v1/completions` with token-id prompts and `return_token_ids`.
SIMULATED: no model runs; a completion's ids are drawn from sha256(prompt ids, seed, the
effective sampling), so the same request gives the same answer on every replica and another
sampling gives another answer. As `vllm serve` does, a sampling field the request leaves out
takes the model's `generation_config.json` value, else vLLM's own default
(`CompletionRequest.to_sampling_params`, `_DEFAULT_SAMPLING_PARAMS`). Faults are scripted per
replica."""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "QWEN3_GENERATION_CONFIG",
    "CompletionsDouble",
    "completion_ids",
    "effective_sampling",
    "serving",
]

EOS = 2
# What Qwen3's generation_config.json sets (the fields vLLM reads from it)
QWEN3_GENERATION_CONFIG = {"temperature": 0.6, "top_k": 20, "top_p": 0.95}
# vLLM's `_DEFAULT_SAMPLING_PARAMS` and the protocol's defaults for the rest
_VLLM_DEFAULTS = {
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": 0,
    "min_p": 0.0,
    "repetition_penalty": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
}
_FROM_GENERATION_CONFIG = ("temperature", "top_p", "top_k", "min_p", "repetition_penalty")


def effective_sampling(
    body: Mapping[str, Any], generation_config: Mapping[str, Any]
) -> dict[str, Any]:
    """The sampling a request is served with: its own fields, then the model's
    generation_config for the fields vLLM reads from it, then vLLM's defaults."""
    effective = {}
    for name, default in _VLLM_DEFAULTS.items():
        if body.get(name) is not None:
            effective[name] = body[name]
        elif name in _FROM_GENERATION_CONFIG and name in generation_config:
            effective[name] = generation_config[name]
        else:
            effective[name] = default
    return effective


def completion_ids(
    prompt: list[int], seed: int, max_tokens: int, sampling: Mapping[str, Any]
) -> tuple[list[int], str]:
    """The double's completion of `prompt` under `seed` and the effective `sampling`:
    (ids, finish_reason)."""
    digest = hashlib.sha256(json.dumps([prompt, seed, dict(sorted(sampling.items()))]).encode())
    raw = digest.digest()
    wanted = 3 + raw[0] % 6  # 3 to 8 tokens, the last one EOS
    ids = [10 + b % 90 for b in raw[1:wanted]] + [EOS]
    return (ids, "stop") if len(ids) <= max_tokens else (ids[:max_tokens], "length")


HELD_AT_MOST_S = 120.0  # a bound on a hung test, never an expectation of speed


@dataclass
class CompletionsDouble:
    served_model: str = "prover"
    root: str | None = None
    faults: list[int] = field(default_factory=list)  # HTTP statuses to answer first, in order
    delay_s: float = 0.0
    honours_token_ids: bool = True  # False: a server that ignores return_token_ids
    finish_reason: str | None = None  # answer every request with this finish_reason
    finish_reasons: list[str] = field(default_factory=list)  # the next answers' finish_reasons
    generation_config: dict[str, Any] = field(default_factory=lambda: dict(QWEN3_GENERATION_CONFIG))
    effective: list[dict[str, Any]] = field(default_factory=list)  # each answer's sampling
    delay_s_by_seed: dict[int, float] = field(default_factory=dict)  # a slow sample's delay
    # a held sample: answered only once the test sets its event, so that "still running" holds
    # however slowly a loaded machine serves the others (bounded by HELD_AT_MOST_S)
    held_by_seed: dict[int, threading.Event] = field(default_factory=dict)
    bodies: list[dict[str, Any]] = field(default_factory=list)  # every completions request
    model_listings: int = 0  # GET /v1/models answered
    in_flight: int = 0
    most_in_flight: int = 0  # completions requests open at once, at most
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self.lock:
            self.bodies.append(body)
            if self.faults:
                return self.faults.pop(0), {"error": "scripted fault"}
        if body.get("model") != self.served_model:
            return 404, {"error": f"The model `{body.get('model')}` does not exist."}
        prompt = body["prompt"]
        if not (isinstance(prompt, list) and all(isinstance(t, int) for t in prompt)):
            return 400, {"error": "this double takes token-id prompts only"}
        sampling = effective_sampling(body, self.generation_config)
        ids, finish = completion_ids(prompt, body["seed"], body["max_tokens"], sampling)
        with self.lock:
            self.effective.append(sampling)
            scripted = self.finish_reasons.pop(0) if self.finish_reasons else self.finish_reason
        choice: dict[str, Any] = {
            "index": 0,
            "text": " ".join(f"t{t}" for t in ids if t != EOS),
            "finish_reason": scripted or finish,
            "logprobs": None,
        }
        if body.get("return_token_ids") and self.honours_token_ids:
            choice["token_ids"] = ids
            choice["prompt_token_ids"] = prompt
        usage = {"prompt_tokens": len(prompt), "completion_tokens": len(ids)}
        return 200, {"object": "text_completion", "choices": [choice], "usage": usage}


def _handler(double: CompletionsDouble) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            with contextlib.suppress(BrokenPipeError):  # a client that gave up waiting
                self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path != "/v1/models":
                return self._send(404, {"error": "not found"})
            with double.lock:
                double.model_listings += 1
            model = {"id": double.served_model, "object": "model", "root": double.root}
            self._send(200, {"object": "list", "data": [model]})

        def do_POST(self) -> None:
            if self.path != "/v1/completions":
                return self._send(404, {"error": "not found"})
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with double.lock:
                double.in_flight += 1
                double.most_in_flight = max(double.most_in_flight, double.in_flight)
            delay_s = double.delay_s_by_seed.get(body.get("seed"), double.delay_s)
            if delay_s:
                threading.Event().wait(delay_s)
            held = double.held_by_seed.get(body.get("seed"))
            if held is not None:
                held.wait(HELD_AT_MOST_S)
            with double.lock:
                double.in_flight -= 1
            self._send(*double.answer(body))

    return Handler


@contextlib.contextmanager
def serving(double: CompletionsDouble) -> Iterator[str]:
    """Serve `double` on 127.0.0.1 (a free port) while the block runs; yields its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(double))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
