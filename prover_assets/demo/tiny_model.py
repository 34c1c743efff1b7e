"""A tiny Qwen3-architecture model and tokenizer, built locally, for the CPU tests and the demo.

The tokenizer is a byte-level BPE trained here on Lean text from the shipped data, with Qwen's
special tokens and a Qwen-style chat template; the model has random weights from a fixed seed.
Both are saved as a normal Hugging Face folder and loaded back with `AutoModelForCausalLM` and
`AutoTokenizer`: no hub access anywhere.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from prover_assets.generation.revision import write_local_revision
from prover_assets.records import Message
from prover_assets.records.outputs import StageResult
from prover_assets.records.progress import TrainingProgress, TrainingProgressCallback
from prover_assets.verify.simulator import DEMO_TACTICS


class FormatTuningResult(StageResult):
    """The demo base model's format tuning: its loss from first to last step, and its time."""

    steps: int
    first_loss: float
    final_loss: float
    seconds: float
    examples: int


__all__ = [
    "CHAT_TEMPLATE",
    "EOS_TOKEN",
    "PAD_TOKEN",
    "build_tiny_model",
    "lean_training_text",
    "tuning_recipe",
]

PAD_TOKEN = "<|endoftext|>"
IM_START = "<|im_start|>"
EOS_TOKEN = "<|im_end|>"
# Qwen's template for plain messages: each turn `<|im_start|>{role}\n{content}<|im_end|>\n`,
# then `<|im_start|>assistant\n` when a generation prompt is asked for.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
# Qwen2's pre-tokenizer split pattern (letters, numbers one by one, punctuation runs, spaces).
_QWEN_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def lean_training_text() -> list[str]:
    """Lean statements and prompt-like text from the data shipped with the package."""
    from importlib.resources import files

    data = Path(str(files("prover_assets") / "data" / "goedel-prover-v2"))
    texts = []
    for name in ("minif2f.jsonl", "MOBench.jsonl"):
        for line in (data / name).read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            texts.append(row["lean4_code"])
    return texts


def _train_tokenizer(texts: Iterable[str], vocab_size: int):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(_QWEN_SPLIT), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[PAD_TOKEN, IM_START, EOS_TOKEN],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer)
    return tokenizer


def build_tiny_model(
    folder: Path,
    *,
    hidden_size: int = 64,
    layers: int = 2,
    vocab_size: int = 1024,
    seed: int = 0,
    texts: Iterable[str] | None = None,
) -> Path:
    """Write a tiny Qwen3 model + tokenizer to `folder` (a plain HF folder) and return it."""
    import torch
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=_train_tokenizer(
            texts if texts is not None else lean_training_text(), vocab_size
        ),
        eos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        bos_token=None,
        model_max_length=4096,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(folder)
    heads = max(2, hidden_size // 32)
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 3,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=max(1, heads // 2),
        head_dim=hidden_size // heads,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.convert_tokens_to_ids(EOS_TOKEN),
        pad_token_id=tokenizer.convert_tokens_to_ids(PAD_TOKEN),
    )
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config)
    model.generation_config.eos_token_id = config.eos_token_id
    model.generation_config.pad_token_id = config.pad_token_id
    model.save_pretrained(folder)
    write_local_revision(folder, kind="tiny")
    return folder


def format_completion(statement: str, variant: int) -> str:
    """What the demo teaches the tiny model to answer: a short plan, then a fenced `lean4` block
    that displays the problem's theorem and a tactic proof (the model's output format)."""
    signature = statement[statement.index("theorem") :].removesuffix(":= by sorry").rstrip()
    tactic = DEMO_TACTICS[variant % len(DEMO_TACTICS)]
    return (
        "Proof plan: normalise the goal, then close it with a standard decision procedure.\n\n"
        f"```lean4\n{signature} := by\n  {tactic}\n```"
    )


def correction_example(statement: str, failed: int, fixed: int) -> tuple[list[Message], str]:
    """A correction round's prompt (the protocol's own: the first attempt, closed by tactic
    `failed`, and Lean's error on its last line) and an answer closed by tactic `fixed`."""
    from prover_assets.generation.prompts import correction_messages, round0_messages
    from prover_assets.lean.feedback import format_error_block

    first = format_completion(statement, failed)
    code = first[first.index("```lean4\n") + len("```lean4\n") : first.rindex("\n```")]
    lines = code.split("\n")
    tactic = lines[-1].strip()
    error = {
        "severity": "error",
        "pos": {"line": len(lines), "column": len(lines[-1]) - len(tactic)},
        "endPos": {"line": len(lines), "column": len(lines[-1])},
        "data": f"{tactic.split()[0]} failed",
    }
    messages = correction_messages(
        round0_messages(statement), first, format_error_block(code, [error]), round=1
    )
    return messages, format_completion(statement, fixed)


def _format_examples(tokenizer: Any, statements: list[str]) -> list[tuple[list[int], list[int]]]:
    """(prompt ids, completion ids + EOS): each statement closed by each of the demo's tactics
    (the base model closes a proof with each about equally often), and one correction of each
    (so that it answers a correction round's prompt in the same format, with another tactic)."""
    from prover_assets.generation.prompts import render_prompt, round0_messages

    def encoded(text: str) -> list[int]:
        return tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]

    examples = []
    for index, statement in enumerate(statements):
        _, prompt_ids = render_prompt(tokenizer, round0_messages(statement))
        for variant in range(len(DEMO_TACTICS)):
            examples.append((prompt_ids, encoded(format_completion(statement, index + variant))))
        fixed = index + 1 + index % (len(DEMO_TACTICS) - 1)  # never the failed tactic
        messages, answer = correction_example(statement, index, fixed)
        examples.append((render_prompt(tokenizer, messages)[1], encoded(answer)))
    return examples


def tuning_recipe(folder: Path, statements: list[str]) -> str:
    """The sha256 of everything a format tuning of the untuned model in `folder` on `statements`
    depends on beyond its settings: the model's files, the examples as token ids (the prompts,
    the answers, the tactics) and this module's source (the training loop and its defaults). A
    shared tuning keyed by it is never one of other code."""
    from transformers import AutoTokenizer

    from prover_assets.generation.revision import REVISION_FILE
    from prover_assets.records.hashing import sha256_file, sha256_text

    files = {
        path.name: sha256_file(path)
        for path in sorted(folder.iterdir())
        if path.is_file() and path.name != REVISION_FILE  # its revision is random
    }
    examples = _format_examples(AutoTokenizer.from_pretrained(folder), statements)
    return sha256_text(
        json.dumps(
            {"files": files, "examples": examples, "code": sha256_file(Path(__file__))},
            sort_keys=True,
        )
    )


def _padded(batch: list[tuple[list[int], list[int]]], pad_id: int) -> tuple[Any, Any, Any]:
    """Input ids, attention mask and labels (loss on the completion only), right-padded."""
    import torch

    width = max(len(p) + len(c) for p, c in batch)
    input_ids = torch.full((len(batch), width), pad_id)
    labels = torch.full((len(batch), width), -100)
    attention = torch.zeros((len(batch), width), dtype=torch.long)
    for row, (prompt, completion) in enumerate(batch):
        ids = prompt + completion
        input_ids[row, : len(ids)] = torch.tensor(ids)
        labels[row, len(prompt) : len(ids)] = torch.tensor(completion)
        attention[row, : len(ids)] = 1
    return input_ids, attention, labels


def _epochs(count: int, length: int, generator: Any) -> list[int]:
    """`length` example indices: shuffled epochs of all `count` examples, one after another, so
    that every example (every tactic of every statement) is seen equally often."""
    import torch

    order: list[int] = []
    while len(order) < length:
        order += torch.randperm(count, generator=generator).tolist()
    return order[:length]


def teach_output_format(
    folder: Path,
    statements: list[str],
    *,
    steps: int,
    seed: int,
    learning_rate: float = 3e-3,
    batch_size: int = 4,
    progress: TrainingProgressCallback | None = None,
) -> FormatTuningResult:
    """Fine-tune the tiny model in `folder` for `steps` steps to answer `statements` in the output
    format (loss on the completion tokens only), then save it with a fresh `demo-` revision.

    Each statement is taught closed by every tactic of `DEMO_TACTICS` in turn, so that sampling
    gives different proofs of one problem, and the demo's planted rule (which accepts one of
    those tactics) accepts about one sample in `len(DEMO_TACTICS)` of the base model's."""
    import time

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    started = time.monotonic()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    examples = _format_examples(tokenizer, statements)
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
    # Linear decay to 0: the last batches do not tilt which tactic the model prefers.
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda done: 1 - done / steps)
    model.train()
    losses = []
    tokens = 0
    order = _epochs(len(examples), steps * batch_size, generator)
    for step in range(1, steps + 1):
        batch = [examples[i] for i in order[(step - 1) * batch_size : step * batch_size]]
        input_ids, attention, labels = _padded(batch, tokenizer.pad_token_id)
        loss = model(input_ids=input_ids, attention_mask=attention, labels=labels).loss
        loss.backward()
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        losses.append(loss.item())
        tokens += int(attention.sum())
        if progress is not None:
            progress(TrainingProgress(step, steps, losses[-1], tokens, time.monotonic() - started))
    model.eval()
    model.save_pretrained(folder)
    write_local_revision(folder, kind="demo")
    return FormatTuningResult(
        steps=steps,
        first_loss=losses[0],
        final_loss=losses[-1],
        seconds=time.monotonic() - started,
        examples=len(examples),
    )
