"""Dagster resources: thin wrappers that hold the run's settings as the domain's config models.

The settings live in one place (`prover_assets.config`); each resource's config schema is
derived from those models (`typed_config`), so the Launchpad shows every field with its default,
and the values are validated into the domain model once per run, when the resource is set up.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
from dagster._config.errors import DagsterEvaluationErrorReason, EvaluationError
from dagster._config.stack import EvaluationStackRoot
from dagster._core.storage.tags import PARTITION_NAME_TAG as PARTITION_TAG
from dagster._utils.error import SerializableErrorInfo
from pydantic import Field, PrivateAttr

from prover_assets.checks.gates import upstream_findings
from prover_assets.config import (
    LEAN_BACKENDS,
    ConfigError,
    EngineSettings,
    ExperimentSpec,
    LeanSettings,
    RunConfig,
    load_run_config,
    parse_engine_settings,
    parse_experiment_spec,
    parse_lean_settings,
    parse_run_config,
    require_backend_allowed,
    require_no_placeholders,
    resolve_path,
    same_shape,
)
from prover_assets.cpu_threads import CpuThreads
from prover_assets.cpu_threads import cpu_threads as threads_of_config
from prover_assets.generation.engines import EngineOpening, GenerationEngine
from prover_assets.generation.factory import open_engine
from prover_assets.iteration import OutputRef
from prover_assets.jobs import jobs_making, unmaterialized_message
from prover_assets.preflight.gate import (
    PREFLIGHT_JOB,
    preflight_required,
    require_passing_preflight,
)
from prover_assets.records import MANIFEST_NAME
from prover_assets.records.gates import refusal_message
from prover_assets.records.layout import folder_path
from prover_assets.records.manifest import mark_data_root
from prover_assets.records.outputs import verified_outputs
from prover_assets.records.owned import HOST, RUN_HOST_TAG
from prover_assets.resources.typed_config import dagster_config, placeholders_required
from prover_assets.verify.backends import backend_from_settings
from prover_assets.verify.cache import VERDICT_CACHE_DIR, VerdictCache
from prover_assets.verify.history import COST_HISTORY_DIR, CostHistory
from prover_assets.verify.self_test import self_test
from prover_assets.verify.stages import lean_workers_lease
from prover_assets.verify.verifier import StrictVerifier, VerifierPolicy

__all__ = [
    "EngineConfig",
    "ExperimentConfig",
    "ExperimentResource",
    "GpuResource",
    "LeanInstrumentError",
    "LeanResource",
    "build_resources",
    "launch_validation",
    "lean_config",
]


class LeanInstrumentError(RuntimeError):
    """The verifier failed its self-test: a broken instrument is never a judge of proofs."""


ExperimentConfig = dagster_config(ExperimentSpec)
EngineConfig = dagster_config(EngineSettings)
LocalLeanConfig = dagster_config(LEAN_BACKENDS["local"])
RemoteLeanConfig = dagster_config(LEAN_BACKENDS["remote"])
SimulatedLeanConfig = dagster_config(LEAN_BACKENDS["simulated"])


def lean_config(settings: LeanSettings) -> dg.Config:
    """The Lean resource's config holding `settings`."""
    return dagster_config(type(settings))(**settings.model_dump(mode="json"))


class ExperimentResource(dg.ConfigurableResource):
    """What the experiment is: `resources.experiment.config.spec` (an ExperimentSpec)."""

    spec: ExperimentConfig  # type: ignore[valid-type]
    source: str = ""  # the config file the spec was read from (hashed into the report's inputs)
    preflight_override: str = Field(
        default="",
        description="A reason to run a heavy job without a passing preflight for this config, "
        "pins and code: the run records it and the report prints it. Leave empty.",
    )
    gate_override: str = Field(
        default="",
        description="A reason to read upstream outputs although one of their blocking checks "
        "failed or never judged them (gates hold across runs): the run records it, the report "
        "prints it and no comparison it feeds is PRIMARY. Leave empty.",
    )
    _model: ExperimentSpec | None = PrivateAttr(default=None)
    # The run's instance (where every check's evaluations are) and log, for the gates.
    _instance: dg.DagsterInstance | None = PrivateAttr(default=None)
    _log: dg.DagsterLogManager | None = PrivateAttr(default=None)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        spec = self.model()  # a bad value fails the run here, before any step's work
        self._instance, self._log = context.instance, context.log
        run = context.run
        if run is not None and context.instance and run.tags.get(RUN_HOST_TAG) != HOST:
            # Its processes are this host's: the reaper of another host sharing the instance
            # must not judge them by pids of its own.
            context.instance.add_run_tags(run.run_id, {RUN_HOST_TAG: HOST})
        # A partitioned job has no launch-time ConfigMapping: its launch gate is applied here,
        # before any step; its run config is the file's (PartitionedConfig), so its sections are.
        partitioned = run is not None and PARTITION_TAG in run.tags
        if partitioned and preflight_required(run.job_name, self.preflight_override):
            from_file = load_run_config(self.source)
            require_passing_preflight(
                from_file.model_copy(update={"experiment": spec}), run.job_name
            )

    def model(self, built: ExperimentSpec | None = None) -> ExperimentSpec:
        """The validated spec (parsed once); with `built`, also checks it has the asset graph's
        shape."""
        if self._model is None:
            self._model = parse_experiment_spec(self.spec.model_dump())
        spec = self._model
        if built is not None:
            same_shape(spec, built)
        return spec

    def data_root(self) -> Path:
        """The config's data root, marked as one (`mark_data_root`): what the steps write under
        it names its files relative to their manifests, so the root can move."""
        path = resolve_path(self.model().data_root, "resources.experiment.config.spec.data_root")
        return mark_data_root(path.resolve())

    def asset_dir(self, key: dg.AssetKey, partition: str | None = None) -> Path:
        """The folder of `key` (of its iteration `partition`, for a per-iteration asset of a
        graph of several iterations): `prover_assets.records.layout.folder_path`."""
        folder = self.data_root().joinpath(*folder_path(tuple(key.path)))
        return folder if partition is None else folder / f"iteration-{partition}"

    def complete_file(self, key: dg.AssetKey, filename: str, partition: str | None = None) -> Path:
        """A file of an upstream asset whose step completed, re-hashed against that step's
        manifest (raises, naming the file, if the step did not complete or the file changed)."""
        folder = self._materialized_dir(key, partition)
        verified_outputs(folder, [filename])
        self._require_gates(folder)
        return folder / filename

    def complete_folder(self, key: dg.AssetKey, partition: str | None = None) -> Path:
        """An upstream asset's folder, every output file re-hashed against its manifest."""
        folder = self._materialized_dir(key, partition)
        verified_outputs(folder)
        self._require_gates(folder)
        return folder

    def resolve(self, ref: OutputRef) -> Path:
        """The output a rule of `prover_assets.iteration` names: its file (`complete_file`) or
        its folder (`complete_folder`)."""
        key = dg.AssetKey(list(ref.asset))
        if ref.file is None:
            return self.complete_folder(key, ref.partition)
        return self.complete_file(key, ref.file, ref.partition)

    def _materialized_dir(self, key: dg.AssetKey, partition: str | None) -> Path:
        """`key`'s folder, or the step fails saying which job makes it: a job launched before
        its upstream was materialized (the order of jobs is the user's to get right)."""
        folder = self.asset_dir(key, partition)
        if (folder / MANIFEST_NAME).is_file():
            return folder
        # The graph imports this module (its resources): built only on this path.
        from prover_assets.assets.graph import graph_assets
        from prover_assets.assets.keys import schedule_of

        spec = self.model()
        # The schedule decides pools and executors, never which job holds an asset.
        assets = graph_assets(spec, schedule_of("exclusive"))
        jobs = jobs_making(key, assets, iterations=spec.iterations > 1)
        message = unmaterialized_message(key, partition, str(folder), jobs)
        raise dg.Failure(description=message, allow_retries=False)

    def upstream_dir(self, key: dg.AssetKey, partition: str | None = None) -> Path:
        """An upstream asset's folder for a step that re-hashes its files itself: its gates
        are required here when it is complete (an incomplete one the step refuses by name)."""
        folder = self.asset_dir(key, partition)
        if (folder / MANIFEST_NAME).is_file():
            self._require_gates(folder)
        return folder

    def _require_gates(self, folder: Path) -> None:
        """Refuse an output that, or one it was made from, failed a blocking check or was never
        judged by one, in this run or any earlier (unless `gate_override` gives a reason).
        The checks' evaluations are the run's instance's: a step may read from any thread."""
        # The graph's checks import this module (their resources): built when first asked.
        from prover_assets.checks.graph import blocking_checks_by_asset

        if self._instance is None or self._log is None:
            raise RuntimeError(
                "gates are asked of the run's Dagster instance: read upstream outputs through "
                "the experiment resource of a run (or through the domain's readers)"
            )
        blocking = blocking_checks_by_asset(self.model())
        findings = upstream_findings(self._instance, blocking, self.data_root(), folder)
        if not findings:
            return
        if self.gate_override:
            self._log.warning(
                f"gate_override ({self.gate_override}): reading {folder} although "
                + "; ".join(f.describe() for f in findings)
            )
            return
        # The same outputs give the same refusal: a retry would only hide it behind a stall.
        raise dg.Failure(description=refusal_message(folder, findings), allow_retries=False)


class LeanResource(dg.ConfigurableResource):
    """The Lean verifier: `resources.lean.config.settings` (LeanSettings).

    Every use starts the backend, reads its pins, and runs the self-test (a known-good proof
    must be accepted, a known-bad one rejected); it refuses to verify otherwise.
    """

    settings: LocalLeanConfig | RemoteLeanConfig | SimulatedLeanConfig = Field(  # type: ignore[valid-type]
        discriminator="backend"
    )
    _model: LeanSettings | None = PrivateAttr(default=None)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        self.model()

    def model(self) -> LeanSettings:
        """The validated settings, parsed once."""
        if self._model is None:
            self._model = parse_lean_settings(self.settings.model_dump())
        return self._model

    @contextlib.contextmanager
    def open_verifier(
        self,
        experiment: ExperimentSpec,
        *,
        feedback: bool,
    ) -> Iterator[StrictVerifier]:
        """A verifier on this backend (no REPL starts until the first proof). REPLs on this
        machine are leased: one pool at a time per data root, waiting for the holder."""
        settings = self.model()
        try:
            require_backend_allowed(experiment.kind, settings.backend)
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc
        policy = VerifierPolicy(
            budget_s=settings.budget_s,
            feedback=feedback,
            recheck_timeouts=settings.recheck_timeouts,
            recheck_share=settings.recheck_share,
        )
        data_root = resolve_path(experiment.data_root, "resources.experiment.config.spec.data_root")
        cache = VerdictCache(data_root / VERDICT_CACHE_DIR) if settings.verdict_cache else None
        with contextlib.ExitStack() as held:
            if settings.backend != "remote":  # a server sizes its own workers
                held.enter_context(lean_workers_lease(data_root))
            backend = held.enter_context(backend_from_settings(settings, data_root))
            history = CostHistory.open(data_root / COST_HISTORY_DIR)
            held.callback(history.close)
            yield StrictVerifier(backend, policy, cache, history)

    def require_self_test(self, verifier: StrictVerifier, header: str) -> None:
        """Refuse to verify with a broken instrument: a known-good proof must be accepted and a
        known-bad one rejected, under `header` (the batch's, which the workers warm with)."""
        outcome = self_test(verifier.backend, verifier.policy.budget_s, header)
        if not outcome.passed:
            raise LeanInstrumentError(
                f"the verifier failed its self-test ({outcome.description}); it refuses to "
                f"start so that a broken instrument is never mistaken for bad proofs: "
                f"{outcome.metadata}"
            )


class GpuResource(dg.ConfigurableResource):
    """How samples are generated: `resources.gpu.config.settings` (EngineSettings)."""

    settings: EngineConfig  # type: ignore[valid-type]
    _model: EngineSettings | None = PrivateAttr(default=None)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        self.model()

    def model(self) -> EngineSettings:
        """The validated settings, parsed once."""
        if self._model is None:
            self._model = parse_engine_settings(self.settings.model_dump())
        return self._model

    def open_engine(self, opening: EngineOpening) -> GenerationEngine:
        """The configured engine for one step (a context manager: closed when the step ends)."""
        return open_engine(self.model(), opening)

    def cpu_threads(self, lean: LeanResource | None) -> CpuThreads:
        """torch's threads on the CPU for a step of this config (`prover_assets/cpu_threads.py`);
        `lean` None for a step of the exclusive schedule, which never runs beside Lean."""
        return threads_of_config(self.model(), None if lean is None else lean.model())


def build_resources(config: RunConfig) -> dict[str, dg.ConfigurableResource]:
    """The three resources holding `config` (their values are the Launchpad's defaults)."""
    return {
        "experiment": ExperimentResource(
            spec=ExperimentConfig(**config.experiment.model_dump(mode="json")),
            source=config.source,
        ),
        "lean": LeanResource(settings=lean_config(config.lean)),
        "gpu": GpuResource(settings=EngineConfig(**config.gpu.model_dump(mode="json"))),
    }


def invalid_config(job: str, exc: ConfigError, run_config: dict) -> dg.DagsterInvalidConfigError:
    """`exc` as Dagster's own config error: the Launchpad and `dagster job launch` show its
    message as the run config's error (as for a value of the wrong type), not as an unexpected
    error of user code with a stack trace."""
    message = str(exc)
    error = EvaluationError(
        stack=EvaluationStackRoot(),
        reason=DagsterEvaluationErrorReason.FAILED_POST_PROCESSING,
        message=message,
        error_data=SerializableErrorInfo(message=message, stack=[], cls_name=type(exc).__name__),
    )
    return dg.DagsterInvalidConfigError(f"Error in config for job {job}", [error], run_config)


def launch_validation(resources: dict[str, dg.ConfigurableResource], job: str) -> dg.ConfigMapping:
    """`job`'s run config, checked whole when a run is created (the Launchpad's launch and
    `dagster job launch` alike): every placeholder left and every invalid value is the launch
    error, at once, before any step starts; a heavy job also needs a passing preflight for this
    config, pins and code (or `preflight_override`). The preflight job itself takes
    placeholders: it names them as its first failed check. The schema is the resources' own,
    with defaults; every job but the preflight has each placeholder as a required value without
    a default (`placeholders_required`), which the Launchpad marks as missing before launch."""

    def config_of(resource: dg.ConfigurableResource) -> dg.Field:
        field = resource.get_resource_definition().config_schema.as_field()
        return field if job == PREFLIGHT_JOB else placeholders_required(field)

    schema = {
        "resources": dg.Field(
            {
                name: dg.Field({"config": config_of(resource)})
                for name, resource in resources.items()
            }
        )
    }

    def validated(run_config: dict) -> dict:
        try:
            if job != PREFLIGHT_JOB:
                require_no_placeholders(run_config, "this run's config")
            config = parse_run_config(run_config, "this run's config")
            experiment = run_config["resources"]["experiment"]["config"]
            if preflight_required(job, experiment.get("preflight_override")):
                require_passing_preflight(config, job)
        except ConfigError as exc:
            raise invalid_config(job, exc, run_config) from None
        return run_config

    return dg.ConfigMapping(config_fn=validated, config_schema=schema)
