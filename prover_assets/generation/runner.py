"""Sampling into a generations file: keyed, resumable, every row within the record contract.

Keys are `(problem_id, sample_idx, round, cap_tokens)`; present keys are skipped, a torn last
line is dropped. The effective `max_tokens` is `min(cap, max_model_len - len(prompt_ids))`
(`context_clipped` when below the cap). A round-0 prompt that leaves no room is a config error
(the window is too small for the eval set); a correction prompt that leaves none is recorded as
such (`no_room`), never silently dropped. Per-sample seeds derive from the base seed and the key.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from prover_assets.config import ConfigError
from prover_assets.generation.engines import (
    EngineOpening,
    GenerationEngine,
    GenerationRequest,
    GenerationResult,
)
from prover_assets.generation.prompts import render_prompt, round0_messages
from prover_assets.lean.extract import ReinsertionError, extract_lean_code, reinsert_statement
from prover_assets.records import (
    SAMPLING_FIELDS,
    Appender,
    Generation,
    Message,
    ParentRef,
    Problem,
    SampleKey,
    Sampling,
    SamplingSettings,
)
from prover_assets.records.outputs import StageResult

__all__ = [
    "CorrectionCounts",
    "GenerationBatchResult",
    "GenerationStats",
    "SamplePlan",
    "SampleSpec",
    "generate_samples",
    "round0_specs",
    "sample_seed",
]

log = logging.getLogger(__name__)
Progress = Callable[["GenerationStats"], None]


@dataclass(frozen=True)
class SampleSpec:
    """One sample to generate: its problem, index, round, cap, messages and parent."""

    problem: Problem
    sample_idx: int
    round: int
    cap_tokens: int
    messages: tuple[Message, ...]
    parent: SampleKey | None = None

    @property
    def key(self) -> SampleKey:
        return SampleKey(self.problem.problem_id, self.sample_idx, self.round, self.cap_tokens)


def round0_specs(problems: Sequence[Problem], n_samples: int, cap: int) -> list[SampleSpec]:
    """The round-0 samples: `n_samples` per problem at cap `cap`, each prompted with its
    statement."""
    specs = []
    for problem in problems:
        messages = tuple(round0_messages(problem.formal_statement))
        specs += [SampleSpec(problem, i, 0, cap, messages) for i in range(n_samples)]
    return specs


def sample_seed(base: int, key: SampleKey) -> int:
    """A 63-bit seed from the base seed and the sample's key (stable across runs)."""
    problem_id, sample_idx, round, cap = key
    digest = hashlib.sha256(f"{base}|{problem_id}|{sample_idx}|{round}|{cap}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


@dataclass
class GenerationStats:
    """Counts, token lengths and rates of one generation step, as it goes."""

    total: int = 0
    already_present: int = 0
    generated_now: int = 0
    no_room: int = 0
    context_clipped: int = 0
    hit_cap: int = 0  # finish_reason length
    no_code: int = 0
    reinsertion_errors: int = 0
    completion_tokens: list[int] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    torn_dropped: int = 0

    @property
    def done(self) -> int:
        return self.already_present + self.generated_now

    def count(self, record: Generation) -> None:
        """One sample generated now."""
        self.generated_now += 1
        self.completion_tokens.append(len(record.completion_ids))
        self.context_clipped += record.context_clipped
        self.hit_cap += record.hit_cap
        self.no_code += record.lean_code is None
        self.reinsertion_errors += record.lean_code_error is not None

    def tokens_per_s(self) -> float:
        return sum(self.completion_tokens) / max(time.monotonic() - self.started, 1e-9)

    def samples_per_s(self) -> float:
        """Samples generated now per second: the rate the remaining samples are done at."""
        return self.generated_now / max(time.monotonic() - self.started, 1e-9)

    def percentiles(self) -> dict[str, int | None]:
        values = sorted(self.completion_tokens)
        if not values:
            return {"p50": None, "p90": None, "p99": None, "max": None}
        pick = lambda q: values[min(len(values) - 1, int(q * (len(values) - 1) + 0.5))]  # noqa: E731
        return {"p50": pick(0.5), "p90": pick(0.9), "p99": pick(0.99), "max": values[-1]}

    def to_result(self, *, rows: int, plan: SamplePlan) -> GenerationBatchResult:
        """The step's result once every planned sample is in the stream (`rows` of them)."""
        return GenerationBatchResult(
            total=self.total,
            already_present=self.already_present,
            generated_now=self.generated_now,
            no_room=self.no_room,
            context_clipped=self.context_clipped,
            hit_cap=self.hit_cap,
            hit_cap_share=self.hit_cap / self.generated_now if self.generated_now else None,
            no_code=self.no_code,
            reinsertion_errors=self.reinsertion_errors,
            torn_dropped=self.torn_dropped,
            completion_tokens=self.percentiles(),
            mean_completion_tokens=(
                sum(self.completion_tokens) / len(self.completion_tokens)
                if self.completion_tokens
                else None
            ),
            tokens_per_s=self.tokens_per_s(),
            rows=rows,
            plan=plan,
        )


class CorrectionCounts(BaseModel):
    """How a correction round chose its parents from the previous round."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    solved_problems: int
    unsolved_problems: int
    parents: int
    no_repl_errors: int  # failed samples left out: no Lean error to correct


class SamplePlan(BaseModel):
    """What a generation batch asked for."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    problems: int  # problems with at least one sample in the batch
    samples_per_problem: int  # the run's n_samples
    samples: int
    corrections: CorrectionCounts | None = None  # correction rounds only


class GenerationBatchResult(StageResult):
    """A generation step's counts, completion lengths and rate; `rows` is what the stream holds
    (every planned sample)."""

    total: int
    already_present: int
    generated_now: int
    no_room: int
    context_clipped: int
    hit_cap: int
    hit_cap_share: float | None
    no_code: int
    reinsertion_errors: int
    torn_dropped: int
    completion_tokens: dict[str, int | None]  # p50, p90, p99, max
    mean_completion_tokens: float | None
    tokens_per_s: float
    rows: int
    plan: SamplePlan


def _lean_code(problem: Problem, completion: str) -> tuple[str | None, str | None]:
    code = extract_lean_code(completion)
    if code is None:
        return None, None
    try:
        reinsert_statement(problem.formal_statement, code)
    except ReinsertionError as exc:
        return code, exc.reason
    return code, None


def generate_samples(
    specs: Sequence[SampleSpec],
    engine: GenerationEngine,
    tokenizer: Any,
    appender: Appender[Generation],
    *,
    opening: EngineOpening,
    progress: Progress | None = None,
) -> GenerationStats:
    """Generate every spec whose key is not in `appender` yet, as `engine` was opened
    (`opening`: the model, sampling, seeds and window every record names); commit every
    `opening.commit_every`; `progress` is told after each sample and at the end."""
    max_model_len = opening.max_model_len
    model = (str(opening.model_path), opening.model_rev, opening.sampling)
    stats = GenerationStats(total=len(specs), torn_dropped=appender.torn_dropped)
    notify = progress or (lambda done: None)
    pending: dict[SampleKey, tuple[SampleSpec, str, list[int], int, int]] = {}
    no_room: list[Generation] = []
    for spec in specs:
        if spec.key in appender:
            stats.already_present += 1
            continue
        prompt_text, prompt_ids = render_prompt(tokenizer, spec.messages)
        max_tokens = min(spec.cap_tokens, max_model_len - len(prompt_ids))
        seed = sample_seed(opening.seed, spec.key)
        if max_tokens <= 0:
            _refuse_round0_without_room(spec, len(prompt_ids), max_model_len)
            no_room.append(_record(spec, prompt_text, prompt_ids, None, 0, seed, *model))
            continue
        pending[spec.key] = (spec, prompt_text, prompt_ids, max_tokens, seed)
    if no_room:
        appender.append_many(no_room)
        stats.no_room += len(no_room)
        stats.generated_now += len(no_room)
    requests = [
        GenerationRequest(key, tuple(ids), max_tokens, seed)
        for key, (_, _, ids, max_tokens, seed) in pending.items()
    ]
    chunk: list[Generation] = []
    for result in engine.generate(requests):
        spec, prompt_text, prompt_ids, max_tokens, seed = pending[result.key]
        record = _record(spec, prompt_text, prompt_ids, result, max_tokens, seed, *model)
        chunk.append(record)
        stats.count(record)
        if len(chunk) >= opening.commit_every:
            appender.append_many(chunk)
            chunk.clear()
        notify(stats)  # every sample: the caller decides how often to show it
    if chunk:
        appender.append_many(chunk)
    notify(stats)
    return stats


def _refuse_round0_without_room(spec: SampleSpec, prompt_tokens: int, max_model_len: int) -> None:
    """A round-0 prompt is the statement in the protocol's text, known before the run: one that
    leaves no room is a context window too small for the eval set, not an outcome to record.
    (A correction round's prompt carries the model's own attempt and may outgrow any window.)"""
    if spec.round == 0:
        raise ConfigError(
            f"model.max_model_len {max_model_len} leaves no room for a completion of "
            f"{spec.problem.problem_id!r}: its round-0 prompt is {prompt_tokens} tokens; set "
            f"model.max_model_len to at least {prompt_tokens + spec.cap_tokens} for cap "
            f"{spec.cap_tokens}"
        )


def _record(
    spec: SampleSpec,
    prompt_text: str,
    prompt_ids: list[int],
    result: GenerationResult | None,
    max_tokens: int,
    seed: int,
    model_path: str,
    model_rev: str,
    sampling: SamplingSettings,
) -> Generation:
    completion_text = result.completion_text if result else ""
    carried = result.sampling if result else sampling.carried()
    lean_code, lean_code_error = (
        _lean_code(spec.problem, completion_text) if result else (None, None)
    )
    return Generation(
        problem_id=spec.problem.problem_id,
        sample_idx=spec.sample_idx,
        round=spec.round,
        cap_tokens=spec.cap_tokens,
        prompt_ids=prompt_ids,
        completion_ids=list(result.completion_ids) if result else [],
        prompt_text=prompt_text,
        completion_text=completion_text,
        finish_reason=result.finish_reason if result else "no_room",
        lean_code=lean_code,
        lean_code_error=lean_code_error,
        context_clipped=max_tokens < spec.cap_tokens,
        messages=list(spec.messages),
        model_path=model_path,
        model_rev=model_rev,
        sampling=Sampling(
            # a sample never sent (no room) records what its request would have carried
            **{name: carried.get(name) for name in SAMPLING_FIELDS},
            max_tokens=max(max_tokens, 0),
            seed=seed,
        ),
        parent=ParentRef.of(spec.parent) if spec.parent else None,
    )
