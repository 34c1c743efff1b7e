"""The preflight as one call: every check in order, the report, kept where heavy jobs look."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from prover_assets.config import RemoteLeanSettings, RunConfig, resolve_path
from prover_assets.generation.revision import model_revision
from prover_assets.generation.stages import hub_model
from prover_assets.lean.protocol import GOEDEL_HEADER
from prover_assets.preflight import environment as env
from prover_assets.preflight import smoke
from prover_assets.preflight.attention import attention_check
from prover_assets.preflight.balance import balance_check
from prover_assets.preflight.context import context_check
from prover_assets.preflight.gate import PREFLIGHT_DIR, preflight_identity, write_report
from prover_assets.preflight.model import (
    CheckStatus,
    PreflightCheck,
    PreflightIdentity,
    PreflightReport,
)
from prover_assets.records import now_utc, publish_text
from prover_assets.records.hashing import sha256_text
from prover_assets.records.owned import Removed, owned_name, remove_dead_owners
from prover_assets.verify.backends import SELF_TEST_JOBS, backend_from_settings, self_test
from prover_assets.verify.sizing import sized_workers

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


def self_test_check(config: RunConfig, measured: env.ReplMeasure) -> PreflightCheck:
    """The self-test on one worker; its seconds per proof (past the header import the round
    measured before) give the ETA's verification rate at the configured workers."""
    lean = config.lean
    one = (
        lean
        if isinstance(lean, RemoteLeanSettings)
        else lean.model_copy(update={"workers": 1, "warm_spare": False})
    )

    def measure() -> tuple[CheckStatus, str, dict[str, float]]:
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
        return status, text, figures

    return env.timed(
        "lean.self_test",
        "known-good accepted, known-bad rejected, the preamble and statement-check pairs held",
        "the verifier misjudges known proofs: rebuild the workspace at the pins "
        "(`make lean-workspace`) and run it again",
        measure,
    )


class _Checks:
    """The checks run so far, in order; each is told to `progress` as it is added."""

    def __init__(self, progress: Progress) -> None:
        self.done: list[PreflightCheck] = []
        self._progress = progress

    def add(self, check: PreflightCheck) -> None:
        self.done.append(check)
        self._progress(check)

    def ok(self, *names: str) -> bool:
        return all(next(c for c in self.done if c.name == name).ok for name in names)

    def first_failed(self, *names: str) -> str:
        return next(name for name in names if not self.ok(name))

    def add_if(self, needs: tuple[str, ...], run: Callable[[], PreflightCheck], name: str) -> None:
        """`run()` when every check `needs` passed, else `name` blocked by the first that did
        not."""
        if self.ok(*needs):
            self.add(run())
        else:
            self.add(env.blocked(name, self.first_failed(*needs), "see its row", "see above"))


def _model_checks(config: RunConfig, checks: _Checks, work: Path) -> smoke.SmokeModel | None:
    """The model folder resolved (built, for the demo), its files and its revision."""
    resolved: list[smoke.SmokeModel] = []

    def resolve_model() -> tuple[CheckStatus, str, dict[str, float]]:
        resolved.append(_smoke_model(config, work))
        return CheckStatus.PASSED, f"{resolved[0].folder} is {resolved[0].revision}", {}

    checks.add(
        env.timed(
            "model.load",
            "the model folder resolves and its revision derives",
            "download the snapshot into model.path and give its hub revision in model.revision",
            resolve_model,
        )
    )
    model = resolved[0] if resolved else None
    declared = None if config.experiment.demo else config.experiment.model.revision
    if model is None:
        checks.add(env.blocked("model.files", "model.load", "see its row", "see above"))
        checks.add(env.blocked("model.revision", "model.load", "see its row", "see above"))
    else:
        checks.add(env.model_files_check(model.folder))
        checks.add(env.model_revision_check(model.folder, declared))
    return model


def _lean_checks(config: RunConfig, checks: _Checks, settings: PreflightSettings) -> None:
    """The pins, one round trip, one import, the self-test, and the host memory they need."""
    measured = env.ReplMeasure()
    checks.add(env.pins_check(config))
    checks.add(env.round_trip_check(config, settings.round_trip_timeout_s, measured))
    repl = ("lean.pins", "lean.round_trip")
    checks.add_if(repl, lambda: env.import_check(config, measured), "lean.import")
    checks.add_if(repl, lambda: self_test_check(config, measured), "lean.self_test")
    checks.add(env.host_memory_check(config, measured))


def _smoke_checks(
    config: RunConfig,
    checks: _Checks,
    settings: PreflightSettings,
    model: smoke.SmokeModel | None,
    work: Path,
) -> None:
    """The smoke round: samples, their verdicts, the memory plan, two steps, the export."""
    generations: list = []
    shards: list[Path] = []

    def generate() -> PreflightCheck:
        assert model is not None
        cap = settings.smoke_cap or min(config.experiment.generation.caps)
        check, made = smoke.generation_check(config, model, work, settings.smoke_samples, cap)
        generations.extend(made)
        return check

    def train() -> PreflightCheck:
        assert model is not None
        check, shards_dir, checkpoint = smoke.training_check(config, model, work)
        shards.extend(p for p in (shards_dir, checkpoint) if p is not None)
        return check

    loaded = ("model.load", "model.files", "gpu.devices")
    checks.add_if(loaded, generate, "smoke.generation")
    checks.add_if(
        ("smoke.generation", "lean.self_test"),
        lambda: smoke.verification_check(config, generations),
        "smoke.verification",
    )
    checks.add_if(
        ("model.load",), lambda: smoke.memory_plan_check(config, model), "training.memory_plan"
    )
    checks.add_if(("gpu.devices",), lambda: attention_check(config), "training.attention")
    checks.add_if(
        ("training.memory_plan", "gpu.devices", "training.attention"), train, "smoke.training"
    )
    checks.add_if(
        ("smoke.training",),
        lambda: smoke.export_check(config, model, shards[0], shards[1], work),
        "smoke.export",
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
    identity = identity or _identity(config)
    key = identity_key(identity)
    swept = sweep_work_folders(root, identity_key=key)
    work = root / owned_name(f"{WORK_PREFIX}-{key}-{time.strftime('%Y%m%dT%H%M%S')}")
    work.mkdir(parents=True, exist_ok=True)
    checks = _Checks(progress)
    checks.add(env.placeholders_check(config))
    checks.add(env.paths_check(config))
    model = _model_checks(config, checks, work)
    _lean_checks(config, checks, settings)
    checks.add(env.gpu_check(config))
    checks.add_if(("model.load",), lambda: env.golden_prompt_check(model.folder), "prompt.golden")
    checks.add_if(("model.load",), lambda: context_check(config, model.folder), "prompt.context")
    _smoke_checks(config, checks, settings, model, work)
    model_bytes = sum(p.stat().st_size for p in model.folder.glob("*.safetensors")) if model else 0
    checks.add(env.disk_check(config, settings.disk_margin, model_bytes))
    figures = {name: value for check in checks.done for name, value in check.figures.items()}
    checks.add(balance_check(config, figures))
    passed = all(c.ok for c in checks.done)
    report = PreflightReport(
        identity=identity,
        config_source=config.source,
        checks=checks.done,
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
