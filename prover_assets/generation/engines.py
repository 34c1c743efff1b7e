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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from prover_assets.model_loading import load_causal_lm
from prover_assets.records import SamplingSettings

__all__ = [
    "COMPLETED_FINISHES",
    "EngineOpening",
    "GenerationEngine",
    "GenerationRequest",
    "GenerationResult",
    "TransformersEngine",
]

log = logging.getLogger(__name__)

# The finishes that end a completion; any other (vLLM's `abort`, or a reason added later) means
# the engine gave up on the request, an infrastructure failure to retry, never a sample
COMPLETED_FINISHES = ("stop", "length")


@dataclass(frozen=True)
class EngineOpening:
    """What one step asks of its engine, and records of every sample: the model at
    `model_path` (revision `model_rev`, the step's asset input) sampled with `sampling`, `seed`
    the base of its per-request seeds, prompt and completion within `max_model_len` tokens;
    results committed every `commit_every`; `workdir` holds the engine's children's folders;
    `cpu_threads`: torch's threads in this process while a transformers engine is open."""

    model_path: Path
    model_rev: str
    sampling: SamplingSettings
    max_model_len: int
    seed: int
    workdir: Path
    commit_every: int
    cpu_threads: int


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

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """What the generation manifest records of the engine: its name and settings."""

    def close(self) -> None:  # noqa: B027 - optional hook
        pass

    def __enter__(self) -> GenerationEngine:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


# `generation_config` fields that make HF `generate` add a logits processor, a stopping criterion
# or a decoding path that `TransformersEngine`'s loop does not reproduce, with the values that add
# none (None: unset, then `generate`'s global default applies, which adds none either). A model
# whose `generation_config.json` sets one off these values samples through `generate` itself.
_LOOP_NEUTRAL_GENERATION_FIELDS: dict[str, tuple[object, ...]] = {
    "guidance_scale": (None, 1.0),
    "sequence_bias": (None,),
    "encoder_repetition_penalty": (None, 1.0),
    "no_repeat_ngram_size": (None, 0),
    "encoder_no_repeat_ngram_size": (None, 0),
    "bad_words_ids": (None,),
    "min_length": (None, 0),
    "min_new_tokens": (None, 0),
    "forced_bos_token_id": (None,),
    "forced_eos_token_id": (None,),
    "remove_invalid_values": (None, False),
    "exponential_decay_length_penalty": (None,),
    "suppress_tokens": (None,),
    "begin_suppress_tokens": (None,),
    "typical_p": (None, 1.0),
    "epsilon_cutoff": (None, 0.0),
    "eta_cutoff": (None, 0.0),
    "top_h": (None,),
    "watermarking_config": (None,),
    "renormalize_logits": (None, False),
    "num_beams": (None, 1),
    "num_beam_groups": (None, 1),
    "diversity_penalty": (None, 0.0),
    "num_return_sequences": (None, 1),
    "penalty_alpha": (None,),
    "dola_layers": (None,),
    "constraints": (None,),
    "force_words_ids": (None,),
    "prompt_lookup_num_tokens": (None,),
    "assistant_early_exit": (None,),
    "speculation_type": (None,),
    "use_mtp": (None, False),
    "token_healing": (None, False),
    "stop_strings": (None,),
    "max_time": (None,),
    "use_cache": (None, True),
    "cache_implementation": (None, "dynamic"),
    "prefill_chunk_size": (None,),
    "continuous_batching_config": (None,),
}


class TransformersEngine(GenerationEngine):
    """HF's sampling step, the samples of one prompt together, each from a random stream of its
    own: a sample's seed reproduces it whichever samples share its batch.

    Each batch is HF `generate`'s `_sample` loop reproduced without `generate`'s machinery,
    which on the tiny demo model on CPU costs about a quarter of `generate`'s time per token,
    and a problem's samples share each step, which costs little more than one
    (`benchmarks/bench_transformers_engine.py`): the model called as `generate` calls it (the
    whole prompt, then one token at a time on a `DynamicCache`, with the all-ones attention
    mask), the last position's logits cast to float32, HF's own logits processors in
    `generate`'s order (repetition penalty, then when sampling temperature, top-k, top-p,
    min-p), then `torch.multinomial` on each row's softmax from a generator seeded with the
    row's sample's seed, or the argmax at temperature 0; a row stops at its first EOS id or
    after `max_tokens`. Only requests of one prompt share a batch: rows of one prompt need no
    padding, and on the tests' CPU are computed bit for bit as one row alone (padded rows of
    other prompts differed in the last bits). A test pins every sample token for
    token to `generate` called alone with the global generator seeded with the sample's seed.
    A model whose generation config asks
    `generate` for more (`_LOOP_NEUTRAL_GENERATION_FIELDS`), or whose class replaces `generate`
    or `_sample`, samples through `generate` itself, one sample a call, as does an empty
    budget. An empty prompt is refused: `generate` cannot start from nothing."""

    name = "transformers"

    def __init__(
        self,
        model_path: Path,
        sampling: SamplingSettings,
        *,
        device: str = "cpu",
        dtype: str = "float32",
        cpu_threads: int | None = None,
    ) -> None:
        """`cpu_threads`: torch's threads while the engine is open (`prover_assets/cpu_threads.py`;
        None leaves them as they are)."""
        import inspect

        import torch
        from transformers import AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        self._torch = torch
        self._threads_before = torch.get_num_threads()
        if cpu_threads is not None:
            torch.set_num_threads(cpu_threads)
        self.model_path = model_path
        self.sampling = sampling
        self.device = device
        self.dtype = dtype
        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        self.model = load_causal_lm(model_path, getattr(torch, dtype))
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
        self._processors = self._logits_processors()
        # the forward's name for the KV cache (`cache` in recent transformers 5)
        parameters = inspect.signature(self.model.forward).parameters
        self._cache_arg = "cache" if "cache" in parameters else "past_key_values"
        self.uses_loop = self._loop_reproduces_generate()
        if not self.uses_loop:
            log.info(
                "%s: sampling through HF generate (its generation config asks more)", model_path
            )

    def describe(self) -> dict[str, Any]:
        return {
            "engine": self.name,
            "device": self.device,
            "dtype": self.dtype,
            "cpu_threads": self._torch.get_num_threads(),
        }

    def close(self) -> None:
        self._torch.set_num_threads(self._threads_before)

    def _logits_processors(self) -> Any:
        """The processors `generate` builds for the engine's settings, in `generate`'s order
        (`GenerationMixin._get_logits_processor`), from HF's own classes."""
        from transformers.generation.logits_process import (
            LogitsProcessorList,
            MinPLogitsWarper,
            RepetitionPenaltyLogitsProcessor,
            TemperatureLogitsWarper,
            TopKLogitsWarper,
            TopPLogitsWarper,
        )

        settings = self.sampling
        processors = LogitsProcessorList()
        if settings.repetition_penalty != 1.0:
            # `generate` passes the prompt's left padding (none here: tensor([0])), which masks
            # nothing: None is the same penalty
            processors.append(RepetitionPenaltyLogitsProcessor(float(settings.repetition_penalty)))
        if settings.temperature > 0:
            if settings.temperature != 1.0:
                processors.append(TemperatureLogitsWarper(float(settings.temperature)))
            if settings.top_k:
                processors.append(TopKLogitsWarper(top_k=settings.top_k, min_tokens_to_keep=1))
            if settings.top_p is not None and settings.top_p < 1.0:
                processors.append(TopPLogitsWarper(top_p=settings.top_p, min_tokens_to_keep=1))
            # `generate` adds min-p whenever it is set; at 0 it removes the tokens whose
            # probability is below 0, none, so leaving it out changes no score
            if settings.min_p:
                processors.append(MinPLogitsWarper(min_p=settings.min_p, min_tokens_to_keep=1))
        return processors

    def _loop_reproduces_generate(self) -> bool:
        """Whether `generate` would run exactly the loop `_sample_rows` runs for this model."""
        from transformers import GenerationMixin

        model_class = type(self.model)
        if (
            model_class.generate is not GenerationMixin.generate
            or model_class._sample is not GenerationMixin._sample
            or self.model.config.is_encoder_decoder
        ):
            return False
        experts = getattr(self.model, "get_experts_implementation", dict)() or {}
        if self.model.device.type != "cpu" and "grouped_mm" in experts.values():
            return False  # `generate` switches such MoE models to another kernel for decoding
        config = self.model.generation_config
        return all(
            getattr(config, field, None) in neutral
            for field, neutral in _LOOP_NEUTRAL_GENERATION_FIELDS.items()
        )

    def _result(self, request: GenerationRequest, completion: list[int]) -> GenerationResult:
        """The completion cut after its first EOS id, with its finish reason and text."""
        stopped = next((i for i, token in enumerate(completion) if token in self.eos_ids), None)
        if stopped is not None:
            completion = completion[: stopped + 1]
        finish = "stop" if stopped is not None else "length"
        text = self.tokenizer.decode(completion, skip_special_tokens=True)
        settings = self.sampling
        return GenerationResult(request.key, tuple(completion), text, finish, settings.carried())

    def _one(self, request: GenerationRequest) -> GenerationResult:
        """One sample through `generate` itself (a model the loop does not reproduce, or an
        empty budget)."""
        torch = self._torch
        torch.manual_seed(request.seed % (2**63))
        with torch.no_grad():
            return self._result(request, self._generate_one(request))

    def _sample_rows(self, requests: Sequence[GenerationRequest]) -> list[list[int]]:
        """HF `_sample` for requests of one prompt and budget at once, one row each: each row
        draws from a generator of its own seeded with its sample's seed, and the rows of one
        prompt need no padding (on the CPU the tests run on they are computed bit for bit as one
        row alone: a test holds it), so a sample is the same whichever others share its batch. A row keeps being computed after
        its EOS (it changes no other row) until every row has stopped."""
        from transformers import DynamicCache

        torch = self._torch
        rows = len(requests)
        prompt_length = len(requests[0].prompt_ids)
        total = prompt_length + requests[0].max_tokens
        # the sequences so far (the repetition penalty reads them) and `generate`'s mask
        ids = torch.empty((rows, total), dtype=torch.long, device=self.device)
        ids[:, :prompt_length] = torch.tensor(requests[0].prompt_ids, dtype=torch.long)
        mask = torch.ones((rows, total), dtype=torch.long, device=self.device)
        cache = DynamicCache(config=self.model.config.get_text_config(decoder=True))
        generators = [
            torch.Generator(device=self.device).manual_seed(r.seed % (2**63)) for r in requests
        ]
        completions: list[list[int]] = [[] for _ in requests]
        running = set(range(rows))
        model_inputs = ids[:, :prompt_length]
        for length in range(prompt_length, total):
            outputs = self.model(
                input_ids=model_inputs,
                attention_mask=mask[:, :length],
                use_cache=True,
                return_dict=True,
                **{self._cache_arg: cache},
            )
            logits = outputs.logits[:, -1].to(copy=True, dtype=torch.float32)
            del outputs
            next_tokens = self._next_tokens(self._processors(ids[:, :length], logits), generators)
            ids[:, length] = next_tokens
            for row, token in enumerate(next_tokens.tolist()):
                if row in running:
                    completions[row].append(token)
                    if token in self.eos_ids:
                        running.discard(row)
            if not running:
                break
            model_inputs = ids[:, length : length + 1]
        return completions

    def _next_tokens(self, scores: Any, generators: list[Any]) -> Any:
        """Each row's next token: drawn from its softmax with the row's own generator, or its
        argmax at temperature 0."""
        torch = self._torch
        if self.sampling.temperature <= 0:
            return torch.argmax(scores, dim=-1)
        probs = torch.nn.functional.softmax(scores, dim=-1)
        return torch.cat(
            [
                torch.multinomial(probs[row : row + 1], num_samples=1, generator=generator)[:, 0]
                for row, generator in enumerate(generators)
            ]
        )

    def _generate_one(self, request: GenerationRequest) -> list[int]:
        """HF `generate` itself, for a model whose generation config asks it for more."""
        torch = self._torch
        prompt = torch.tensor([list(request.prompt_ids)], dtype=torch.long, device=self.device)
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
        output = self.model.generate(
            prompt,
            attention_mask=torch.ones_like(prompt),
            max_new_tokens=request.max_tokens,
            eos_token_id=sorted(self.eos_ids),
            pad_token_id=self.pad_id,
            **sampling,
        )
        return output[0, prompt.shape[1] :].tolist()

    def generate(self, requests: Sequence[GenerationRequest]) -> Iterator[GenerationResult]:
        """The requests in order; adjacent requests of one prompt and budget (a problem's
        samples) sampled together, up to `ROWS_PER_BATCH` at a time."""
        torch = self._torch
        for group in _same_prompt_runs(requests, ROWS_PER_BATCH):
            if not group[0].prompt_ids:
                raise ValueError(
                    f"request {group[0].key} has an empty prompt: nothing to sample from"
                )
            if not (self.uses_loop and group[0].max_tokens > 0):
                yield from (self._one(request) for request in group)
                continue
            with torch.inference_mode():  # as `no_grad`, without autograd's bookkeeping
                completions = self._sample_rows(group)
            yield from (self._result(r, c) for r, c in zip(group, completions, strict=True))


# Rows sampled at once by the transformers engine: on the tiny demo model on CPU a decoding step
# of 8 rows costs about 1.5 steps of one (`benchmarks/bench_transformers_engine.py`).
ROWS_PER_BATCH = 8


def _same_prompt_runs(
    requests: Sequence[GenerationRequest], limit: int
) -> Iterator[list[GenerationRequest]]:
    """Runs of adjacent requests with the same prompt ids and budget, at most `limit` each."""
    run: list[GenerationRequest] = []
    for request in requests:
        if run and (
            len(run) == limit
            or request.prompt_ids != run[0].prompt_ids
            or request.max_tokens != run[0].max_tokens
        ):
            yield run
            run = []
        run.append(request)
    if run:
        yield run
