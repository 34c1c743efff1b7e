"""The training memory model: counts against torch and peft, the registered config's terms by
hand, and refusals that name the term."""

import json

import pytest
import torch
from transformers import AutoConfig, AutoModelForCausalLM

from prover_assets.config import TrainingSpec
from prover_assets.sft.memory import GIB, QWEN3_8B, ModelShape, training_memory
from prover_assets.sft.stages import TrainingWontFit, materialize_checkpoint

SEVEN = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def registered(**changes) -> TrainingSpec:
    """configs/p2.yaml's training block."""
    fields = {
        "lora_r": 64,
        "lora_alpha": 128,
        "lora_dropout": 0.05,
        "target_modules": SEVEN,
        "learning_rate": 1e-4,
        "lr_scheduler": "cosine",
        "warmup_ratio": 0.03,
        "epochs": 2,
        "tokens_per_micro_batch": 18432,
        "gradient_accumulation": 8,
        "save_every": 40,
        "keep_checkpoints": 2,
        "seed": 20261012,
        "pad_token_id": 151643,
    }
    return TrainingSpec.model_validate({**fields, **changes})


def meta_model(config: dict):
    """The model of `config` on the meta device: its parameters, no memory."""
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(AutoConfig.for_model("qwen3", **config))


def test_the_parameter_count_is_torchs_for_the_8b_shape_and_the_tiny_model(tiny_model_dir):
    big = sum(p.numel() for p in meta_model(QWEN3_8B).parameters())
    assert ModelShape.of(QWEN3_8B).parameters() == big
    tiny_config = json.loads((tiny_model_dir / "config.json").read_text())
    tiny = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert ModelShape.of(tiny_config).parameters() == sum(p.numel() for p in tiny.parameters())


def test_the_lora_parameter_count_is_peft_s(tiny_model_dir):
    from peft import LoraConfig, get_peft_model

    config = json.loads((tiny_model_dir / "config.json").read_text())
    model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(tiny_model_dir),
        LoraConfig(r=8, lora_alpha=16, target_modules=SEVEN, task_type="CAUSAL_LM"),
    )
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert ModelShape.of(config).lora_parameters(8, SEVEN) == trainable


def test_the_registered_config_fits_an_80_gb_card_with_its_terms_computed_by_hand():
    memory = training_memory(registered(), QWEN3_8B)
    terms = {t.name: t.bytes for t in memory.terms}
    assert terms["base weights"] == 8_190_735_360 * 2  # bf16
    assert terms["LoRA parameters, gradients and Adam states (fp32)"] == 174_587_904 * 16
    assert terms["checkpointed layer inputs"] == 36 * 18432 * 4096 * 2
    # one loss chunk of 1024 tokens over 151,936 logits: bf16, fp32 and its gradient
    loss = next(b for n, b in terms.items() if n.startswith("loss working set"))
    assert loss == 1024 * 151936 * 10 + 2 * 18432 * 4096 * 2
    assert memory.fits and memory.refusal() is None
    assert memory.peak_bytes <= 0.9 * 80 * GIB
    assert memory.peak_bytes == sum(t.bytes for t in memory.terms if t.name in memory.peak_terms)


def test_sdpa_adds_the_dense_mask_over_the_packed_micro_batch():
    flash = training_memory(registered(), QWEN3_8B, attention="flash_attention_2")
    sdpa = training_memory(registered(), QWEN3_8B, attention="sdpa")
    assert sdpa.peak_bytes - flash.peak_bytes == 18432 * 18432


@pytest.mark.parametrize(
    ("changes", "card_gib", "named"),
    [
        ({"gradient_checkpointing": False}, 80, "every layer's activations"),
        ({}, 16, "base weights"),
        ({"tokens_per_micro_batch": 200_000}, 80, "one layer's recompute"),
        ({"loss_chunk_tokens": 65536, "tokens_per_micro_batch": 65536}, 80, "loss working set"),
    ],
)
def test_a_config_that_cannot_fit_is_refused_naming_its_largest_term(changes, card_gib, named):
    memory = training_memory(registered(**changes), QWEN3_8B, card_bytes=card_gib * GIB)
    assert not memory.fits
    assert f"the largest term is {named}" in (memory.refusal() or "")


def test_an_unknown_lora_target_is_an_error():
    with pytest.raises(ValueError, match="not projections"):
        training_memory(registered(target_modules=["qkv"]), QWEN3_8B)


def test_training_that_cannot_fit_its_card_is_refused_before_the_trainer_starts(
    tmp_path, tiny_model_dir
):
    from prover_assets_tests.records.test_consumers import completed

    # Refused before the shards are read: any published folder will do.
    shards = completed(tmp_path / "shards", {"rows.jsonl": b""})
    folder = tmp_path / "checkpoint"
    with pytest.raises(TrainingWontFit, match="per GPU at its peak") as refused:
        materialize_checkpoint(
            folder,
            shards_dir=shards,
            base_model_dir=tiny_model_dir,
            base_revision="tiny",
            training=registered(gpu_memory_gib=1e-6, lora_r=4, tokens_per_micro_batch=256),
            device="cuda",
        )
    assert "runtime reserve" not in str(refused.value)
    assert not (folder / "run.json").exists()


# Hand count of what one Qwen3-8B layer saves per token (bf16, a = 2 bytes), LoRA r 64 on the
# seven projections with dropout: norms (2d + q + kv)(8 + a), q/k/v + rotated q/k + attention
# output, the MLP's four tensors of i, the seven A outputs, and the dropped inputs with masks.
D, Q, KV, INTER = 4096, 4096, 1024, 12288
NORMS = (2 * D + Q + KV) * 10
ATTENTION = (Q + 2 * KV) * 2 + (Q + KV) * 2 + Q * 2
MLP = 4 * INTER * 2
LORA_A = 7 * 64 * 2
DROPPED = (5 * D + Q + INTER) * 3
LAYER_PER_TOKEN = NORMS + ATTENTION + MLP + LORA_A + DROPPED  # 373,632 bytes


def terms_of(memory) -> dict[str, int]:
    return {t.name: t.bytes for t in memory.terms}


def test_one_layers_recompute_is_the_hand_counted_bytes_per_token_twice():
    terms = terms_of(training_memory(registered(), QWEN3_8B))
    assert LAYER_PER_TOKEN == 373_632
    assert terms["one layer's recompute and its gradients"] == 2 * 18432 * LAYER_PER_TOKEN


def test_without_dropout_no_dropped_inputs_are_counted():
    terms = terms_of(training_memory(registered(lora_dropout=0.0), QWEN3_8B))
    per_token = LAYER_PER_TOKEN - DROPPED
    assert terms["one layer's recompute and its gradients"] == 2 * 18432 * per_token


def test_without_checkpointing_every_layer_keeps_its_activations():
    terms = terms_of(training_memory(registered(gradient_checkpointing=False), QWEN3_8B))
    assert terms["every layer's activations (no gradient checkpointing)"] == (
        36 * 18432 * LAYER_PER_TOKEN
    )
    assert terms["one layer's gradients"] == 18432 * LAYER_PER_TOKEN
    assert "checkpointed layer inputs" not in terms


def test_fp32_training_counts_four_bytes_an_element():
    terms = terms_of(training_memory(registered(), QWEN3_8B, bf16=False))
    assert terms["base weights"] == 8_190_735_360 * 4
    assert terms["checkpointed layer inputs"] == 36 * 18432 * 4096 * 4
    loss = next(b for n, b in terms.items() if n.startswith("loss working set"))
    assert loss == 1024 * 151936 * 12 + 2 * 18432 * 4096 * 4


def test_the_peak_adds_the_larger_transient_and_the_card_is_the_specs():
    memory = training_memory(registered(gpu_memory_gib=40), QWEN3_8B)
    terms = terms_of(memory)
    loss = next(b for n, b in terms.items() if n.startswith("loss working set"))
    layer = terms["one layer's recompute and its gradients"]
    fixed = (
        terms["base weights"]
        + terms["LoRA parameters, gradients and Adam states (fp32)"]
        + terms["checkpointed layer inputs"]
        + 3 * GIB
    )
    assert memory.peak_bytes == fixed + max(layer, loss)
    assert memory.card_bytes == 40 * GIB
    assert memory.usable_bytes == int(40 * GIB * 0.9)
    assert memory.margin == pytest.approx(1 - memory.peak_bytes / (40 * GIB))


def test_a_loss_chunk_longer_than_the_micro_batch_counts_the_micro_batch():
    small = registered(tokens_per_micro_batch=512, loss_chunk_tokens=4096)
    loss = next(
        b
        for n, b in terms_of(training_memory(small, QWEN3_8B)).items()
        if n.startswith("loss working set")
    )
    assert loss == 512 * 151936 * 10 + 2 * 512 * 4096 * 2


def test_a_peak_at_the_usable_bound_fits_and_one_byte_more_does_not():
    memory = training_memory(registered(), QWEN3_8B)
    at_bound = -(-memory.peak_bytes * 10 // 9)  # the smallest card whose 90 % holds the peak
    assert training_memory(registered(), QWEN3_8B, card_bytes=at_bound).fits
    assert not training_memory(registered(), QWEN3_8B, card_bytes=at_bound - 2).fits


def test_a_refusal_states_the_peak_the_usable_memory_the_card_and_the_remedy():
    memory = training_memory(registered(), QWEN3_8B, card_bytes=16 * GIB)
    peak = memory.peak_bytes / GIB
    assert memory.refusal() == (
        f"training needs {peak:.1f} GiB per GPU at its peak, more than 14.4 GiB (90% of a 16 "
        "GiB card); the largest term is base weights at 15.3 GiB: a card with more memory "
        "(the weights are fixed)"
    )


def test_a_config_without_optional_shape_fields_takes_the_transformers_defaults():
    config = {
        "hidden_size": 256,
        "intermediate_size": 512,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "vocab_size": 1000,
    }
    shape = ModelShape.of(config)
    assert (shape.kv_heads, shape.head_dim, shape.tied) == (4, 64, False)
    with_defaults = {**config, "num_key_value_heads": 4, "head_dim": 64}
    assert ModelShape.of(config).parameters() == sum(
        p.numel() for p in meta_model({**with_defaults, "tie_word_embeddings": False}).parameters()
    )


def test_a_config_missing_a_shape_field_is_an_error_naming_it():
    config = {k: v for k, v in QWEN3_8B.items() if k != "vocab_size"}
    with pytest.raises(ValueError, match="vocab_size"):
        ModelShape.of(config)


def test_every_term_is_named_with_what_lowers_it():
    named = {
        t.name: t.remedy for t in training_memory(registered(), QWEN3_8B, attention="sdpa").terms
    }
    assert named == {
        "base weights": "a card with more memory (the weights are fixed)",
        "LoRA parameters, gradients and Adam states (fp32)": (
            "lower training.lora_r or target fewer modules"
        ),
        "checkpointed layer inputs": "lower training.tokens_per_micro_batch",
        "one layer's recompute and its gradients": "lower training.tokens_per_micro_batch",
        "loss working set (one chunk's logits, fp32 softmax and gradient; final hidden)": (
            "lower training.loss_chunk_tokens"
        ),
        "runtime reserve (CUDA context, workspaces)": "nothing: the runtime's",
        "dense attention mask over the packed micro-batch": (
            "install flash-attn (pip install flash-attn): packed rows then need no mask"
        ),
    }
    unchecked = training_memory(registered(gradient_checkpointing=False), QWEN3_8B).terms
    assert {t.name: t.remedy for t in unchecked[2:4]} == {
        "every layer's activations (no gradient checkpointing)": (
            "set training.gradient_checkpointing: true"
        ),
        "one layer's gradients": "lower training.tokens_per_micro_batch",
    }


def test_the_description_states_the_micro_batch_and_the_attention():
    memory = training_memory(registered(), QWEN3_8B, attention="sdpa")
    assert memory.describe() == (
        f"peak {memory.peak_bytes / GIB:.1f} GiB of a 80 GiB card ({memory.margin:.0%} free; "
        "10% required) at 18432 tokens a micro-batch, attention sdpa"
    )


def test_a_head_dim_other_than_hidden_over_heads_is_read_from_the_config():
    # Qwen3-0.6B's attention: 16 heads of 128 on a hidden size of 1024.
    config = {
        "hidden_size": 1024,
        "intermediate_size": 3072,
        "num_hidden_layers": 2,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "vocab_size": 1000,
        "tie_word_embeddings": True,
    }
    shape = ModelShape.of(config)
    assert shape.head_dim == 128 and shape.tied
    assert shape.parameters() == sum(p.numel() for p in meta_model(config).parameters())
