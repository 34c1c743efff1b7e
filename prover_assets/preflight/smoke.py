"""The preflight's smoke round: the configured engine samples a few miniF2F proofs at the
registered `max_model_len`, the configured verifier judges them, two optimizer steps train at
the registered `tokens_per_micro_batch`, and the result is exported with its parity.

It runs the product's own code paths (`open_engine`, `generate_samples`, `StrictVerifier`,
`materialize_checkpoint`, `materialize_export`) on a work folder that is removed afterwards;
only their figures are kept.
"""

from __future__ import annotations

import importlib.resources
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from prover_assets.config import RunConfig
from prover_assets.cpu_threads import cpu_threads
from prover_assets.generation.engines import EngineOpening
from prover_assets.generation.factory import open_engine
from prover_assets.generation.runner import generate_samples, round0_specs
from prover_assets.gpus import training_ranks
from prover_assets.preflight.model import CheckStatus, Measurement, PreflightCheck, timed
from prover_assets.problems.eval_sets import load_minif2f
from prover_assets.records import Appender, Generation, Problem, publish_folder, read_records
from prover_assets.records.outputs import StageResult, Step, StepInputs
from prover_assets.sft.memory import GIB
from prover_assets.sft.shards import ROWS_FILE, ShardWriter
from prover_assets.sft.stages import (
    export_merge_device,
    materialize_checkpoint,
    materialize_export,
    planned_memory,
)
from prover_assets.verify.backends import backend_from_settings
from prover_assets.verify.verifier import StrictVerifier, VerifierPolicy

__all__ = [
    "PEAK_TOLERANCE",
    "SmokeModel",
    "export_check",
    "generation_check",
    "memory_plan_check",
    "training_check",
    "verification_check",
]

PEAK_TOLERANCE = 1.15  # the measured peak may exceed the memory model's by this factor


@dataclass(frozen=True)
class SmokeModel:
    """The model the smoke round samples and trains: its folder and revision."""

    folder: Path
    revision: str


class SmokeShardsResult(StageResult):
    """The smoke run's SFT shards: how many rows and tokens the training smoke test reads."""

    rows: int
    tokens: int


def smoke_problems(count: int) -> list[Problem]:
    """The first `count` problems of the shipped miniF2F."""
    data = Path(str(importlib.resources.files("prover_assets") / "data"))
    return load_minif2f(data / "goedel-prover-v2" / "minif2f.jsonl")[:count]


def generation_check(
    config: RunConfig, model: SmokeModel, folder: Path, samples: int, cap: int
) -> tuple[PreflightCheck, list[Generation]]:
    """`smoke.generation`: a few round-0 samples through the configured engine, timed from
    its start; the samples, for the verification check after it."""
    spec = config.experiment
    made: list[Generation] = []
    threshold = (
        f"{samples} samples at max_model_len {spec.model.max_model_len}, cap {cap}, with the "
        f"configured engine ({config.gpu.engine})"
    )
    remedy = (
        "read the engine's log in the preflight's work folder (engine-*/): a load failure, an "
        "out-of-memory at this max_model_len (lower gpu_memory_utilization or max_num_seqs), or "
        "a model folder vLLM cannot read"
    )

    def measure() -> Measurement:
        specs = round0_specs(smoke_problems(samples), 1, cap)
        opening = EngineOpening(
            model_path=model.folder,
            model_rev=model.revision,
            sampling=spec.generation.sampling,
            max_model_len=spec.model.max_model_len,
            seed=spec.generation.seed,
            workdir=folder / "engines",
            commit_every=len(specs),
            cpu_threads=cpu_threads(config.gpu, config.lean).count,
        )
        started = time.monotonic()
        engine = open_engine(config.gpu, opening)
        with engine, Appender(folder / "generations.jsonl", Generation) as appender:
            loaded = time.monotonic() - started
            tokenizer = getattr(engine, "tokenizer", None) or _tokenizer(model.folder)
            stats = generate_samples(specs, engine, tokenizer, appender, opening=opening)
        made.extend(read_records(folder / "generations.jsonl", Generation))
        rate = stats.tokens_per_s()
        text = (
            f"{stats.generated_now} samples, {sum(stats.completion_tokens)} tokens at "
            f"{rate:.0f} tokens/s after a load of {loaded:.0f} s; {stats.no_code} without code"
        )
        figures = {"tokens_per_s": rate, "generation startup s": loaded}
        return Measurement(
            CheckStatus.PASSED if stats.generated_now == len(specs) else CheckStatus.FAILED,
            text,
            figures,
        )

    return timed("smoke.generation", threshold, remedy, measure), made


def _tokenizer(folder: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder)


def verification_check(config: RunConfig, generations: list[Generation]) -> PreflightCheck:
    """`smoke.verification`: the smoke samples judged by the configured verifier, none of them
    an infrastructure failure."""
    lean = config.lean
    threshold = "every sample judged, none an infrastructure failure"
    remedy = "read the REPL's stderr in the verdicts' reasons; the lean.* checks above say more"

    def measure() -> Measurement:
        by_id = {p.problem_id: p for p in smoke_problems(len(generations))}
        policy = VerifierPolicy(budget_s=lean.budget_s, feedback=False, recheck_timeouts=False)
        started = time.monotonic()
        with backend_from_settings(lean) as backend:
            verdicts = StrictVerifier(backend, policy).verify_many(
                [(by_id[g.problem_id], g) for g in generations]
            )
        wall = time.monotonic() - started
        faults = [v for v in verdicts if v.stage == "infrastructure"]
        with_code = sum(g.lean_code is not None for g in generations)
        accepted = sum(v.accepted for v in verdicts)
        text = (
            f"{len(verdicts)} judged in {wall:.1f} s: {accepted} accepted, {with_code} with code, "
            f"{len(faults)} infrastructure failures"
            + (f" ({faults[0].reasons[:2]})" if faults else "")
        )
        ok = len(verdicts) == len(generations) and not faults
        # no rate from so few samples: the workers' start and import would dominate it (the
        # self-test's seconds a proof are the rate)
        return Measurement(CheckStatus.PASSED if ok else CheckStatus.FAILED, text)

    return timed("smoke.verification", threshold, remedy, measure)


def memory_plan_check(config: RunConfig, model: SmokeModel) -> PreflightCheck:
    """`training.memory_plan`: the registered training's planned peak on one rank's card,
    from the model's shape (`sft/memory.py`), before any training is tried."""
    training, device = config.experiment.training, config.gpu.device
    threshold = (
        f"one rank's planned peak within its {training.gpu_memory_gib:g} GiB card "
        "(training.gpu_memory_gib), headroom kept"
    )
    remedy = (
        "lower training.tokens_per_micro_batch or loss_chunk_tokens, turn gradient_checkpointing "
        "on, or set training.gpu_memory_gib to the card the box has"
    )

    def measure() -> Measurement:
        plan = planned_memory(training, model.folder, "cuda")
        on = "" if device == "cuda" else " (the plan for a GPU; this config trains on CPU)"
        if plan.fits:
            return Measurement(
                CheckStatus.PASSED,
                plan.describe() + on,
                {"planned peak GiB": plan.peak_bytes / GIB},
            )
        return Measurement(CheckStatus.FAILED, (plan.refusal() or plan.describe()) + on)

    return timed("training.memory_plan", threshold, remedy, measure)


def _smoke_shards(folder: Path, training_rows: int, row_tokens: int, vocab: int, seed: int) -> Path:
    """Random rows of `row_tokens` tokens (their content does not matter to memory or speed),
    published with a manifest as the SFT shards step publishes its own."""
    generator = np.random.default_rng(seed)
    step = Step(
        folder, str(folder), SmokeShardsResult, StepInputs.hash({}), {"rows": training_rows}
    )
    with publish_folder(folder) as staging:
        writer = ShardWriter(staging)
        for row in range(training_rows):
            writer.write(
                generator.integers(3, vocab, row_tokens),
                prompt_len=row_tokens // 2,
                kind="first",
                round=0,
                sample_idx=row,
                cap_tokens=row_tokens,
                proof_sha="0" * 64,
                model_rev="preflight",
                problem_id=f"preflight-{row}",
            )
        writer.close()
        result = SmokeShardsResult(rows=writer.rows, tokens=writer.tokens)
        step.publish(staging, result, [*writer.shard_paths(), staging / ROWS_FILE])
    return folder


def training_check(
    config: RunConfig, model: SmokeModel, folder: Path
) -> tuple[PreflightCheck, Path | None, Path | None]:
    """Two optimizer steps of micro-batches packed to the registered tokens_per_micro_batch (one
    micro-batch per rank a step: the peak of a micro-batch does not grow with accumulation)."""
    spec, device = config.experiment, config.gpu.device
    training = spec.training
    ranks = training_ranks(training, device)
    smoke = training.model_copy(
        update={
            "gradient_accumulation": ranks,
            "save_every": 2 * ranks,
            "max_steps": 2,
            "epochs": 1,
            "warmup_ratio": 0.0,
        }
    )
    row_tokens = spec.sft.max_seq_len
    rows = 2 * ranks * max(training.tokens_per_micro_batch // row_tokens, 1)
    threshold = (
        f"2 optimizer steps of {training.tokens_per_micro_batch} tokens a micro-batch on "
        f"{ranks} rank(s); a measured GPU peak within {PEAK_TOLERANCE:g} x the memory model's"
    )
    remedy = (
        "read train.log in the preflight's work folder; an out-of-memory: see training.memory_plan"
    )
    done: dict[str, Path] = {}

    def measure() -> Measurement:
        vocab = int(_config_value(model.folder, "vocab_size"))
        shards = _smoke_shards(folder / "shards", rows, row_tokens, vocab, training.seed)
        result = materialize_checkpoint(
            folder / "checkpoint",
            shards_dir=shards,
            base_model_dir=model.folder,
            base_revision=model.revision,
            training=smoke,
            device=device,
            cpu_threads=cpu_threads(config.gpu, config.lean).count,
        ).result
        done.update(shards=shards, checkpoint=folder / "checkpoint")
        rate = result.tokens_per_s_this_run
        text = f"{result.global_step} steps, {result.micro_steps} micro-batches, {rate or 0:.0f} tokens/s"
        figures = {"sft_tokens_per_s": rate} if rate else {}
        if result.peak_memory_gib is None:
            return Measurement(
                CheckStatus.PASSED, text + "; peak memory not measured (CPU)", figures
            )
        plan = planned_memory(smoke, model.folder, device)
        planned = plan.peak_bytes / GIB
        text += f"; peak {result.peak_memory_gib:.1f} GiB against a planned {planned:.1f} GiB"
        ok = result.peak_memory_gib <= PEAK_TOLERANCE * planned and result.global_step == 2
        return Measurement(
            CheckStatus.PASSED if ok else CheckStatus.FAILED,
            text,
            figures | {"measured peak GiB": result.peak_memory_gib},
        )

    check = timed("smoke.training", threshold, remedy, measure)
    return check, done.get("shards"), done.get("checkpoint")


def _config_value(folder: Path, name: str) -> object:
    return json.loads((folder / "config.json").read_text(encoding="utf-8"))[name]


def export_check(
    config: RunConfig, model: SmokeModel, shards: Path, checkpoint: Path, folder: Path
) -> PreflightCheck:
    """`smoke.export`: the smoke checkpoint merged and exported as the real step does, its
    log-probabilities within the parity bounds of the adapter model's."""
    device = config.gpu.device
    dtype = "bfloat16" if config.experiment.training.uses_bf16(device) else "float32"
    threshold = (
        f"the {dtype} export reproduces the adapter model's log-probabilities (its parity bounds)"
    )
    remedy = "the merge or the cast breaks the model: see the export's parity figures; do not train on this stack"

    def measure() -> Measurement:
        result = materialize_export(
            folder / "export",
            checkpoint_dir=checkpoint,
            base_model_dir=model.folder,
            shards_dir=shards,
            dtype=dtype,
            cpu_threads=cpu_threads(config.gpu, config.lean).count,
            merge_on=export_merge_device(config.experiment.training, device, model.folder),
        ).result
        return Measurement(CheckStatus.PASSED, f"{result.describe()}; merged on {result.merged_on}")

    return timed("smoke.export", threshold, remedy, measure)
