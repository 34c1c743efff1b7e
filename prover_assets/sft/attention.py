"""The attention training runs with: the one the config names, or for `auto` the best that
runs here (flash-attention 2 on a GPU where it imports, else SDPA); a named one that cannot run
is refused, never replaced without a word."""

from __future__ import annotations

__all__ = ["AttentionUnavailable", "attention_implementation", "flash_attention_import_error"]


class AttentionUnavailable(RuntimeError):
    """The attention the config names cannot run here; the message says what to do."""


def flash_attention_import_error() -> str | None:
    """None when `flash_attn` imports; else why. A wheel built for another torch is found by
    `find_spec` and fails only on import (an undefined symbol)."""
    try:
        import flash_attn  # noqa: F401
    except Exception as exc:  # ImportError, OSError of a shared object: any reason it cannot load
        return f"{type(exc).__name__}: {exc}"
    return None


def attention_implementation(device: str, wanted: str) -> str:
    """The attention training uses on `device`: `wanted` as the config names it, or, for auto,
    flash-attention 2 on a GPU where it imports (it reads the packed rows' restarting position
    ids as variable-length sequences), else SDPA (a dense block-diagonal T x T mask over the
    micro-batch). A named attention that cannot run raises AttentionUnavailable."""
    if wanted == "sdpa":
        return "sdpa"
    if device != "cuda":
        if wanted == "flash_attention_2":
            raise AttentionUnavailable("training.attention flash_attention_2 needs a CUDA device")
        return "sdpa"
    error = flash_attention_import_error()
    if error is None:
        return "flash_attention_2"
    if wanted == "flash_attention_2":
        raise AttentionUnavailable(
            f"training.attention is flash_attention_2 but flash_attn does not import: {error}. "
            "Install the flash-attn wheel built for this torch and CUDA (README, GPU setup), or "
            "set training.attention: sdpa (about twice the step time at 18,432 tokens)"
        )
    return "sdpa"
