"""The GPU check of training and export at scale, through the product's own steps.

    python scripts/device_check.py --out DIR                  # a GPU: Qwen3-1.7B's shape
    python scripts/device_check.py --out DIR --shape qwen3-8b # the registered shape (slower)
    python scripts/device_check.py --out DIR --reduced        # CPU, the tiny model (the test)

It builds a Qwen3-architecture model of the chosen shape with random weights (nothing can be
downloaded on the device machine) and the tiny model's tokenizer, writes packed SFT shards that
fill `tokens_per_micro_batch`, trains a few optimizer steps with `materialize_checkpoint` (bf16,
gradient checkpointing, the chosen attention, the chunked loss, LoRA r 64 on all seven
projections), records torch's peak memory beside the memory model's estimate, exports with
`materialize_export` (fp32 merge, parity, cast drift), and generates with the transformers
engine from the export. It prints one JSON report and writes it to DIR/report.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from prover_assets.config import TrainingSpec
from prover_assets.generation.engines import (
    GenerationRequest,
    SamplingSettings,
    TransformersEngine,
)
from prover_assets.generation.revision import MODEL_DIR, write_local_revision
from prover_assets.generation.tiny_model import build_tiny_model
from prover_assets.records import SftRow
from prover_assets.records.outputs import StageResult, Step, StepInputs
from prover_assets.sft.memory import GIB, QWEN3_8B
from prover_assets.sft.shards import ShardWriter
from prover_assets.sft.stages import materialize_checkpoint, materialize_export, planned_memory

SEVEN = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
# config.json shape fields (Qwen/Qwen3-1.7B's, Qwen3-8B's), and the tiny model's for --reduced.
SHAPES: dict[str, dict[str, Any]] = {
    "qwen3-1.7b": {
        "hidden_size": 2048,
        "intermediate_size": 6144,
        "num_hidden_layers": 28,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "vocab_size": 151936,
        "tie_word_embeddings": True,
    },
    "qwen3-8b": QWEN3_8B,
}


def build_model(folder: Path, shape: dict[str, Any], device: str) -> Path:
    """A Qwen3 model of `shape` with random weights in bf16 and the tiny tokenizer."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    tokenizer_dir = build_tiny_model(folder / "tokenizer-source")
    tiny = json.loads((tokenizer_dir / "config.json").read_text())
    config = AutoConfig.for_model(
        "qwen3",
        **shape,
        eos_token_id=tiny["eos_token_id"],
        pad_token_id=tiny["pad_token_id"],
        max_position_embeddings=40960,
    )
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.generation_config.eos_token_id = config.eos_token_id
    model.generation_config.pad_token_id = config.pad_token_id
    out = folder / "base"
    model.save_pretrained(out)
    del model
    from transformers import AutoTokenizer

    AutoTokenizer.from_pretrained(tokenizer_dir).save_pretrained(out)
    write_local_revision(out, kind="device-check")
    return out


def write_shards(folder: Path, tokens_per_micro_batch: int, micro_batches: int) -> Path:
    """Rows of 1/4 to 1/2 of a micro-batch (prompt a fifth of each), enough to fill
    `micro_batches` micro-batches, as a completed step's folder."""
    rng = np.random.default_rng(0)
    writer = ShardWriter(folder)
    total, i = 0, 0
    while total < tokens_per_micro_batch * micro_batches:
        length = int(rng.integers(tokens_per_micro_batch // 4, tokens_per_micro_batch // 2))
        prompt = max(1, length // 5)
        writer.write_row(
            SftRow(
                input_ids=rng.integers(3, 1000, length).tolist(),
                prompt_len=prompt,
                kind="first",
                round=0,
                sample_idx=i,
                cap_tokens=length,
                n_completion=length - prompt,
                proof_sha="0" * 64,
                model_rev="device-check",
                problem_id=f"p{i}",
            )
        )
        total, i = total + length, i + 1
    writer.close()
    Step(folder, str(folder), StageResult, StepInputs.hash({}), {}).finish(
        StageResult(), writer.shard_paths()
    )
    return folder


def training_spec(tokens_per_micro_batch: int, steps: int, precision: str) -> TrainingSpec:
    return TrainingSpec(
        lora_r=64,
        lora_alpha=128,
        lora_dropout=0.05,
        target_modules=SEVEN,
        learning_rate=1e-4,
        lr_scheduler="cosine",
        warmup_ratio=0.0,
        epochs=1,
        tokens_per_micro_batch=tokens_per_micro_batch,
        gradient_accumulation=2,
        save_every=2,
        keep_checkpoints=1,
        seed=20261012,
        precision=precision,
        max_steps=steps,
    )


def generate(model_dir: Path, device: str, dtype: str, samples: int, tokens: int) -> dict:
    sampling = SamplingSettings(temperature=1.0, top_p=0.95, top_k=0)
    engine = TransformersEngine(model_dir, sampling, device=device, dtype=dtype)
    prompt = tuple(engine.tokenizer("theorem t : 1 + 1 = 2 := by")["input_ids"])
    requests = [GenerationRequest((i,), prompt, tokens, seed=i) for i in range(samples)]
    started = time.monotonic()
    results = list(engine.generate(requests))
    seconds = time.monotonic() - started
    produced = sum(len(r.completion_ids) for r in results)
    return {
        "samples": len(results),
        "completion_tokens": produced,
        "tokens_per_s": produced / seconds,
        "finish_reasons": sorted({r.finish_reason for r in results}),
    }


def check(out: Path, *, reduced: bool, shape_name: str, steps: int) -> dict[str, Any]:
    import torch

    device = "cpu" if reduced else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA device is visible: run with --reduced on a CPU")
    out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {
        "mode": "reduced (CPU, tiny model)" if reduced else f"GPU, {shape_name}",
        "python": platform.python_version(),
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(0) if device == "cuda" else None,
    }
    phase = time.monotonic()
    if reduced:
        base = build_tiny_model(out / "base", hidden_size=64, layers=2, vocab_size=1024)
        tokens_per_micro_batch, precision = 128, "fp32"
    else:
        base = build_model(out, SHAPES[shape_name], device)
        tokens_per_micro_batch, precision = 18432, "bf16"
    report["model_s"] = time.monotonic() - phase
    spec = training_spec(tokens_per_micro_batch, steps, precision)
    shards = write_shards(out / "shards", tokens_per_micro_batch, steps * 2)
    memory = planned_memory(spec, base, device)
    phase = time.monotonic()
    trained = materialize_checkpoint(
        out / "checkpoint",
        shards_dir=shards,
        base_model_dir=base,
        base_revision="device-check",
        training=spec,
        device=device,
    ).result
    report["training"] = {
        "wall_s": time.monotonic() - phase,
        "optimizer_steps": trained.global_step,
        "tokens_per_micro_batch": tokens_per_micro_batch,
        "tokens_per_s": trained.tokens_per_s_this_run,
        "attention": trained.attention,
        "bf16": trained.bf16,
        "peak_memory_gib_measured": trained.peak_memory_gib,
        "peak_memory_gib_estimated": memory.peak_bytes / GIB,
        "measured_over_estimated": (
            trained.peak_memory_gib / (memory.peak_bytes / GIB) if trained.peak_memory_gib else None
        ),
        "memory_terms": memory.table(),
    }
    phase = time.monotonic()
    exported = materialize_export(
        out / "export",
        checkpoint_dir=out / "checkpoint",
        base_model_dir=base,
        shards_dir=shards,
        dtype="bfloat16",  # the cast and its drift beside the base's, on CPU too
    ).result
    report["export"] = {"wall_s": time.monotonic() - phase, **exported.model_dump(mode="json")}
    report["generation"] = generate(
        out / "export" / MODEL_DIR,
        device,
        "float32" if reduced else "bfloat16",  # bf16 generation on CPU is slow, not different
        samples=2 if reduced else 4,
        tokens=16 if reduced else 128,
    )
    (out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    return report


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--reduced", action="store_true", help="CPU and the tiny model")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="qwen3-1.7b")
    parser.add_argument("--steps", type=int, default=3, help="optimizer steps (2 micro-steps)")
    args = parser.parse_args(argv)
    report = check(args.out, reduced=args.reduced, shape_name=args.shape, steps=args.steps)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
