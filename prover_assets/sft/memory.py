"""How much GPU memory one training rank needs at its peak, term by term, before it starts.

A model of what LoRA training on a Qwen3-architecture decoder keeps, from its config.json and
the training spec; `TrainingMemory.refusal` says which term does not fit a card and what to
change. The activation terms count, per token and layer, the tensors autograd saves in a
Qwen3 decoder layer (see `_layer_bytes_per_token`), so they are an estimate to be checked
against a GPU's measured peak (`scripts/device_check.sh` prints both); `HEADROOM` is kept free
for what the model does not count.

Peak = weights + LoRA states + checkpointed layer inputs + the larger of one layer's recompute
(with its gradients) and the loss's working set, + the runtime's reserve. Without gradient
checkpointing every layer's activations are kept instead of its input alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from prover_assets.config import TrainingSpec

__all__ = [
    "GIB",
    "HEADROOM",
    "QWEN3_8B",
    "MemoryTerm",
    "ModelShape",
    "TrainingMemory",
    "training_memory",
]

GIB = 2**30
HEADROOM = 0.10  # of the card, kept free: fragmentation, kernels' workspaces, what is not counted
RUNTIME_RESERVE_BYTES = 3 * GIB  # CUDA context, cuBLAS/NCCL workspaces, allocator slack
RESERVE = "runtime reserve (CUDA context, workspaces)"  # fixed: never the term to blame
# The shape fields of Qwen/Qwen3-8B's config.json (Goedel-Prover-V2-8B is a fine-tune of it):
# the registered model's, for planning before its snapshot is on disk.
QWEN3_8B: dict[str, Any] = {
    "hidden_size": 4096,
    "intermediate_size": 12288,
    "num_hidden_layers": 36,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 151936,
    "tie_word_embeddings": False,
}


@dataclass(frozen=True)
class ModelShape:
    """The sizes of a Qwen3-architecture decoder that its memory depends on."""

    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> ModelShape:
        """From a config.json's fields (`head_dim` defaults to hidden / heads)."""
        try:
            heads = int(config["num_attention_heads"])
            return cls(
                hidden=int(config["hidden_size"]),
                intermediate=int(config["intermediate_size"]),
                layers=int(config["num_hidden_layers"]),
                heads=heads,
                kv_heads=int(config.get("num_key_value_heads", heads)),
                head_dim=int(config.get("head_dim") or config["hidden_size"] // heads),
                vocab=int(config["vocab_size"]),
                tied=bool(config.get("tie_word_embeddings", False)),
            )
        except KeyError as missing:
            raise ValueError(f"the model's config has no {missing} field") from None

    def projections(self) -> dict[str, tuple[int, int]]:
        """Each linear layer of a decoder layer: (in features, out features)."""
        d, q, kv, i = (
            self.hidden,
            self.heads * self.head_dim,
            self.kv_heads * self.head_dim,
            self.intermediate,
        )
        return {
            "q_proj": (d, q),
            "k_proj": (d, kv),
            "v_proj": (d, kv),
            "o_proj": (q, d),
            "gate_proj": (d, i),
            "up_proj": (d, i),
            "down_proj": (i, d),
        }

    def parameters(self) -> int:
        """Every weight: the layers' projections and norms (two of d, q/k norms of head_dim),
        the embedding, the output layer unless tied, the final norm."""
        per_layer = sum(a * b for a, b in self.projections().values())
        per_layer += 2 * self.hidden + 2 * self.head_dim
        embeddings = self.vocab * self.hidden * (1 if self.tied else 2)
        return self.layers * per_layer + embeddings + self.hidden

    def lora_parameters(self, rank: int, targets: list[str]) -> int:
        """A (r x in) and B (out x r) of every targeted projection in every layer."""
        shapes = self.projections()
        unknown = sorted(set(targets) - shapes.keys())
        if unknown:
            raise ValueError(f"LoRA targets {unknown} are not projections of this model")
        return self.layers * sum(rank * (shapes[t][0] + shapes[t][1]) for t in targets)


@dataclass(frozen=True)
class MemoryTerm:
    """One term of a training rank's planned peak: its bytes and what lowers it."""

    name: str
    bytes: int
    remedy: str  # what lowers it

    @property
    def gib(self) -> float:
        return self.bytes / GIB


def _layer_bytes_per_token(shape: ModelShape, spec: TrainingSpec, activation_bytes: int) -> int:
    """What autograd saves per token in one decoder layer: the two RMSNorms and the q/k norms
    (an fp32 copy, the normalised fp32 and the output: 4 + 4 + a bytes an element), q, k, v and
    their rotated copies, the attention output, the MLP's gate, up, silu(gate) and product, and
    per LoRA target its A output and, with dropout, the dropped input and its mask."""
    a = activation_bytes
    d, q, kv, i = (
        shape.hidden,
        shape.heads * shape.head_dim,
        shape.kv_heads * shape.head_dim,
        shape.intermediate,
    )
    norms = (2 * d + q + kv) * (8 + a)
    attention = (q + 2 * kv) * a + (q + kv) * a + q * a
    mlp = 4 * i * a
    shapes = shape.projections()
    lora = sum(spec.lora_r * a for _ in spec.target_modules)
    if spec.lora_dropout > 0:
        lora += sum(shapes[t][0] * (a + 1) for t in spec.target_modules)
    return norms + attention + mlp + lora


def _activation_terms(
    shape: ModelShape, spec: TrainingSpec, activation_bytes: int
) -> tuple[MemoryTerm, MemoryTerm]:
    """What the layers keep for backward, and the transient of one layer's backward."""
    tokens = spec.tokens_per_micro_batch
    per_token_layer = _layer_bytes_per_token(shape, spec, activation_bytes)
    if spec.gradient_checkpointing:
        kept = MemoryTerm(
            "checkpointed layer inputs",
            shape.layers * tokens * shape.hidden * activation_bytes,
            "lower training.tokens_per_micro_batch",
        )
        layer = MemoryTerm(
            "one layer's recompute and its gradients",
            2 * tokens * per_token_layer,
            "lower training.tokens_per_micro_batch",
        )
    else:
        kept = MemoryTerm(
            "every layer's activations (no gradient checkpointing)",
            shape.layers * tokens * per_token_layer,
            "set training.gradient_checkpointing: true",
        )
        layer = MemoryTerm(
            "one layer's gradients",
            tokens * per_token_layer,
            "lower training.tokens_per_micro_batch",
        )
    return kept, layer


@dataclass(frozen=True)
class TrainingMemory:
    """One rank's peak, term by term, against a card of `card_bytes`."""

    terms: tuple[MemoryTerm, ...]
    peak_terms: tuple[str, ...]  # the terms summed into the peak (the rest: shown, not added)
    card_bytes: int
    tokens_per_micro_batch: int
    attention: str

    @property
    def peak_bytes(self) -> int:
        return sum(t.bytes for t in self.terms if t.name in self.peak_terms)

    @property
    def usable_bytes(self) -> int:
        return int(self.card_bytes * (1 - HEADROOM))

    @property
    def margin(self) -> float:
        """The share of the card left free at the peak."""
        return 1 - self.peak_bytes / self.card_bytes

    @property
    def fits(self) -> bool:
        return self.peak_bytes <= self.usable_bytes

    def refusal(self) -> str | None:
        """Why this cannot train on the card (the largest term in the peak and its remedy), or
        None when it fits."""
        if self.fits:
            return None
        largest = max(
            (t for t in self.terms if t.name in self.peak_terms and t.name != RESERVE),
            key=lambda t: t.bytes,
        )
        return (
            f"training needs {self.peak_bytes / GIB:.1f} GiB per GPU at its peak, more than "
            f"{self.usable_bytes / GIB:.1f} GiB ({1 - HEADROOM:.0%} of a "
            f"{self.card_bytes / GIB:.0f} GiB card); the largest term is {largest.name} at "
            f"{largest.gib:.1f} GiB: {largest.remedy}"
        )

    def table(self) -> list[dict[str, Any]]:
        """Rows for a report: each term in GiB and whether the peak adds it."""
        rows = [
            {"term": t.name, "GiB": round(t.gib, 2), "in peak": t.name in self.peak_terms}
            for t in self.terms
        ]
        return [
            *rows,
            {"term": "peak", "GiB": round(self.peak_bytes / GIB, 2), "in peak": True},
            {"term": "card", "GiB": round(self.card_bytes / GIB, 2), "in peak": False},
        ]

    def describe(self) -> str:
        return (
            f"peak {self.peak_bytes / GIB:.1f} GiB of a {self.card_bytes / GIB:.0f} GiB card "
            f"({self.margin:.0%} free; {HEADROOM:.0%} required) at "
            f"{self.tokens_per_micro_batch} tokens a micro-batch, attention {self.attention}"
        )


def training_memory(
    spec: TrainingSpec,
    model_config: Mapping[str, Any],
    *,
    attention: str = "flash_attention_2",
    card_bytes: int | None = None,
    bf16: bool = True,
) -> TrainingMemory:
    """The peak memory of one rank training `spec` on the model of `model_config`
    (config.json's fields), with `attention` ("flash_attention_2" or "sdpa"), on a card of
    `card_bytes` (default: the spec's `gpu_memory_gib`)."""
    shape = ModelShape.of(model_config)
    tokens = spec.tokens_per_micro_batch
    a = 2 if bf16 else 4
    lora = shape.lora_parameters(spec.lora_r, list(spec.target_modules))
    chunk = min(spec.loss_chunk_tokens, tokens)
    kept, layer = _activation_terms(shape, spec, a)
    weights = MemoryTerm(
        "base weights", shape.parameters() * a, "a card with more memory (the weights are fixed)"
    )
    lora_states = MemoryTerm(
        "LoRA parameters, gradients and Adam states (fp32)",
        lora * (4 + 4 + 8),
        "lower training.lora_r or target fewer modules",
    )
    loss = MemoryTerm(
        "loss working set (one chunk's logits, fp32 softmax and gradient; final hidden)",
        chunk * shape.vocab * (a + 4 + 4) + 2 * tokens * shape.hidden * a,
        "lower training.loss_chunk_tokens",
    )
    reserve = MemoryTerm(
        "runtime reserve (CUDA context, workspaces)",
        RUNTIME_RESERVE_BYTES,
        "nothing: the runtime's",
    )
    terms = [weights, lora_states, kept, layer, loss, reserve]
    # The loss runs before the layers' backward, so one of the two transients is live at a time.
    peak = [weights, lora_states, kept, max(layer, loss, key=lambda t: t.bytes), reserve]
    if attention != "flash_attention_2":
        # SDPA reads packed rows only through a dense block-diagonal mask, kept for backward.
        mask = MemoryTerm(
            "dense attention mask over the packed micro-batch",
            tokens * tokens,
            "install flash-attn (pip install flash-attn): packed rows then need no mask",
        )
        terms.append(mask)
        peak.append(mask)
    return TrainingMemory(
        terms=tuple(terms),
        peak_terms=tuple(t.name for t in peak),
        card_bytes=card_bytes if card_bytes is not None else int(spec.gpu_memory_gib * GIB),
        tokens_per_micro_batch=tokens,
        attention=attention,
    )
