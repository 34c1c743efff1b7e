"""Export: merge the LoRA adapter into the base in fp32, cast to the registered dtype, save a
plain Hugging Face folder, prove parity.

The folder holds the weights in the registered dtype, the tokenizer and its chat template, and
the revision `sft-<sha256 of the weight shards>`. Two measurements, each a gate:

- **The merge**, in fp32: the merged model's log-probabilities of the tokens of fixed inputs
  equal base + adapter's (fp32, within `MERGE_TOLERANCE`, the rounding of the merge itself).
  peft keeps the adapter in fp32, so a merge done in bf16 would round the merged weights to
  bf16 (about 2^-9 relative per weight, over every layer) and fail an absolute bf16 bound even
  when it is right; merging in fp32 keeps the merge's own error apart from the cast's.
- **The cast**: the export, reloaded from its folder in the registered dtype, drifts from the
  fp32 merge by no more than `CAST_DRIFT_FACTOR` times what the base model drifts from itself
  under the same cast (plus `MERGE_TOLERANCE`), measured on the same inputs: the drift a bf16
  model has anyway is allowed, a merged or saved tensor that is wrong is not.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from prover_assets.model_loading import load_causal_lm
from prover_assets.records.outputs import StageResult

__all__ = [
    "CAST_DRIFT_FACTOR",
    "EXPORT_PHASES",
    "EXPORT_SHARD_BYTES",
    "MERGE_TOLERANCE",
    "ExportResult",
    "export_host_peak_bytes",
    "export_merged",
    "logprobs",
    "merge_device",
    "planned_export",
]

# fp32 rounding through 36 layers of an 8B model (two orders of the same sums: W x + B(A x)
# against (W + BA) x) is of order 1e-5..1e-4 on a logprob; a merge that is wrong by one tensor
# moves them by 1e-1 (the tests' perturbation). 1e-3 is far from both.
MERGE_TOLERANCE = 1e-3
# A correct merge's weights are the base's plus a low-rank update, rounded by the same cast with
# the same relative error, so its drift is of the base's size; twice it leaves room for that.
CAST_DRIFT_FACTOR = 2.0
# The largest weight file the export writes. safetensors' `save_file` copies each of a file's
# tensors to the host and keeps them until the file is written (`_flatten_as_ptr`,
# `_to_ndarray`: `tensor.to("cpu")`), so on a GPU this bounds what the host holds; transformers'
# own default (50 GB) would hold a whole 8B model.
EXPORT_SHARD_BYTES = 2 << 30
# What the fp32 merge holds on a GPU beside the weights (the adapter, the parity inputs'
# activations, the allocator's slack), as a share of them.
GPU_MERGE_HEADROOM = 1.25


class ExportResult(StageResult):
    """The merged model's revision, the fp32 merge's parity and the cast's drift beside the
    base model's under the same cast (max |Δ logprob| of the inputs' own tokens)."""

    revision: str
    dtype: str  # of the exported weights
    merge_max_abs_diff: float
    merge_max_abs_diff_full_vocabulary: float
    merge_tolerance: float
    cast_drift: float
    base_cast_drift: float
    cast_drift_allowance: float
    parity_inputs: int
    parity_tokens: int
    merged_on: str = "cpu"  # the device of the fp32 merge (`merge_device`)

    def parity_failures(self) -> list[str]:
        """What the export fails: the merge's parity, the cast's drift against the base's."""
        failures = []
        if self.merge_max_abs_diff > self.merge_tolerance:
            failures.append(
                f"the fp32 merge differs from base + adapter by {self.merge_max_abs_diff:.2e} "
                f"(tolerance {self.merge_tolerance:.0e})"
            )
        if self.cast_drift > self.cast_drift_allowance:
            failures.append(
                f"the {self.dtype} export drifts {self.cast_drift:.2e} from the fp32 merge, more "
                f"than {CAST_DRIFT_FACTOR:g} x the base's own drift {self.base_cast_drift:.2e} "
                f"under the same cast (allowance {self.cast_drift_allowance:.2e})"
            )
        return failures

    @property
    def parity_passed(self) -> bool:
        return not self.parity_failures()

    def describe(self) -> str:
        """One line: both measurements and their bounds."""
        return (
            f"fp32 merge max |Δ logprob| {self.merge_max_abs_diff:.2e} (tolerance "
            f"{self.merge_tolerance:.0e}); {self.dtype} cast drift {self.cast_drift:.2e}, base's "
            f"{self.base_cast_drift:.2e} (allowance {self.cast_drift_allowance:.2e}); "
            f"{self.parity_tokens} tokens"
        )


def logprobs(model: Any, inputs: Sequence[Sequence[int]]) -> list[tuple[Any, Any]]:
    """For each input: the log-probabilities over the vocabulary at every position, and those
    of the input's own next tokens (fp32, whatever the model's dtype), on the host whatever the
    model's device (the models compared are never on one device at once)."""
    import torch

    outputs = []
    with torch.no_grad():
        for ids in inputs:
            tokens = torch.tensor([list(ids)], device=model.device)
            full = torch.log_softmax(model(input_ids=tokens).logits.float(), dim=-1)[0]
            own = full[:-1].gather(-1, tokens[0, 1:, None])[:, 0]
            outputs.append((full.cpu(), own.cpu()))
    return outputs


def _max_diff(
    left: Sequence[tuple[Any, Any]], right: Sequence[tuple[Any, Any]], part: int
) -> float:
    return max(
        (float((a[part] - b[part]).abs().max()) for a, b in zip(left, right, strict=True)),
        default=0.0,
    )


def _cast(model: Any, dtype: str) -> Any:
    """The model with every weight in `dtype` (in place)."""
    import torch

    return model.to(getattr(torch, dtype))


def _load(folder: Path, dtype: str, device: str) -> Any:
    """The model in `folder` in `dtype`, loaded onto `device` (on a GPU straight from the mapped
    files, tensor by tensor: the host never holds it whole)."""
    import torch

    placed = {} if device == "cpu" else {"device_map": device}
    return load_causal_lm(folder, getattr(torch, dtype), **placed).eval()


def _freed() -> None:
    """Memory of the models just dropped given back: the host's, and the GPU's cache."""
    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _loaded_logprobs(
    folder: Path, dtype: str, inputs: Sequence[Sequence[int]], device: str
) -> list[Any]:
    """The log-probabilities of the model in `folder` loaded in `dtype` on `device`; the model
    is freed on return (only its outputs leave this frame)."""
    model = _load(folder, dtype, device)
    try:
        return logprobs(model, inputs)
    finally:
        del model
        _freed()


def merge_device(gpus: Sequence[int], gpu_memory_gib: float, parameters: int) -> str:
    """Where the fp32 merge runs: the first of the training's GPUs (free once training is done:
    both hold the `gpu` pool) when the fp32 model and its headroom fit its memory, else the
    host."""
    if gpus and 4 * parameters * GPU_MERGE_HEADROOM <= gpu_memory_gib * (1 << 30):
        return f"cuda:{gpus[0]}"
    return "cpu"


def planned_export(
    gpu_memory_gib: float, parameters: int, *, trains_on_gpu: bool
) -> tuple[int, str]:
    """The export's host peak and its merge's device, planned before the box's GPUs are known:
    on a GPU when training is on one and the fp32 model fits a card (which GPU does not change
    the host's share)."""
    device = merge_device([0] if trains_on_gpu else [], gpu_memory_gib, parameters)
    return export_host_peak_bytes(parameters, device), device


def export_host_peak_bytes(parameters: int, device: str = "cpu") -> int:
    """The export's host-memory peak, by its phases. On the host: the base in fp32 with the
    adapter merged in place (4 bytes a parameter) is the largest; the cast to the export's dtype
    happens in place, tensor by tensor, and the reloaded export and the base in that dtype are
    each loaded after the one before is freed. (The adapter and the log-probabilities of the
    parity inputs are small beside it; the safetensors files are mapped, not held.) On a GPU:
    one weight file's tensors while it is written (`EXPORT_SHARD_BYTES`)."""
    if device == "cpu":
        return 4 * parameters
    return min(EXPORT_SHARD_BYTES, 4 * parameters)


EXPORT_PHASES = (
    "loading the base model and the adapter in fp32",
    "base and base + adapter log-probabilities",
    "merging in fp32 and checking the merge",
    "casting, saving and reloading the export",
    "the base model's drift under the same cast",
)


def _merge_and_save(
    base_dir: Path,
    adapter_dir: Path,
    out_dir: Path,
    parity_inputs: Sequence[Sequence[int]],
    dtype: str,
    next_phase: Callable[[], None],
    device: str,
) -> tuple[list[Any], list[Any], list[Any]]:
    """Base + adapter in fp32 on `device`: the base's and the adapted model's log-probabilities,
    the merge's, then the merge cast to `dtype` and saved in `out_dir`. The models are freed on
    return."""
    from peft import PeftModel

    adapted = PeftModel.from_pretrained(_load(base_dir, "float32", device), adapter_dir).eval()
    next_phase()
    with adapted.disable_adapter():
        base_fp32 = logprobs(adapted, parity_inputs)
    reference = logprobs(adapted, parity_inputs)
    next_phase()
    merged = adapted.merge_and_unload()
    merged_fp32 = logprobs(merged, parity_inputs)
    next_phase()
    # save_pretrained makes the folder and its parents (os.makedirs, exist_ok)
    _cast(merged, dtype).save_pretrained(out_dir, max_shard_size=EXPORT_SHARD_BYTES)
    del merged, adapted
    _freed()
    return base_fp32, reference, merged_fp32


def export_merged(
    base_dir: Path,
    adapter_dir: Path,
    out_dir: Path,
    *,
    parity_inputs: Sequence[Sequence[int]],
    dtype: str = "float32",
    on_phase: Callable[[int, int, str], None] = lambda done, total, phase: None,
    device: str = "cpu",
) -> ExportResult:
    """Merge in fp32 on `device` (`merge_device`), check the merge, cast to `dtype`, save,
    reload, measure the cast's drift beside the base's; returns the revision and the
    measurements (the caller gates on `parity_passed`). `on_phase(done, total, phase)` is told
    as each of `EXPORT_PHASES` begins, and at the end."""
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    from prover_assets.generation.revision import write_local_revision

    hf_logging.disable_progress_bar()
    phases = iter(enumerate(EXPORT_PHASES))

    def next_phase() -> None:
        done, phase = next(phases)
        on_phase(done, len(EXPORT_PHASES), phase)

    next_phase()
    base_fp32, reference, merged_fp32 = _merge_and_save(
        base_dir, adapter_dir, out_dir, parity_inputs, dtype, next_phase, device
    )
    AutoTokenizer.from_pretrained(base_dir).save_pretrained(out_dir)
    revision = write_local_revision(out_dir, kind="sft")
    export_cast = _loaded_logprobs(out_dir, dtype, parity_inputs, device)
    next_phase()
    base_cast = _loaded_logprobs(base_dir, dtype, parity_inputs, device)
    on_phase(len(EXPORT_PHASES), len(EXPORT_PHASES), "done")
    base_drift = _max_diff(base_fp32, base_cast, 1)
    result = ExportResult(
        revision=revision,
        dtype=dtype,
        merge_max_abs_diff=_max_diff(reference, merged_fp32, 1),
        merge_max_abs_diff_full_vocabulary=_max_diff(reference, merged_fp32, 0),
        merge_tolerance=MERGE_TOLERANCE,
        cast_drift=_max_diff(merged_fp32, export_cast, 1),
        base_cast_drift=base_drift,
        cast_drift_allowance=CAST_DRIFT_FACTOR * base_drift + MERGE_TOLERANCE,
        parity_inputs=len(parity_inputs),
        parity_tokens=sum(len(ids) for ids in parity_inputs),
        merged_on=device,
    )
    (out_dir.parent / "parity.json").write_text(result.model_dump_json(indent=1) + "\n")
    return result
