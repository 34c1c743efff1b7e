"""Every causal LM the product loads, loaded one way: with the layer code transformers ships.

From transformers 5.2x `from_pretrained` kernelizes a model by default wherever the `kernels`
package is installed (transformers requires it): on CUDA, Qwen3's RMSNorm becomes liger's and its
rotary embedding a Hub kernel, each fetched from the Hugging Face Hub at load or at `train()`,
and the torch code kept without a word when the fetch fails (`KernelizeFallback.ALL`). That is
code outside every pin, with other numerics (LigerRMSNorm differs by up to 0.125 in a bf16 logit,
kernels-community issue 105), chosen by whether the box reaches the Hub. Every load here says no,
so the GPU runs the layers the CPU tests ran.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["load_causal_lm"]


def load_causal_lm(folder: Path, dtype: Any, **options: Any) -> Any:
    """transformers' `AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, **options)`
    without Hub kernels."""
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, use_kernels=False, **options)
