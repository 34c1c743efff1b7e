"""The GPU check of the registered path, through the product's own steps.

    python scripts/device_check.py --out DIR                    # a GPU: Qwen3-8B's shape
    python scripts/device_check.py --out DIR --shape qwen3-1.7b # a smaller card
    python scripts/device_check.py --out DIR --reduced          # CPU, the tiny model (the test)

It builds a Qwen3-architecture model of the chosen shape with random weights (nothing can be
downloaded on the device machine) and the tiny model's tokenizer, writes packed SFT shards that
fill `tokens_per_micro_batch` (18,432, the registered micro-batch), trains a few optimizer steps
with `materialize_checkpoint` (bf16, gradient checkpointing, the attention asked for, the
chunked loss, LoRA r 64 on all seven projections), records torch's peak memory beside the memory
model's estimate, exports with `materialize_export` where the product would (the fp32 merge on
the training GPU when it fits), the host's own memory sampled through the export beside its
model, and generates from the export through the vLLM child when vLLM imports, else the
transformers engine, with tokens per second. It prints one JSON report and writes it to
DIR/report.json.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import platform
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from packaging.utils import canonicalize_name

from prover_assets.config import EngineSettings, TrainingSpec
from prover_assets.demo.tiny_model import build_tiny_model
from prover_assets.generation.engines import EngineOpening, GenerationRequest
from prover_assets.generation.factory import open_engine
from prover_assets.generation.revision import MODEL_DIR, write_local_revision
from prover_assets.records import SamplingSettings, SftRow
from prover_assets.records.manifest import package_versions
from prover_assets.records.outputs import StageResult, Step, StepInputs
from prover_assets.records.usage import recorded_usage
from prover_assets.sft.export import export_host_peak_bytes
from prover_assets.sft.memory import GIB, QWEN3_8B, ModelShape
from prover_assets.sft.shards import ShardWriter
from prover_assets.sft.stages import (
    export_merge_device,
    materialize_checkpoint,
    materialize_export,
    planned_memory,
)

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


REGISTERED_ATTENTION = "flash_attention_2"  # configs/p2.yaml's training.attention
# The packages the check reports: the image's or the carried wheels' (scripts/device_wheels.py).
PACKAGES = ("torch", "transformers", "peft", "accelerate", "pydantic", "flash-attn", "vllm")


def training_spec(
    tokens_per_micro_batch: int, steps: int, precision: str, attention: str
) -> TrainingSpec:
    return TrainingSpec(
        attention=attention,
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
    """Samples from the export: through the vLLM child where vLLM imports (the registered
    engine), else the transformers engine."""
    sampling = SamplingSettings(temperature=1.0, top_p=0.95, top_k=0)
    use_vllm = device == "cuda" and importlib.util.find_spec("vllm") is not None
    settings = (
        EngineSettings(engine="vllm", gpus=[0], enforce_eager=True, gpu_memory_utilization=0.8)
        if use_vllm
        else EngineSettings(engine="transformers", device=device, dtype=dtype)
    )
    started = time.monotonic()
    opening = EngineOpening(
        model_path=model_dir,
        model_rev="device-check",
        sampling=sampling,
        max_model_len=4096,
        seed=0,
        workdir=model_dir.parent / "engine",
        commit_every=samples,
        cpu_threads=1,  # the engine's host side; the GPU does the work
    )
    with open_engine(settings, opening) as engine:
        loaded = time.monotonic()
        from transformers import AutoTokenizer

        prompt = tuple(
            AutoTokenizer.from_pretrained(model_dir)("theorem t : 1 + 1 = 2 := by")["input_ids"]
        )
        requests = [GenerationRequest((i,), prompt, tokens, seed=i) for i in range(samples)]
        results = list(engine.generate(requests))
        seconds = time.monotonic() - loaded
    produced = sum(len(r.completion_ids) for r in results)
    return {
        "engine": settings.engine,
        "start_s": loaded - started,
        "samples": len(results),
        "completion_tokens": produced,
        "tokens_per_s": produced / seconds,
        "finish_reasons": sorted({r.finish_reason for r in results}),
    }


def imported_distributions() -> dict[str, str]:
    """Every installed distribution this process imported a module of, with its version: what
    ran, and what the device machine must hold (scripts/device_wheels.py carries them)."""
    owners = importlib.metadata.packages_distributions()
    tops = {module.partition(".")[0] for module in list(sys.modules)}
    names = {canonicalize_name(dist) for top in tops for dist in owners.get(top, ())}
    return {name: importlib.metadata.version(name) for name in sorted(names)}


def anonymous_bytes() -> int:
    """This process's own memory (not the files it maps), as the project reads a REPL's."""
    for line in Path("/proc/self/smaps_rollup").read_text().splitlines():
        if line.startswith("Anonymous:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("/proc/self/smaps_rollup has no Anonymous line")


@contextmanager
def host_peak(every_s: float = 0.02) -> Iterator[dict[str, int]]:
    """The peak of this process's own memory above where it was, sampled every `every_s`."""
    start = anonymous_bytes()
    peak = {"bytes": 0}
    done = threading.Event()

    def sample() -> None:
        while not done.wait(every_s):
            peak["bytes"] = max(peak["bytes"], anonymous_bytes() - start)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield peak
    finally:
        done.set()
        sampler.join()
        peak["bytes"] = max(peak["bytes"], anonymous_bytes() - start)


def export_report(out: Path, base: Path, shards: Path, spec: TrainingSpec, device: str) -> dict:
    """The export where the product would run it, its parity, and the host's own peak beside
    the export's host model."""
    merge_on = export_merge_device(spec, device, base)
    parameters = ModelShape.of(json.loads((base / "config.json").read_text())).parameters()
    phase = time.monotonic()
    with host_peak() as peak:
        exported = materialize_export(
            out / "export",
            checkpoint_dir=out / "checkpoint",
            base_model_dir=base,
            shards_dir=shards,
            dtype="bfloat16",  # the cast and its drift beside the base's, on CPU too
            merge_on=merge_on,
        ).result
    modelled = export_host_peak_bytes(parameters, merge_on)
    return {
        "wall_s": time.monotonic() - phase,
        **exported.model_dump(mode="json"),
        "parameters": parameters,
        "host_peak_gib_measured": peak["bytes"] / GIB,
        "host_peak_gib_modelled": modelled / GIB,
        "host_measured_over_modelled": peak["bytes"] / modelled,
    }


def check(
    out: Path, *, reduced: bool, shape_name: str, steps: int, attention: str
) -> dict[str, Any]:
    import torch

    started = time.monotonic()
    device = "cpu" if reduced else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA device is visible: run with --reduced on a CPU")
    out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {
        "mode": "reduced (CPU, tiny model)" if reduced else f"GPU, {shape_name}",
        "python": platform.python_version(),
        "packages": package_versions(PACKAGES),
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
    spec = training_spec(tokens_per_micro_batch, steps, precision, attention)
    shards = write_shards(out / "shards", tokens_per_micro_batch, steps * 2)
    memory = planned_memory(spec, base, device)
    phase = time.monotonic()
    checkpoint = materialize_checkpoint(
        out / "checkpoint",
        shards_dir=shards,
        base_model_dir=base,
        base_revision="device-check",
        training=spec,
        device=device,
    )
    trained = checkpoint.result
    # nvidia-smi's reading of the step's GPU (records/usage.py): at least torch's peak, which
    # leaves out the CUDA context and the allocator's cache; None on a CPU box
    device_peak = recorded_usage(checkpoint.manifest).peak_gpu_mib
    report["training"] = {
        "wall_s": time.monotonic() - phase,
        "optimizer_steps": trained.global_step,
        "tokens_per_micro_batch": tokens_per_micro_batch,
        "tokens_per_s": trained.tokens_per_s_this_run,
        "attention": trained.attention,
        "attention_as_registered": trained.attention == REGISTERED_ATTENTION,
        "bf16": trained.bf16,
        "peak_memory_gib_measured": trained.peak_memory_gib,
        "peak_memory_gib_estimated": memory.peak_bytes / GIB,
        "measured_over_estimated": (
            trained.peak_memory_gib / (memory.peak_bytes / GIB) if trained.peak_memory_gib else None
        ),
        "peak_gpu_gib_device_reading": device_peak / 1024 if device_peak else None,
        "memory_terms": memory.table(),
    }
    report["export"] = export_report(out, base, shards, spec, device)
    report["generation"] = generate(
        out / "export" / MODEL_DIR,
        device,
        "float32" if reduced else "bfloat16",  # bf16 generation on CPU is slow, not different
        samples=2 if reduced else 4,
        tokens=16 if reduced else 128,
    )
    report["distributions"] = imported_distributions()
    report["total_s"] = time.monotonic() - started
    (out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    return report


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--reduced", action="store_true", help="CPU and the tiny model")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="qwen3-8b")
    parser.add_argument("--steps", type=int, default=3, help="optimizer steps (2 micro-steps)")
    parser.add_argument(
        "--attention",
        choices=["auto", "flash_attention_2", "sdpa"],
        default="auto",
        help="auto: flash-attention 2 where it imports (the registered one), else sdpa",
    )
    args = parser.parse_args(argv)
    report = check(
        args.out,
        reduced=args.reduced,
        shape_name=args.shape,
        steps=args.steps,
        attention=args.attention,
    )
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
