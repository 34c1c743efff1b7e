"""Export: merge the LoRA adapter into the base, save a plain Hugging Face folder, prove parity.

The folder holds the weights, the tokenizer and its chat template, and the revision
`sft-<sha256 of the weight shards>`. It is reloaded with `AutoModelForCausalLM` and the
log-probabilities it gives the tokens of fixed inputs must equal the adapter model's (fp32:
within 2e-5, the rounding of the merge itself; bf16: 4e-3). The largest difference over the
whole vocabulary is reported beside it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from prover_assets.records.outputs import StageResult

__all__ = ["PARITY_TOLERANCE", "ExportResult", "export_merged", "logprobs"]

PARITY_TOLERANCE = {"float32": 2e-5, "bfloat16": 4e-3}


class ExportResult(StageResult):
    """The merged model's revision and how closely it reproduces the adapter model."""

    revision: str
    parity_max_abs_diff: float
    parity_max_abs_diff_full_vocabulary: float
    parity_tolerance: float
    parity_inputs: int
    parity_tokens: int
    parity_passed: bool
    dtype: str


def logprobs(model: Any, inputs: Sequence[Sequence[int]]) -> list[tuple[Any, Any]]:
    """For each input: the log-probabilities over the vocabulary at every position, and those
    of the input's own next tokens."""
    import torch

    outputs = []
    with torch.no_grad():
        for ids in inputs:
            tokens = torch.tensor([list(ids)])
            full = torch.log_softmax(model(input_ids=tokens).logits.float(), dim=-1)[0]
            outputs.append((full, full[:-1].gather(-1, tokens[0, 1:, None])[:, 0]))
    return outputs


def _max_diff(
    left: Sequence[tuple[Any, Any]], right: Sequence[tuple[Any, Any]], part: int
) -> float:
    return max(
        (float((a[part] - b[part]).abs().max()) for a, b in zip(left, right, strict=True)),
        default=0.0,
    )


EXPORT_PHASES = (
    "loading the base model and the adapter",
    "the adapter model's reference log-probabilities",
    "merging and saving",
    "reloading the merged model and checking parity",
)


def export_merged(
    base_dir: Path,
    adapter_dir: Path,
    out_dir: Path,
    *,
    parity_inputs: Sequence[Sequence[int]],
    dtype: str = "float32",
    on_phase: Callable[[int, int, str], None] = lambda done, total, phase: None,
) -> ExportResult:
    """Merge, save, reload, compare; returns the revision and the parity measurement.
    `on_phase(done, total, phase)` is told as each of `EXPORT_PHASES` begins, and at the end."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    from prover_assets.generation.revision import write_local_revision

    hf_logging.disable_progress_bar()
    phases = iter(enumerate(EXPORT_PHASES))

    def next_phase() -> None:
        done, phase = next(phases)
        on_phase(done, len(EXPORT_PHASES), phase)

    torch_dtype = getattr(torch, dtype)
    next_phase()
    base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch_dtype)
    adapted = PeftModel.from_pretrained(base, adapter_dir).eval()
    next_phase()
    reference = logprobs(adapted, parity_inputs)
    next_phase()
    merged = adapted.merge_and_unload()
    out_dir.mkdir(parents=True, exist_ok=True)
    merged.save_pretrained(out_dir)
    tokenizer = AutoTokenizer.from_pretrained(base_dir)
    tokenizer.save_pretrained(out_dir)
    revision = write_local_revision(out_dir, kind="sft")
    next_phase()
    reloaded = AutoModelForCausalLM.from_pretrained(out_dir, dtype=torch_dtype).eval()
    exported = logprobs(reloaded, parity_inputs)
    on_phase(len(EXPORT_PHASES), len(EXPORT_PHASES), "done")
    max_abs = _max_diff(reference, exported, 1)
    tolerance = PARITY_TOLERANCE[dtype]
    result = ExportResult(
        revision=revision,
        parity_max_abs_diff=max_abs,
        parity_max_abs_diff_full_vocabulary=_max_diff(reference, exported, 0),
        parity_tolerance=tolerance,
        parity_inputs=len(parity_inputs),
        parity_tokens=sum(len(ids) for ids in parity_inputs),
        parity_passed=max_abs <= tolerance,
        dtype=dtype,
    )
    (out_dir.parent / "parity.json").write_text(result.model_dump_json(indent=1) + "\n")
    return result
