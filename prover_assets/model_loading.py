"""Every model the product trains, exports or samples from, loaded one way: with the layer code
transformers ships.

From transformers 5.2x `from_pretrained` kernelizes a model by default wherever the `kernels`
package is installed (transformers requires it): on CUDA, Qwen3's RMSNorm becomes liger's and its
rotary embedding a Hub kernel, each fetched from the Hugging Face Hub at load or at `train()`,
and the torch code kept without a word when the fetch fails (`KernelizeFallback.ALL`). That is
code outside every pin, with other numerics (LigerRMSNorm differs by up to 0.125 in a bf16 logit,
kernels-community issue 105), chosen by whether the box reaches the Hub. Every load here says no,
so the GPU runs the layers the CPU tests ran.

The same transformers puts `kernels-community/flash-attn2` from the Hub in the place of
`flash_attention_2` whenever its own check finds no usable `flash_attn` (a warning, nothing
more). A load that names its attention gets that attention or is refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prover_assets.sft.attention import AttentionUnavailable

__all__ = ["load_causal_lm"]


def load_causal_lm(folder: Path, dtype: Any, **options: Any) -> Any:
    """transformers' `AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, **options)`
    without Hub kernels; with `attn_implementation` among the options, that attention or
    AttentionUnavailable."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, use_kernels=False, **options)
    asked, loaded = options.get("attn_implementation"), model.config._attn_implementation
    if asked is not None and loaded != asked:
        raise AttentionUnavailable(
            f"asked transformers for {asked} attention and it loaded {loaded} in its place (its "
            "own check found no usable flash_attn): install the flash-attn wheel built for this "
            "torch and CUDA (README, GPU setup), or set training.attention: sdpa"
        )
    return model
