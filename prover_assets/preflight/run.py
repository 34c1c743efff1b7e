"""The preflight as one call: every check in order, the report, kept where heavy jobs look."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from prover_assets.config import RemoteLeanSettings, RunConfig, resolve_path
from prover_assets.generation.revision import model_revision
from prover_assets.generation.stages import hub_model
from prover_assets.lean.protocol import GOEDEL_HEADER
from prover_assets.preflight import environment as env
from prover_assets.preflight import lean_checks, model_checks, smoke
from prover_assets.preflight.attention import attention_check
from prover_assets.preflight.balance import balance_check
from prover_assets.preflight.context import context_check
from prover_assets.preflight.gate import PREFLIGHT_DIR, preflight_identity, write_report
from prover_assets.preflight.model import (
    CheckStatus,
    Measurement,
    PreflightCheck,
    PreflightIdentity,
    PreflightReport,
    blocked,
    timed,
)
from prover_assets.records import Generation, now_utc, publish_text
from prover_assets.records.hashing import sha256_text
from prover_assets.records.owned import Removed, owned_name, remove_dead_owners
from prover_assets.verify.backends import backend_from_settings
from prover_assets.verify.self_test import SELF_TEST_JOBS, self_test
from prover_assets.verify.sizing import sized_workers

__all__ = ["STEPS", "PreflightSettings", "PreflightState", "Step", "run_preflight", "run_step"]


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
        from prover_assets.demo.tiny_model import build_tiny_model

        folder = build_tiny_model(
            work / "tiny-model",
            hidden_size=spec.demo.tiny_hidden_size,
            layers=spec.demo.tiny_layers,
            vocab_size=spec.demo.tiny_vocab_size,
            seed=spec.generation.seed,
        )
        return smoke.SmokeModel(folder, model_revision(folder))
    return smoke.SmokeModel(*hub_model(spec))


WORK_PREFIX = "work"
# In a failed preflight's work folder: the sweep keeps it; the next preflight of its identity
# removes it.
KEPT_MARKER = "kept-for-inspection.json"


def identity_key(identity: PreflightIdentity) -> str:
    """12 hex digits that name a preflight identity in its work folder's name."""
    return sha256_text(identity.model_dump_json())[:12]


def sweep_work_folders(root: Path, identity_key: str | None = None) -> list[Removed]:
    """Remove the work folders under `root` that no preflight needs: every one a kill left (its
    process gone, no report), and a failed one (kept for inspection, marked) only when it is of
    `identity_key`'s identity."""

    def failed(folder: Path) -> bool:
        return (folder / KEPT_MARKER).exists()

    def ours(folder: Path) -> bool:
        return identity_key is not None and folder.name.startswith(f"{WORK_PREFIX}-{identity_key}-")

    return remove_dead_owners(
        root,
        WORK_PREFIX,
        keep=lambda folder: failed(folder) and not ours(folder),
        finished=lambda folder: failed(folder) and ours(folder),
    )


def _identity(config: RunConfig) -> PreflightIdentity:
    """This run's identity; with pins that do not read back (lean.pins says why), the reason
    in their place, so that the failed report is still kept where the launch looks."""
    try:
        return preflight_identity(config)
    except ValueError as exc:
        return preflight_identity(config, pins_unreadable=str(exc))


def self_test_check(config: RunConfig, measured: lean_checks.ReplMeasure) -> PreflightCheck:
    """The self-test on one worker; its seconds per proof (past the header import the round
    measured before) give the ETA's verification rate at the configured workers."""
    lean = config.lean
    one = (
        lean
        if isinstance(lean, RemoteLeanSettings)
        else lean.model_copy(update={"workers": 1, "warm_spare": False})
    )

    def measure() -> Measurement:
        started = time.monotonic()
        with backend_from_settings(one) as backend:
            outcome = self_test(backend, lean.budget_s, GOEDEL_HEADER.strip())
        proofs_s = max(time.monotonic() - started - (measured.import_s or 0.0), 0.0)
        per_proof = proofs_s / SELF_TEST_JOBS
        status = CheckStatus.PASSED if outcome.passed else CheckStatus.FAILED
        text = f"{outcome.description}; {per_proof:.2f} s a proof on one worker"
        # a server's workers are its own: no rate per worker of ours to scale
        figures = (
            {}
            if isinstance(lean, RemoteLeanSettings)
            else {"verify_s_per_code_sample": per_proof / sized_workers(lean).workers}
        )
        return Measurement(status, text, figures)

    return timed(
        "lean.self_test",
        "known-good accepted, known-bad rejected, the preamble and statement-check pairs held",
        "the verifier misjudges known proofs: rebuild the workspace at the pins "
        "(`make lean-workspace`) and run it again",
        measure,
    )


@dataclass
class PreflightState:
    """What the checks have found so far, for the checks after them: the model resolved, the
    REPL's measured seconds, the smoke round's samples, shards and checkpoint, and every check
    done, in order."""

    config: RunConfig
    settings: PreflightSettings
    work: Path
    repl: lean_checks.ReplMeasure = field(default_factory=lean_checks.ReplMeasure)
    model: smoke.SmokeModel | None = None
    generations: list[Generation] = field(default_factory=list)
    shards: Path | None = None
    checkpoint: Path | None = None
    done: list[PreflightCheck] = field(default_factory=list)

    def passed(self, name: str) -> bool:
        return next(c for c in self.done if c.name == name).ok

    @property
    def figures(self) -> dict[str, float]:
        """Every number the checks so far measured, by name (the round's balance reads them)."""
        return {name: value for check in self.done for name, value in check.figures.items()}

    @property
    def model_bytes(self) -> int:
        if self.model is None:
            return 0
        return sum(p.stat().st_size for p in self.model.folder.glob("*.safetensors"))

    def loaded_model(self) -> smoke.SmokeModel:
        """The model `model.load` resolved (a step that reads it needs `model.load`)."""
        if self.model is None:
            raise RuntimeError("a check that reads the model ran without model.load")
        return self.model


@dataclass(frozen=True)
class Step:
    """One check of the preflight: its name, the checks that must have passed for it to run
    (else it is `blocked` by the first that did not), and how it runs on the state."""

    name: str
    run: Callable[[PreflightState], PreflightCheck]
    needs: tuple[str, ...] = ()


def _load_model(state: PreflightState) -> PreflightCheck:
    """`model.load`: the model folder resolved (built, for the demo) and its revision."""

    def resolve_model() -> Measurement:
        state.model = _smoke_model(state.config, state.work)
        return Measurement(CheckStatus.PASSED, f"{state.model.folder} is {state.model.revision}")

    return timed(
        "model.load",
        "the model folder resolves and its revision derives",
        "download the snapshot into model.path and give its hub revision in model.revision",
        resolve_model,
    )


def _model_revision(state: PreflightState) -> PreflightCheck:
    declared = None if state.config.experiment.demo else state.config.experiment.model.revision
    return model_checks.model_revision_check(state.loaded_model().folder, declared)


def _smoke_generation(state: PreflightState) -> PreflightCheck:
    cap = state.settings.smoke_cap or min(state.config.experiment.generation.caps)
    check, made = smoke.generation_check(
        state.config, state.loaded_model(), state.work, state.settings.smoke_samples, cap
    )
    state.generations = list(made)
    return check


def _smoke_training(state: PreflightState) -> PreflightCheck:
    check, state.shards, state.checkpoint = smoke.training_check(
        state.config, state.loaded_model(), state.work
    )
    return check


def _smoke_export(state: PreflightState) -> PreflightCheck:
    if state.shards is None or state.checkpoint is None:
        raise RuntimeError("smoke.export ran without the smoke round's shards and checkpoint")
    return smoke.export_check(
        state.config, state.loaded_model(), state.shards, state.checkpoint, state.work
    )


MODEL = ("model.load",)
REPL = ("lean.pins", "lean.round_trip")
# Every check, in the order the report lists them.
STEPS: tuple[Step, ...] = (
    Step("config.placeholders", lambda s: env.placeholders_check(s.config)),
    Step("config.paths", lambda s: env.paths_check(s.config)),
    Step("model.load", _load_model),
    Step("model.files", lambda s: model_checks.model_files_check(s.loaded_model().folder), MODEL),
    Step("model.revision", _model_revision, MODEL),
    Step("lean.pins", lambda s: lean_checks.pins_check(s.config)),
    Step(
        "lean.round_trip",
        lambda s: lean_checks.round_trip_check(s.config, s.settings.round_trip_timeout_s, s.repl),
    ),
    Step("lean.import", lambda s: lean_checks.import_check(s.config, s.repl), REPL),
    Step("lean.self_test", lambda s: self_test_check(s.config, s.repl), REPL),
    Step("host.memory", lambda s: env.host_memory_check(s.config, s.repl)),
    Step("gpu.devices", lambda s: env.gpu_check(s.config)),
    Step(
        "prompt.golden", lambda s: model_checks.golden_prompt_check(s.loaded_model().folder), MODEL
    ),
    Step("prompt.context", lambda s: context_check(s.config, s.loaded_model().folder), MODEL),
    Step("smoke.generation", _smoke_generation, ("model.load", "model.files", "gpu.devices")),
    Step(
        "smoke.verification",
        lambda s: smoke.verification_check(s.config, s.generations),
        ("smoke.generation", "lean.self_test"),
    ),
    Step(
        "training.memory_plan",
        lambda s: smoke.memory_plan_check(s.config, s.loaded_model()),
        MODEL,
    ),
    Step("training.attention", lambda s: attention_check(s.config), ("gpu.devices",)),
    Step(
        "smoke.training",
        _smoke_training,
        ("training.memory_plan", "gpu.devices", "training.attention"),
    ),
    Step("smoke.export", _smoke_export, ("smoke.training",)),
    Step(
        "disk.free",
        lambda s: env.disk_check(s.config, s.settings.disk_margin, s.model_bytes),
    ),
    Step("round.balance", lambda s: balance_check(s.config, s.figures)),
)


def run_step(step: Step, state: PreflightState) -> PreflightCheck:
    """`step` on `state` when every check it needs passed, else `blocked` by the first that did
    not; a check that names itself otherwise than its step is a programming error."""
    failed = [name for name in step.needs if not state.passed(name)]
    if failed:
        return blocked(step.name, failed[0], "see its row", "see above")
    check = step.run(state)
    if check.name != step.name:
        raise RuntimeError(f"the step {step.name} made the check {check.name}")
    return check


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
    identity = identity or _identity(config)
    key = identity_key(identity)
    swept = sweep_work_folders(root, identity_key=key)
    work = root / owned_name(f"{WORK_PREFIX}-{key}-{time.strftime('%Y%m%dT%H%M%S')}")
    work.mkdir(parents=True, exist_ok=True)
    state = PreflightState(config, settings, work)
    for step in STEPS:
        check = run_step(step, state)
        state.done.append(check)
        progress(check)
    passed = all(c.ok for c in state.done)
    report = PreflightReport(
        identity=identity,
        config_source=config.source,
        checks=state.done,
        wall_s=round(time.monotonic() - started, 1),
        finished_at=now_utc(),
        simulated=config.experiment.demo is not None or config.lean.backend == "simulated",
        work_folder=None if passed else str(work),
        swept=[removed.describe() for removed in swept],
    )
    if passed:
        shutil.rmtree(work, ignore_errors=True)
    else:  # kept for inspection until the next preflight of this identity
        publish_text(work / KEPT_MARKER, report.model_dump_json(indent=2))
    return report, write_report(config, report)
