"""The prompts of the Goedel protocol (handler `dpskcot`), byte-exact (PROTOCOL.md).

Messages are rendered through the model tokenizer's own chat template with the generation
prompt added, as the baseline was evaluated; `prompt_ids` come from the tokenizer and are
never re-derived later (training uses them exactly as sampled).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from prover_assets.records import Message

__all__ = ["correction_messages", "render_prompt", "round0_messages"]

_ROUND0 = (
    "Complete the following Lean 4 code:\n\n```lean4\n{statement}```\n\n"
    "Before producing the Lean 4 code to formally prove the given theorem, provide a detailed "
    "proof plan outlining the main proof steps and strategies.\n"
    "The plan should highlight key ideas, intermediate lemmas, and proof structures that will "
    "guide the construction of the final formal proof."
)
_CORRECTION = (
    "The proof (Round {previous}) is not correct. Following is the compilation error message, "
    "where we use <error></error> to signal the position of the error.\n\n{errors}\n\n"
    "Before producing the Lean 4 code to formally prove the given theorem, provide a detailed "
    "analysis of the error message."
)


def round0_messages(statement: str) -> list[Message]:
    """One user message asking for a plan and a proof of the normalised `statement`."""
    return [Message(role="user", content=_ROUND0.format(statement=statement))]


def correction_messages(
    previous_messages: Sequence[Message],
    previous_completion: str,
    error_block: str,
    round: int,
) -> list[Message]:
    """The previous conversation, the failed attempt as the assistant's turn, and the errors.

    `round` is the correction round being prompted (1 for the first correction); the text
    names the round that failed, `round - 1`.
    """
    if round < 1:
        raise ValueError(f"correction rounds start at 1, got {round}")
    return [
        *previous_messages,
        Message(role="assistant", content=previous_completion),
        Message(role="user", content=_CORRECTION.format(previous=round - 1, errors=error_block)),
    ]


def render_prompt(tokenizer: Any, messages: Sequence[Message]) -> tuple[str, list[int]]:
    """The prompt text through the chat template (generation prompt added) and its token ids:
    the messages as the template's dicts only here, at the tokenizer's door."""
    chat = [m.model_dump() for m in messages]
    text = tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    return text, list(ids)
