"""Which preflight vouches for a run: its identity (config, pins, code), where its report is
kept, and the refusal of a heavy run that has none.

A report is kept under `<data_root>/preflight/<identity sha256>/preflight.json`, written
atomically once the preflight ends, passed or failed. A heavy job's launch reads the one for
its own identity: passed, it launches; failed or missing, it is refused with the failed checks
or the nearest identity that passed and how it differs.
"""

from __future__ import annotations

from pathlib import Path

from prover_assets import job_names
from prover_assets.config import PLACE_FIELDS, ConfigError, RunConfig, resolve_path
from prover_assets.preflight.model import PreflightIdentity, PreflightReport
from prover_assets.records import git_revision, publish_text, sha256_text
from prover_assets.verify.backends import settings_pins

__all__ = [
    "HEAVY_JOBS",
    "PREFLIGHT_DIR",
    "PREFLIGHT_FILE",
    "PREFLIGHT_JOB",
    "PreflightMissing",
    "passing_report",
    "preflight_figures",
    "preflight_identity",
    "preflight_required",
    "read_report",
    "report_path",
    "require_passing_preflight",
    "write_report",
]

PREFLIGHT_DIR = "preflight"
PREFLIGHT_FILE = "preflight.json"
PREFLIGHT_JOB = job_names.PREFLIGHT
HEAVY_JOBS = job_names.HEAVY  # each refuses to launch without a passing preflight


class PreflightMissing(ConfigError):
    """A heavy run launched with no passing preflight for its config, pins and code."""


def config_sha256(config: RunConfig) -> str:
    """The sha256 of the run config's three sections (not the file's name or comments), less
    where the data root is: the preflight's record lives in it and moves with it."""
    return sha256_text(
        config.model_dump_json(
            include={"experiment", "lean", "gpu"}, exclude={"experiment": set(PLACE_FIELDS)}
        )
    )


def preflight_identity(
    config: RunConfig, *, pins_unreadable: str | None = None
) -> PreflightIdentity:
    """This run's identity: its config's hash, its verifier's pins (read from the workspace), the
    code's revision. Raises `PinError` when the workspace's pins are not the expected ones,
    unless `pins_unreadable` says why (then it stands in for them)."""
    revision = git_revision()
    pins = (
        {"unreadable": pins_unreadable}
        if pins_unreadable is not None
        else settings_pins(config.lean).model_dump()
    )
    return PreflightIdentity(
        config_sha256=config_sha256(config),
        pins=pins,
        code_commit=revision.commit,
        code_dirty=revision.dirty,
    )


def _root(config: RunConfig) -> Path:
    data_root = resolve_path(
        config.experiment.data_root, "resources.experiment.config.spec.data_root"
    )
    return data_root.resolve() / PREFLIGHT_DIR


def report_path(config: RunConfig, identity: PreflightIdentity) -> Path:
    """Where the report of the preflight with this `identity` is kept: one file per identity
    (its sha256) in the data root's preflight folder."""
    digest = sha256_text(identity.model_dump_json())
    return _root(config) / digest / PREFLIGHT_FILE


def write_report(config: RunConfig, report: PreflightReport) -> Path:
    """Keep `report` (atomically) where `report_path` names it; its path."""
    path = report_path(config, report.identity)
    path.parent.mkdir(parents=True, exist_ok=True)
    publish_text(path, report.model_dump_json() + "\n")
    return path


def _reports(config: RunConfig) -> list[tuple[Path, PreflightReport]]:
    root = _root(config)
    if not root.is_dir():
        return []
    found = [(path, read_report(path)) for path in root.glob(f"*/{PREFLIGHT_FILE}")]
    return sorted(found, key=lambda item: item[1].finished_at)


def read_report(path: Path) -> PreflightReport:
    """The preflight report kept at `path`; raises naming the file if it is not one."""
    try:
        return PreflightReport.model_validate_json(path.read_bytes())
    except ValueError as exc:
        raise ConfigError(f"{path}: not a preflight report ({exc}); move it aside") from exc


def passing_report(config: RunConfig) -> PreflightReport | None:
    """The passing report of this run's identity (the one heavy jobs accept), or None: none
    ran, it failed, or the pins cannot vouch for the verifier."""
    try:
        return require_passing_preflight(config, PREFLIGHT_JOB)
    except PreflightMissing:
        return None


def preflight_figures(config: RunConfig) -> dict[str, float]:
    """The figures of the passing preflight of this run's identity (its config, pins and code:
    its smoke round's rates), for the ETA; none where no such preflight passed (priors stand
    in), never another config's or code's."""
    report = passing_report(config)
    return report.figures() if report is not None else {}


def preflight_required(job: str, override: str | None) -> bool:
    """The launch gate's rule, the one every launch path applies: a heavy job needs a passing
    preflight for its config, pins and code (`require_passing_preflight`) unless the run gives
    `preflight_override`, its reason (recorded by the run, printed by the report); any other
    job needs none."""
    return job in HEAVY_JOBS and not override


def require_passing_preflight(config: RunConfig, job: str) -> PreflightReport:
    """The passing report for this run's identity, or `PreflightMissing` saying what failed, or
    which passing preflight comes nearest and how it differs."""
    try:
        identity = preflight_identity(config)
    except ValueError as exc:  # PinError: the workspace is not the registered verifier
        raise PreflightMissing(
            f"job {job!r} refused: the verifier's pins cannot vouch for it: {exc}"
        ) from exc
    path = report_path(config, identity)
    how = (
        "run the preflight first (`make preflight CONFIG=<this config>`, or launch the "
        "`preflight` job), or, to run without one, set "
        "resources.experiment.config.preflight_override to your reason (the run records it and "
        "the report prints it)"
    )
    if path.exists():
        report = read_report(path)
        if report.passed:
            return report
        failed = ", ".join(f"{c.name} ({c.measured})" for c in report.failed())
        raise PreflightMissing(
            f"job {job!r} refused: the preflight of {report.finished_at} for this config, pins "
            f"and code FAILED: {failed}. Fix what it names, then {how}. Its report: {path}"
        )
    passed = [(p, r) for p, r in _reports(config) if r.passed]
    nearest = ""
    if passed:
        last_path, last = passed[-1]
        nearest = (
            f" The last passing preflight ({last.finished_at}, {last_path}) was for another "
            f"{'; '.join(identity.differences(last.identity))}."
        )
    raise PreflightMissing(
        f"job {job!r} refused: no preflight has run for this config (sha256 "
        f"{identity.config_sha256[:12]}...), these pins and code {identity.code_commit}"
        f"{' with uncommitted changes' if identity.code_dirty else ''}.{nearest} To launch it, {how}."
    )
