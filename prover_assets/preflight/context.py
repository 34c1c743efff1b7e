"""The context window against the prompts the round will send, before any GPU time is spent.

Every eval problem's round-0 prompt, rendered by the model's own tokenizer and chat template,
must leave room for each cap below the largest: a sample clipped below its cap
(`max_model_len - prompt`, `context_clipped`) would be scored at a cap it never had. At the
largest cap the runner clamps to the window by design, as Goedel-Prover-V2's scripts do
(`max_tokens = max_model_len - prompt`), so there a prompt needs room for a completion at all;
the generation step refuses one that leaves none, but only when it reaches that problem, hours
into the round.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prover_assets.config import ExperimentSpec, RunConfig, resolve_path
from prover_assets.generation.prompts import render_prompt, round0_messages
from prover_assets.preflight.model import CheckStatus, Measurement, PreflightCheck, timed
from prover_assets.problems.stages import read_eval_set

__all__ = [
    "LongestPrompt",
    "context_check",
    "context_faults",
    "correction_rows_note",
    "longest_prompts",
]


@dataclass(frozen=True)
class LongestPrompt:
    """An eval set's longest round-0 prompt, in the model's tokens."""

    eval_set: str
    problem_id: str
    tokens: int


def longest_prompts(spec: ExperimentSpec, tokenizer: Any) -> list[LongestPrompt]:
    """Each eval set's longest round-0 prompt (the problems its `limit` keeps)."""
    found = []
    for name, eval_set in spec.eval_sets.items():
        source = resolve_path(eval_set.file.path, f"eval_sets.{name}.file.path")
        problems = read_eval_set(eval_set, source)[0][: eval_set.limit]
        lengths = [
            (len(render_prompt(tokenizer, round0_messages(p.formal_statement))[1]), p.problem_id)
            for p in problems
        ]
        if lengths:
            tokens, problem_id = max(lengths)
            found.append(LongestPrompt(name, problem_id, tokens))
    return found


def context_faults(spec: ExperimentSpec, longest: list[LongestPrompt]) -> list[str]:
    """What the window cannot hold: a prompt and a cap below the largest, or a prompt that
    leaves no room for a completion at all."""
    window, largest = spec.model.max_model_len, max(spec.generation.caps)
    faults = []
    for prompt in longest:
        where = f"{prompt.eval_set} {prompt.problem_id!r} ({prompt.tokens}-token prompt)"
        if prompt.tokens >= window:
            faults.append(
                f"{where} leaves no room for a completion in model.max_model_len {window}"
            )
            continue
        faults += [
            f"{where} with cap {cap} needs {prompt.tokens + cap} > model.max_model_len {window}"
            for cap in spec.caps_of(prompt.eval_set)
            if cap < largest and prompt.tokens + cap > window
        ]
    return faults


def correction_rows_note(spec: ExperimentSpec, longest: list[LongestPrompt]) -> str | None:
    """What `sft.max_seq_len` will drop, said before the round: a correction row is its prompt
    (the round-0 prompt, the failed attempt of up to `sft.cap` tokens, Lean's errors) and a
    completion of up to `sft.cap`; one longer than the limit is dropped as `too_long`."""
    if spec.corrections.rounds == 0 or not longest:
        return None
    bound = max(p.tokens for p in longest) + 2 * spec.sft.cap
    if bound <= spec.sft.max_seq_len:
        return None
    return (
        f"correction rows can reach {bound} tokens and more (the longest prompt, 2 x sft.cap "
        f"{spec.sft.cap} and Lean's errors), above sft.max_seq_len {spec.sft.max_seq_len}: those "
        "are dropped from SFT as too_long, counted in sft_shards"
    )


def context_check(config: RunConfig, tokenizer_folder: Path) -> PreflightCheck:
    """`prompt.context`: every eval prompt plus each cap fits `model.max_model_len`, and the
    largest cap leaves room for a completion."""
    spec = config.experiment
    largest = max(spec.generation.caps)
    threshold = (
        f"every eval prompt plus each cap below {largest} within model.max_model_len "
        f"{spec.model.max_model_len}, and room for a completion at {largest}"
    )
    remedy = (
        "raise model.max_model_len to the figure named (the engine's window must hold it), or "
        "lower the caps; at the largest cap the window clamps the completion by design"
    )

    def measure() -> Measurement:
        from transformers import AutoTokenizer

        longest = longest_prompts(spec, AutoTokenizer.from_pretrained(tokenizer_folder))
        figures = {"longest_prompt_tokens": float(max((p.tokens for p in longest), default=0))}
        if faults := context_faults(spec, longest):
            return Measurement(CheckStatus.FAILED, "; ".join(faults), figures)
        said = ", ".join(f"{p.eval_set} {p.tokens} ({p.problem_id})" for p in longest)
        note = correction_rows_note(spec, longest)
        measured = f"longest round-0 prompts in tokens: {said}" + (f"; {note}" if note else "")
        return Measurement(CheckStatus.PASSED, measured, figures)

    return timed("prompt.context", threshold, remedy, measure)
