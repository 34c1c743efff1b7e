"""The preflight as one call: every check in order, the report, kept where heavy jobs look."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from prover_assets.config import RemoteLeanSettings, RunConfig, require_filled, resolve_path
from prover_assets.generation.revision import model_revision
from prover_assets.lean.protocol import GOEDEL_HEADER
from prover_assets.preflight import environment as env
from prover_assets.preflight import smoke
from prover_assets.preflight.gate import PREFLIGHT_DIR, preflight_identity, write_report
from prover_assets.preflight.model import (
    CheckStatus,
    PreflightCheck,
    PreflightIdentity,
    PreflightReport,
)
from prover_assets.records import now_utc
from prover_assets.verify.backends import backend_from_settings, self_test

__all__ = ["PreflightSettings", "run_preflight"]


@dataclass(frozen=True)
class PreflightSettings:
    """How hard the preflight looks: short timeouts, a few samples, the disk's margin."""

    round_trip_timeout_s: float = 60.0
    smoke_samples: int = 4
    smoke_cap: int | None = None  # None: the smallest of generation.caps
    disk_margin: float = 1.5


Progress = Callable[[PreflightCheck], None]


def _smoke_model(config: RunConfig, work: Path) -> smoke.SmokeModel:
    """The model the round samples: the hub snapshot the config names, or for the demo a tiny
    model built here (the demo's own is format-tuned later, by its asset)."""
    spec = config.experiment
    if spec.demo is not None:
        from prover_assets.generation.tiny_model import build_tiny_model

        folder = build_tiny_model(
            work / "tiny-model",
            hidden_size=spec.demo.tiny_hidden_size,
            layers=spec.demo.tiny_layers,
            vocab_size=spec.demo.tiny_vocab_size,
            seed=spec.generation.seed,
        )
        return smoke.SmokeModel(folder, model_revision(folder))
    path = resolve_path(require_filled(spec.model.path or "", "spec.model.path"), "spec.model.path")
    return smoke.SmokeModel(path, model_revision(path, spec.model.revision))


def _identity(config: RunConfig) -> PreflightIdentity:
    """This run's identity; with pins that do not read back (lean.pins says why), the reason
    in their place, so that the failed report is still kept where the launch looks."""
    try:
        return preflight_identity(config)
    except ValueError as exc:
        return preflight_identity(config, pins_unreadable=str(exc))


def self_test_check(config: RunConfig) -> PreflightCheck:
    lean = config.lean
    one = (
        lean
        if isinstance(lean, RemoteLeanSettings)
        else lean.model_copy(update={"workers": 1, "warm_spare": False})
    )

    def measure() -> tuple[CheckStatus, str, dict[str, float]]:
        with backend_from_settings(one) as backend:
            outcome = self_test(backend, lean.budget_s, GOEDEL_HEADER.strip())
        return CheckStatus.PASSED if outcome.passed else CheckStatus.FAILED, outcome.description, {}

    return env.timed(
        "lean.self_test",
        "known-good accepted, known-bad rejected, the preamble and statement-check pairs held",
        "the verifier misjudges known proofs: rebuild the workspace at the pins "
        "(`make lean-workspace`) and run it again",
        measure,
    )


def run_preflight(
    config: RunConfig,
    settings: PreflightSettings = PreflightSettings(),
    *,
    progress: Progress = lambda check: None,
    identity: PreflightIdentity | None = None,
) -> tuple[PreflightReport, Path]:
    """Every check, in order; the report is written where heavy jobs look for it and returned
    with its path. The work folder is removed when every check passed, kept (and named in the
    report) otherwise."""
    started = time.monotonic()
    root = resolve_path(config.experiment.data_root, "spec.data_root").resolve() / PREFLIGHT_DIR
    work = root / f"work-{time.strftime('%Y%m%dT%H%M%S')}-{id(config) % 10_000}"
    work.mkdir(parents=True, exist_ok=True)
    checks: list[PreflightCheck] = []

    def add(check: PreflightCheck) -> PreflightCheck:
        checks.append(check)
        progress(check)
        return check

    def ok(name: str) -> bool:
        return next(c for c in checks if c.name == name).ok

    add(env.placeholders_check(config))
    add(env.paths_check(config))
    resolved: list[smoke.SmokeModel] = []

    def resolve_model() -> tuple[CheckStatus, str, dict[str, float]]:
        resolved.append(_smoke_model(config, work))
        return CheckStatus.PASSED, f"{resolved[0].folder} is {resolved[0].revision}", {}

    add(
        env.timed(
            "model.load",
            "the model folder resolves and its revision derives",
            "download the snapshot into model.path and give its hub revision in model.revision",
            resolve_model,
        )
    )
    model = resolved[0] if resolved else None
    why = "the model did not resolve (model.load)"
    add(
        env.model_files_check(model.folder if model else None, why)
        if model
        else env.blocked(
            "model.files",
            "model.load",
            "weights, a tokenizer and a chat template",
            "see model.load",
        )
    )
    add(
        env.model_revision_check(
            model.folder, None if config.experiment.demo else config.experiment.model.revision, why
        )
        if model
        else env.blocked("model.revision", "model.load", "the declared revision", "see model.load")
    )
    measured = env.ReplMeasure()
    add(env.pins_check(config))
    add(env.round_trip_check(config, settings.round_trip_timeout_s, measured))
    repl_ok = ok("lean.pins") and ok("lean.round_trip")
    needs = "lean.pins" if not ok("lean.pins") else "lean.round_trip"
    add(
        env.import_check(config, measured)
        if repl_ok
        else env.blocked("lean.import", needs, "the header imports", "see above")
    )
    add(
        self_test_check(config)
        if repl_ok
        else env.blocked("lean.self_test", needs, "known proofs judged right", "see above")
    )
    add(env.host_memory_check(config, measured))
    add(env.gpu_check(config))
    add(
        env.golden_prompt_check(model.folder, why)
        if model
        else env.blocked("prompt.golden", "model.load", "the golden prompt", "see model.load")
    )
    generations = []
    if model and ok("model.files") and ok("gpu.devices"):
        cap = settings.smoke_cap or min(config.experiment.generation.caps)
        generation, generations = smoke.generation_check(
            config, model, work, settings.smoke_samples, cap
        )
        add(generation)
    else:
        add(
            env.blocked(
                "smoke.generation",
                "model.files" if model else "model.load",
                "a few samples",
                "see above",
            )
        )
    if ok("smoke.generation") and ok("lean.self_test"):
        add(smoke.verification_check(config, generations))
    else:
        needs = "smoke.generation" if not ok("smoke.generation") else "lean.self_test"
        add(env.blocked("smoke.verification", needs, "every sample judged", "see above"))
    if model:
        add(smoke.memory_plan_check(config, model))
    else:
        add(env.blocked("training.memory_plan", "model.load", "the plan fits", "see model.load"))
    shards = checkpoint = None
    if model and ok("training.memory_plan") and ok("gpu.devices"):
        training, shards, checkpoint = smoke.training_check(config, model, work)
        add(training)
    else:
        add(env.blocked("smoke.training", "training.memory_plan", "2 optimizer steps", "see above"))
    if model and shards and checkpoint and ok("smoke.training"):
        add(smoke.export_check(config, model, shards, checkpoint, work))
    else:
        add(env.blocked("smoke.export", "smoke.training", "the export's parity", "see above"))
    model_bytes = sum(p.stat().st_size for p in model.folder.glob("*.safetensors")) if model else 0
    add(env.disk_check(config, settings.disk_margin, model_bytes))
    report = PreflightReport(
        identity=identity or _identity(config),
        config_source=config.source,
        checks=checks,
        wall_s=round(time.monotonic() - started, 1),
        finished_at=now_utc(),
        simulated=config.experiment.demo is not None or config.lean.backend == "simulated",
        work_folder=None if all(c.ok for c in checks) else str(work),
    )
    if report.passed:
        shutil.rmtree(work, ignore_errors=True)
    return report, write_report(config, report)
