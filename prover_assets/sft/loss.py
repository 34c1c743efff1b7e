"""The training loss without the micro-batch's full-vocabulary logits.

At the registered scale a micro-batch is 18,432 tokens and the vocabulary 151,936: its fp32
logits alone are 11 GB, their gradient as much again. `chunked_linear_cross_entropy` computes
the logits of `chunk_tokens` loss tokens at a time, each chunk under activation checkpointing
(its logits are recomputed in backward, never kept), so the working set is one chunk's logits
whatever the micro-batch. It is the loss transformers computes (next-token, labels -100
ignored, summed and divided by `num_items_in_batch`, else averaged), in plain torch:

- Liger Kernel's fused linear cross-entropy (this field's library for it) is a Triton kernel
  that runs on CUDA only; the CPU suite could never run the loss the registered run trains
  with. Plain torch runs the same code on both.
- Its cost is one more `lm_head` matmul per loss token in backward (2·d·V flops a token, under
  2 % of an 8B model's step) and no fusion of the softmax; the memory is what the issue asks.

`HiddenStatesTap` hands the loss the hidden states the model gives its output layer, and hands
the output layer none of them, so the model's forward computes no logits either. It goes
through the model's own forward (and so through DDP's) and needs no knowledge of its layers.
"""

from __future__ import annotations

from typing import Any

from prover_assets.sft.shards import IGNORE_INDEX

__all__ = ["HiddenStatesTap", "chunked_linear_cross_entropy"]


def _chunk_loss_sum(hidden: Any, weight: Any, labels: Any) -> Any:
    """Summed cross-entropy of one chunk: logits in the model's dtype, the softmax in fp32 (as
    transformers' loss upcasts them)."""
    import torch.nn.functional as F

    logits = F.linear(hidden, weight).float()
    return F.cross_entropy(logits, labels, reduction="sum")


def chunked_linear_cross_entropy(
    hidden: Any,
    weight: Any,
    labels: Any,
    *,
    chunk_tokens: int,
    num_items_in_batch: Any = None,
) -> Any:
    """Next-token cross-entropy of `hidden` (batch, seq, d) under the output layer `weight`
    (vocab, d) against `labels` (batch, seq), position t predicting labels[t + 1]; only the
    loss tokens' logits are computed, `chunk_tokens` at a time."""
    from torch.utils.checkpoint import checkpoint

    targets = labels[:, 1:].reshape(-1)
    counted = targets != IGNORE_INDEX
    states = hidden[:, :-1, :].reshape(-1, hidden.shape[-1])[counted]
    targets = targets[counted]
    # Zero, but on the graph: a micro-batch with no loss token still back-propagates (zeros), as
    # DDP needs every rank's backward to reach every parameter.
    total = states[:0].float().sum()
    for start in range(0, len(targets), chunk_tokens):
        end = start + chunk_tokens
        total = total + checkpoint(
            _chunk_loss_sum, states[start:end], weight, targets[start:end], use_reentrant=False
        )
    if num_items_in_batch is None:
        return total / counted.sum().clamp(min=1)
    return total / num_items_in_batch


class HiddenStatesTap:
    """Takes the output layer's input as it runs (a forward pre-hook) and gives the layer an
    empty slice of it instead; `loss` is then the chunked loss of what it took, with the same
    signature as transformers' `compute_loss_func`."""

    def __init__(self, model: Any, chunk_tokens: int) -> None:
        self.head = model.get_output_embeddings()
        self.chunk_tokens = chunk_tokens
        self._hidden: Any = None
        self._handle = self.head.register_forward_pre_hook(self._take)

    def _take(self, module: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
        (hidden,) = args
        self._hidden = hidden
        return (hidden[..., :0, :],)

    def loss(self, outputs: Any, labels: Any, num_items_in_batch: Any = None) -> Any:
        hidden, self._hidden = self._hidden, None
        if hidden is None:
            raise RuntimeError("the loss was asked for before a forward pass reached the output")
        return chunked_linear_cross_entropy(
            hidden,
            self.head.weight,
            labels,
            chunk_tokens=self.chunk_tokens,
            num_items_in_batch=num_items_in_batch,
        )

    def remove(self) -> None:
        self._handle.remove()
