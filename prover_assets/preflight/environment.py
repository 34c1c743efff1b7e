"""The preflight's checks of the environment: the config, host memory, the GPUs, the disk. The
Lean workspace's checks are `lean_checks.py`'s, the model folder's and its prompt's
`model_checks.py`'s; the check type and its constructors are `model.py`'s.

Each check is a function returning a `PreflightCheck` with what it measured, the threshold, and
what to do when it fails. A check never raises for what it checks: an exception is its failure,
with the exception's message as what was measured.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.resources
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from prover_assets.config import (
    LocalLeanSettings,
    RemoteLeanSettings,
    RunConfig,
    TrainingSpec,
    is_placeholder,
    resolve_path,
)
from prover_assets.gpus import visible_gpu_count
from prover_assets.operations.eta import PRIORS, eval_problems_upper_bound
from prover_assets.preflight.lean_checks import ReplMeasure
from prover_assets.preflight.model import (
    Measurement,
    PreflightCheck,
    not_applicable,
    passed_or_failed,
    timed,
)
from prover_assets.sft.export import planned_export
from prover_assets.sft.memory import QWEN3_8B, ModelShape
from prover_assets.verify.sizing import lean_host_mb, sized_workers

__all__ = [
    "MIB",
    "config_paths",
    "disk_check",
    "gpu_check",
    "host_memory_check",
    "paths_check",
    "placeholders_check",
    "round_footprint_bytes",
]

MIB = 1 << 20
# Host memory a vLLM engine child holds beside its GPU (CUDA context, the scheduler, the
# tokenizer, pinned buffers): a stated prior, never measured here (no GPU), said in the check.
ENGINE_HOST_GIB = 6.0


def placeholders_check(config: RunConfig) -> PreflightCheck:
    """`config.placeholders`: no `REPLACE_ME` value left in the config."""

    def measure() -> Measurement:
        found = config.placeholders
        listed = f": {', '.join(found)}" if found else ""
        return Measurement(passed_or_failed(not found), f"{len(found)} placeholders{listed}")

    return timed(
        "config.placeholders",
        "0 `REPLACE_ME` values",
        f"fill in each listed key of {config.source}",
        measure,
    )


def config_paths(config: RunConfig) -> dict[str, str]:
    """Every path the config names (a placeholder left out: the check above names it), by its
    key path."""
    spec = config.experiment
    paths = {
        f"eval_sets.{name}.file.path": eval_set.file.path
        for name, eval_set in spec.eval_sets.items()
    }
    paths |= {f"pool.shards[{i}].path": shard.path for i, shard in enumerate(spec.pool.shards)}
    paths["report.prereg"] = spec.report.prereg
    if spec.model.path is not None:
        paths["model.path"] = spec.model.path
    if isinstance(config.lean, LocalLeanSettings):
        paths["lean.workspace"] = config.lean.workspace
    return {where: value for where, value in paths.items() if not is_placeholder(value)}


def paths_check(config: RunConfig) -> PreflightCheck:
    """`config.paths`: every path the config names exists, and the data root can be made."""

    def measure() -> Measurement:
        paths = config_paths(config)
        missing = [
            f"{where} ({value})"
            for where, value in paths.items()
            if not resolve_path(value, where).exists()
        ]
        root = Path(config.experiment.data_root).expanduser()
        parent = next((p for p in [root, *root.parents] if p.exists()), None)
        if not is_placeholder(config.experiment.data_root) and (
            parent is None or not _writable(parent)
        ):
            missing.append(f"data_root {root} (no writable folder above it)")
        found = len(paths) - sum(1 for m in missing if not m.startswith("data_root"))
        text = f"{found} of {len(paths)} paths exist" + (
            f"; missing: {', '.join(missing)}" if missing else ""
        )
        return Measurement(passed_or_failed(not missing), text)

    return timed(
        "config.paths",
        "every path the config names exists; data_root is writable",
        "create or download what is missing, or correct the path in the config",
        measure,
    )


def _writable(folder: Path) -> bool:
    return os.access(folder, os.W_OK | os.X_OK)


def host_memory_check(
    config: RunConfig, measured: ReplMeasure, total_bytes: int | None = None
) -> PreflightCheck:
    """The host memory the Lean workers need beside the GPU side (the engines, or the export's
    fp32 merge, whichever is larger): at once when the schedule overlaps them, the larger of
    the two when it does not."""
    lean, gpu = config.lean, config.gpu
    total = total_bytes if total_bytes is not None else psutil.virtual_memory().total
    workers = 0 if isinstance(lean, RemoteLeanSettings) else sized_workers(lean).workers
    spare = bool(getattr(lean, "warm_spare", False))
    if measured.anonymous_mb is not None and measured.mapped_mb is not None:
        per_worker_mb, mapped_mb, source = measured.anonymous_mb, measured.mapped_mb, "measured"
    else:  # not measured: the ceiling, as if all of it were the worker's own
        per_worker_mb, mapped_mb = getattr(lean, "memory_ceiling_mb", 0), 0.0
        source = "memory_ceiling_mb"
    lean_bytes = lean_host_mb(workers, spare=spare, anonymous_mb=per_worker_mb, mapped_mb=mapped_mb)
    lean_bytes *= MIB
    engine_bytes, engines = _engine_bytes(config)
    export_bytes, merged_on = _export_bytes(config)
    # The export runs on its own on the GPU side; the Lean workers may run beside either.
    gpu_side = (engine_bytes, export_bytes)
    need = (
        lean_bytes + max(gpu_side) if gpu.schedule == "overlapped" else max(lean_bytes, *gpu_side)
    )
    processes = f"{workers} workers" + (" + the warm spare" if spare and workers else "")
    text = (
        f"need {need / (1 << 30):.1f} GiB ({processes} x {per_worker_mb:.0f} MiB own {source}"
        f" + {mapped_mb:.0f} MiB mapped .oleans once; "
        f"{engines} {engine_bytes / (1 << 30):.1f} GiB; the export's fp32 merge on {merged_on} "
        f"{export_bytes / (1 << 30):.1f} GiB; schedule {gpu.schedule}) of "
        f"{total / (1 << 30):.1f} GiB"
    )
    return timed(
        "host.memory",
        "the need below 90 % of the host's memory",
        "fewer lean workers, the exclusive schedule, or a host with more memory",
        lambda: Measurement(passed_or_failed(need <= 0.9 * total), text),
    )


def _engine_bytes(config: RunConfig) -> tuple[int, str]:
    """The host memory the generation engines hold, and what they are."""
    gpu = config.gpu
    if gpu.engine == "vllm":
        bytes_ = int(gpu.engines * ENGINE_HOST_GIB * (1 << 30))
        return bytes_, f"{gpu.engines} vLLM children x {ENGINE_HOST_GIB:g} GiB (a prior)"
    if gpu.engine == "transformers":
        held = _model_bytes(config) * (2 if gpu.device == "cpu" else 1)
        return held, "the transformers engine's model"
    return 0, "no engine on this host (HTTP replicas)"


def _export_bytes(config: RunConfig) -> tuple[int, str]:
    """The export's host peak (`export_host_peak_bytes`) for the model's shape (its snapshot's
    config.json, or Qwen3-8B's before it is on disk; the demo's tiny model, built later, none),
    and where its fp32 merge runs: on a GPU when training is on one and the model fits it
    (which GPU does not change the host's share), else on the host."""
    model = config.experiment.model
    if model.source == "demo_tiny":
        return 0, "the host"
    config_file = Path(model.path or "") / "config.json"
    if model.path and not is_placeholder(model.path) and config_file.is_file():
        shape = ModelShape.of(json.loads(config_file.read_text(encoding="utf-8")))
    else:
        shape = ModelShape.of(QWEN3_8B)
    peak, device = planned_export(
        config.experiment.training.gpu_memory_gib,
        shape.parameters(),
        trains_on_gpu=config.gpu.device == "cuda",
    )
    return peak, "the host" if device == "cpu" else "a GPU"


def _model_bytes(config: RunConfig) -> int:
    path = config.experiment.model.path
    if path is None or is_placeholder(path):
        return 0
    return sum(p.stat().st_size for p in Path(path).glob("*.safetensors"))


def gpu_check(
    config: RunConfig, query: Callable[[], dict[str, Any]] | None = None
) -> PreflightCheck:
    """Count, names and memory of the GPUs the config uses, torch's CUDA build against the
    driver's, and vLLM importable where it samples, with the torch its wheel was built for."""
    gpu, training = config.gpu, config.experiment.training
    trains = "every GPU of the box" if training.gpus == "all" else f"GPUs {training.gpus}"
    threshold = (
        f"GPUs {gpu.gpus} (generation) and {trains} (training) visible; torch's CUDA no newer "
        "than the driver's; vLLM importable for engine vllm"
    )
    remedy = (
        "install the torch and vLLM builds for this driver (`nvidia-smi` says the driver's CUDA), "
        "or set gpu.gpus / training.gpus to the GPUs the box has"
    )
    if gpu.device == "cpu" and gpu.engine != "vllm":
        return not_applicable(
            "gpu.devices", "this config samples and trains on CPU", threshold, remedy
        )

    def measure() -> Measurement:
        found = (query or _query_gpus)()
        problems, trains_on = _training_gpus(training, found["count"])
        wanted = sorted(set(gpu.gpus) | set(trains_on))
        problems += [f"GPU {i} not visible" for i in wanted if i >= found["count"]]
        if found["torch_cuda"] is None:
            problems.append("torch is a CPU build")
        elif found["driver_cuda"] is not None and _version(found["torch_cuda"]) > _version(
            found["driver_cuda"]
        ):
            problems.append(
                f"torch is built for CUDA {found['torch_cuda']}, the driver supports {found['driver_cuda']}"
            )
        if gpu.engine == "vllm" and found["vllm"] is None:
            problems.append(f"vLLM does not import ({found['vllm_error']})")
        wanted_torch = found.get("vllm_torch")
        if gpu.engine == "vllm" and wanted_torch and not _satisfies(found["torch"], wanted_torch):
            problems.append(
                f"vLLM {found['vllm']} is built for torch {wanted_torch}, torch is {found['torch']}"
            )
        text = (
            f"{found['count']} GPUs {found['names']}, {found['memory_gib']} GiB; torch CUDA "
            f"{found['torch_cuda']}, driver CUDA {found['driver_cuda']}, vLLM {found['vllm']}; "
            f"training on GPUs {trains_on}"
        )
        figures = {"training_gpus": float(len(trains_on))}
        return Measurement(
            passed_or_failed(not problems),
            text + (f"; {'; '.join(problems)}" if problems else ""),
            figures,
        )

    return timed("gpu.devices", threshold, remedy, measure)


def _training_gpus(training: TrainingSpec, visible: int) -> tuple[list[str], list[int]]:
    """What training uses on a box of `visible` GPUs (`all` resolved here), or why it cannot."""
    try:
        return [], training.resolved_gpus(visible)
    except ValueError as refusal:
        return [str(refusal)], []


def _satisfies(version: str, specifier: str) -> bool:
    return SpecifierSet(specifier).contains(version.split("+")[0], prereleases=True)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".")[:2])


def _query_gpus() -> dict[str, Any]:
    import torch

    count = visible_gpu_count()
    properties = [torch.cuda.get_device_properties(i) for i in range(count)]
    driver = None
    try:
        header = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=30).stdout
        driver = next(
            (
                line.split("CUDA Version:")[1].split()[0]
                for line in header.splitlines()
                if "CUDA Version:" in line
            ),
            None,
        )
    except (OSError, subprocess.TimeoutExpired):
        pass
    vllm_version, vllm_error, vllm_torch = None, None, None
    try:
        import vllm

        vllm_version = vllm.__version__
    except Exception as exc:  # any import failure is what this check reports
        vllm_error = f"{type(exc).__name__}: {exc}"
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        requirements = [Requirement(r) for r in importlib.metadata.requires("vllm") or []]
        vllm_torch = next((str(r.specifier) for r in requirements if r.name == "torch"), None)
    return {
        "count": count,
        "names": sorted({p.name for p in properties}),
        "memory_gib": sorted({round(p.total_memory / (1 << 30), 1) for p in properties}),
        "torch": torch.__version__,
        "vllm_torch": vllm_torch,
        "torch_cuda": torch.version.cuda,
        "driver_cuda": driver,
        "vllm": vllm_version,
        "vllm_error": vllm_error,
    }


def round_footprint_bytes(config: RunConfig, model_bytes: int) -> dict[str, int]:
    """The bytes a full round writes under data_root, term by term, from the config's counts as
    the `eta` asset plans them and its high prior of completion length (at most the largest
    cap): generations, verdicts, checkpoints, exports."""
    spec = config.experiment
    tokens = min(PRIORS["mean_completion_tokens"][2], max(spec.generation.caps))
    eval_samples = sum(
        len(spec.caps_of(name)) * eval_problems_upper_bound(spec, name) * spec.generation.n_samples
        for name in spec.eval_sets
    )
    seeds, iterations = len(spec.training.all_seeds()), spec.iterations
    pool_samples = spec.pool.size * spec.generation.n_samples * (1 + spec.corrections.rounds)
    samples = eval_samples * (1 + seeds * iterations) + pool_samples * iterations
    # a generation row holds the prompt and completion as text and as ids: ~12 bytes a token
    generations = int(samples * tokens * 12)
    verdicts = samples * 4096
    lora = _lora_bytes(config)
    checkpoints = seeds * iterations * spec.training.keep_checkpoints * lora * 4  # + Adam states
    exports = seeds * iterations * model_bytes
    return {
        "generations": generations,
        "verdicts": verdicts,
        "checkpoints": checkpoints,
        "exports": exports,
    }


def _lora_bytes(config: RunConfig) -> int:
    path = config.experiment.model.path
    shape_config = QWEN3_8B
    if path is not None and not is_placeholder(path) and (Path(path) / "config.json").is_file():
        shape_config = json.loads((Path(path) / "config.json").read_text(encoding="utf-8"))
    training = config.experiment.training
    return 4 * ModelShape.of(shape_config).lora_parameters(training.lora_r, training.target_modules)


def disk_check(
    config: RunConfig,
    margin: float,
    model_bytes: int,
    free_bytes: Callable[[Path], int] | None = None,
) -> PreflightCheck:
    """`disk.free`: the data root's disk holds `margin` times the round's planned footprint
    (`model_bytes` a model's weights; `free_bytes` reads the free space)."""
    root = Path(config.experiment.data_root).expanduser()
    existing = next((p for p in [root, *root.parents] if p.exists()), Path("/"))
    threshold = f"free space at least {margin:g} x the round's footprint"
    remedy = f"free space on {existing}, or move data_root to a larger disk"

    def measure() -> Measurement:
        free = (free_bytes or (lambda path: shutil.disk_usage(path).free))(existing)
        terms = round_footprint_bytes(config, model_bytes)
        need = sum(terms.values())
        text = (
            f"{free / (1 << 30):.1f} GiB free at {existing}; footprint {need / (1 << 30):.1f} GiB ("
            + ", ".join(f"{name} {value / (1 << 30):.1f}" for name, value in terms.items())
            + ")"
        )
        return Measurement(passed_or_failed(free >= margin * need), text)

    return timed("disk.free", threshold, remedy, measure)
