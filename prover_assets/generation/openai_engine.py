"""Generation past one GPU: replicas of `vllm serve` behind URLs, through vLLM's
OpenAI-compatible completions API.

Each request is one `POST <url>/v1/completions` with the prompt as token ids (`prompt: [int]`),
its own `seed`, `max_tokens`, every sampling field explicitly, `n: 1`, and
`return_token_ids: true`, the request field vLLM documents for returning "token IDs alongside
the generated text" (`CompletionRequest.return_token_ids`,
vllm/entrypoints/openai/completion/protocol.py): the choice then carries `token_ids`, the
completion's ids, so nothing is re-tokenised. A request goes to the replica with the fewest
requests in flight (ties in turn); a failed attempt (no connection, a timeout, 429 or 5xx, a
finish other than `stop` or `length`) is retried with exponential backoff on the least-loaded
other replica, at most `retries` times; any other error is the request's own and fails the
step at once. Before the first request, every replica must serve the step's model.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

import requests

from prover_assets.generation.engines import (
    COMPLETED_FINISHES,
    GenerationEngine,
    GenerationRequest,
    GenerationResult,
)
from prover_assets.http import backoff_s, pooled_session
from prover_assets.records import SAMPLING_FIELDS, SamplingSettings

__all__ = ["OpenAICompletionsEngine", "ReplicaError"]

log = logging.getLogger(__name__)

RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})


class ReplicaError(RuntimeError):
    """A request the replicas could not answer, or a replica that serves another model."""


@dataclass
class _Replica:
    url: str
    in_flight: int = 0
    served: int = 0
    failures: int = 0


class OpenAICompletionsEngine(GenerationEngine):
    """Completions from `vllm serve` replicas (see the module docstring)."""

    name = "openai"

    def __init__(
        self,
        urls: Sequence[str],
        served_model: str,
        sampling: SamplingSettings,
        *,
        requests_per_replica: int,
        retries: int,
        model_root: str | None = None,
        backoff_s: float = 2.0,
        backoff_max_s: float = 60.0,
        timeout_s: float = 3600.0,
    ) -> None:
        if not urls:
            raise ValueError("the openai engine needs at least one replica URL")
        self.replicas = [_Replica(url.rstrip("/")) for url in urls]
        self.served_model = served_model
        self.model_root = model_root
        self.sampling = sampling
        self.requests_per_replica = requests_per_replica
        self.retries = retries
        self.backoff_s = backoff_s
        self.backoff_max_s = backoff_max_s
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._turn = itertools.count()
        self._session = pooled_session(len(urls), requests_per_replica)
        self._checked = False

    def describe(self) -> dict[str, Any]:
        return {
            "engine": self.name,
            "replicas": [r.url for r in self.replicas],
            "served_model": self.served_model,
            "requests_per_replica": self.requests_per_replica,
            "retries": self.retries,
            "served_per_replica": {r.url: r.served for r in self.replicas},
            "failed_attempts_per_replica": {r.url: r.failures for r in self.replicas},
        }

    def close(self) -> None:
        self._session.close()

    def check_replicas(self) -> None:
        """Every replica answers `/v1/models` with the step's model (and, when known, the
        folder it was loaded from): samples of another model are never mixed in."""
        for replica in self.replicas:
            try:
                answer = self._session.get(f"{replica.url}/v1/models", timeout=30)
                answer.raise_for_status()
                models = answer.json()["data"]
            except (requests.RequestException, KeyError, ValueError) as exc:
                raise ReplicaError(f"replica {replica.url} did not list its models: {exc}") from exc
            served = {m.get("id"): m.get("root") for m in models}
            if self.served_model not in served:
                raise ReplicaError(
                    f"replica {replica.url} serves {sorted(served)}, not {self.served_model!r}: "
                    "start it with --served-model-name, or fix gpu.settings.served_model"
                )
            root = served[self.served_model]
            if self._another_folder(root):
                raise ReplicaError(
                    f"replica {replica.url} serves {self.served_model!r} from {root}, but this "
                    f"step samples the model at {self.model_root}"
                )
        self._checked = True

    def _another_folder(self, root: str | None) -> bool:
        """A replica that names the folder it loaded (an absolute path) and names another."""
        if self.model_root is None or root is None or not os.path.isabs(root):
            return False
        return os.path.realpath(root) != os.path.realpath(self.model_root)

    def generate(self, requests_: Sequence[GenerationRequest]) -> Iterator[GenerationResult]:
        if not requests_:
            return
        if not self._checked:
            self.check_replicas()
        workers = len(self.replicas) * self.requests_per_replica
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="completions") as pool:
            pending: set[Future[GenerationResult]] = {
                pool.submit(self._complete, request) for request in requests_
            }
            try:
                while pending:
                    done, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for future in done:
                        yield future.result()
            finally:
                for future in pending:
                    future.cancel()

    def _choose(self, avoid: str | None) -> _Replica:
        with self._lock:
            candidates = [r for r in self.replicas if r.url != avoid] or self.replicas
            turn = next(self._turn)
            order = sorted(
                range(len(candidates)),
                key=lambda i: (candidates[i].in_flight, (i - turn) % len(candidates)),
            )
            replica = candidates[order[0]]
            replica.in_flight += 1
            return replica

    def _body(self, request: GenerationRequest) -> dict[str, Any]:
        """Every sampling field explicitly: `vllm serve` fills any field left out from the
        model's `generation_config.json` (Qwen3's `top_k: 20`), which the in-process engine
        does not. No stop strings (EOS ends a sample) and no logprobs: said, not left out."""
        return {
            "model": self.served_model,
            "prompt": list(request.prompt_ids),
            "max_tokens": request.max_tokens,
            **self.sampling.carried(),
            "seed": request.seed,
            "stop": [],
            "logprobs": None,
            "n": 1,
            "return_token_ids": True,
        }

    def _complete(self, request: GenerationRequest) -> GenerationResult:
        body = self._body(request)
        failed: str | None = None
        errors: list[str] = []
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(backoff_s(attempt, self.backoff_s, self.backoff_max_s))
            replica = self._choose(avoid=failed)
            try:
                answer = self._session.post(
                    f"{replica.url}/v1/completions", json=body, timeout=self.timeout_s
                )
            except requests.RequestException as exc:
                errors.append(f"{replica.url}: {type(exc).__name__}")
            else:
                if answer.status_code == 200:
                    result = self._result(request, body, replica, answer)
                    if result is not None:
                        return result
                    errors.append(f"{replica.url}: finish_reason not stop or length")
                    failed = replica.url
                    continue
                if answer.status_code not in RETRYABLE_STATUS:
                    self._release(replica, failed=True)
                    raise ReplicaError(
                        f"{replica.url}/v1/completions refused sample {request.key} with "
                        f"{answer.status_code}: {answer.text[:500]}"
                    )
                errors.append(f"{replica.url}: HTTP {answer.status_code}")
            self._release(replica, failed=True)
            failed = replica.url
        raise ReplicaError(
            f"sample {request.key}: no replica answered in {self.retries + 1} attempts "
            f"({'; '.join(errors)}); the samples already committed are kept, run again to resume"
        )

    def _release(self, replica: _Replica, *, failed: bool) -> None:
        with self._lock:
            replica.in_flight -= 1
            replica.failures += failed
            replica.served += not failed

    def _result(
        self,
        request: GenerationRequest,
        body: dict[str, Any],
        replica: _Replica,
        answer: requests.Response,
    ) -> GenerationResult | None:
        try:
            choice = answer.json()["choices"][0]
            token_ids = tuple(int(t) for t in choice["token_ids"])
            text, finish = choice["text"], choice["finish_reason"]
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            self._release(replica, failed=True)
            raise ReplicaError(
                f"{replica.url}/v1/completions answered sample {request.key} without "
                f"choices[0].token_ids ({exc!r}): is it a vLLM server that honours "
                "return_token_ids?"
            ) from exc
        if finish not in COMPLETED_FINISHES:
            # the server gave up on the request: retried like a lost connection
            log.warning("%s: finish_reason %r for sample %s", replica.url, finish, request.key)
            self._release(replica, failed=True)
            return None
        self._release(replica, failed=False)
        carried = {name: body[name] for name in SAMPLING_FIELDS if name in body}
        return GenerationResult(request.key, token_ids, text, finish, carried)
