"""`training.attention`: the attention a GPU run trains with, proved before the run.

flash-attention 2 is proved by importing `flash_attn` and running one variable-length forward
on the first training GPU, in a child process (a wheel built for another torch fails on import
with an undefined symbol, and a kernel built for another GPU fails only when it runs). SDPA, when
the config names it, is said with its cost; on CPU the check does not apply.
"""

from __future__ import annotations

import os
import subprocess
import sys

from prover_assets.config import RunConfig
from prover_assets.preflight.model import CheckStatus, Measurement, PreflightCheck, timed

__all__ = ["VARLEN_FORWARD", "attention_check"]

# One causal variable-length forward of two packed rows (3 and 5 tokens), as the trainer's
# packed micro-batches are read.
VARLEN_FORWARD = """
import flash_attn, torch
from flash_attn import flash_attn_varlen_func
q = torch.randn(8, 2, 64, device="cuda", dtype=torch.bfloat16)
bounds = torch.tensor([0, 3, 8], dtype=torch.int32, device="cuda")
out = flash_attn_varlen_func(q, q, q, bounds, bounds, 5, 5, causal=True)
torch.cuda.synchronize()
assert out.shape == q.shape and bool(torch.isfinite(out).all())
print(flash_attn.__version__)
"""
_FORWARD_TIMEOUT_S = 300


def attention_check(config: RunConfig) -> PreflightCheck:
    """`training.attention`: the named (or auto) attention proved on the first training GPU."""
    training, device = config.experiment.training, config.gpu.device
    tokens = training.tokens_per_micro_batch
    threshold = (
        "flash_attention_2 (or auto on a GPU): flash_attn imports and runs one variable-length "
        "forward on the first training GPU; sdpa: named in the config"
    )
    remedy = (
        "install the flash-attn wheel built for this torch and CUDA (README, GPU setup), or set "
        f"training.attention: sdpa and accept about twice the step time at {tokens} tokens"
    )

    def measure() -> Measurement:
        if device != "cuda":
            return Measurement(
                CheckStatus.NOT_APPLICABLE, "training on CPU: SDPA, no flash-attention"
            )
        if training.attention == "sdpa":
            text = (
                "sdpa, as the config names it: a dense block-diagonal mask over each packed "
                f"micro-batch of {tokens} tokens, about twice the step time of flash-attention 2"
            )
            return Measurement(CheckStatus.PASSED, text)
        done = subprocess.run(
            [sys.executable, "-c", VARLEN_FORWARD],
            capture_output=True,
            text=True,
            timeout=_FORWARD_TIMEOUT_S,
            env=_first_training_gpu(training.gpus),
            check=False,
        )
        if done.returncode == 0:
            return Measurement(
                CheckStatus.PASSED, f"flash-attn {done.stdout.strip()}: a varlen forward ran"
            )
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        fallback = " (auto would fall back to SDPA)" if training.attention == "auto" else ""
        return Measurement(
            CheckStatus.FAILED, f"flash_attn does not import or run{fallback}: {last}"
        )

    return timed("training.attention", threshold, remedy, measure)


def _first_training_gpu(gpus: list[int]) -> dict[str, str]:
    return {**os.environ, "CUDA_VISIBLE_DEVICES": str(gpus[0])}
