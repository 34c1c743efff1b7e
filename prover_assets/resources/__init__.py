"""Dagster resources: thin wrappers that validate their settings into the domain's config models.

The settings live in one place (`prover_assets.config`); each resource takes them as one
permissive mapping from the run config and validates it strictly on use.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import dagster as dg

from prover_assets.config import (
    ConfigError,
    EngineSettings,
    ExperimentSpec,
    LeanSettings,
    parse_engine_settings,
    parse_experiment_spec,
    parse_lean_settings,
    resolve_path,
    same_shape,
)
from prover_assets.generation.engines import GenerationEngine, SamplingSettings
from prover_assets.records.outputs import verified_outputs
from prover_assets.verify.backends import backend_from_settings, self_test
from prover_assets.verify.verifier import StrictVerifier, VerifierPolicy

__all__ = ["ExperimentResource", "GpuResource", "LeanInstrumentError", "LeanResource"]


class LeanInstrumentError(RuntimeError):
    """The verifier failed its self-test: a broken instrument is never a judge of proofs."""


class ExperimentResource(dg.ConfigurableResource):
    """What the experiment is: `resources.experiment.config.spec` (an ExperimentSpec)."""

    spec: dict
    source: str = ""  # the config file the spec was read from (hashed into the report's inputs)

    def model(self, built: ExperimentSpec | None = None) -> ExperimentSpec:
        """The validated spec; with `built`, also checks it has the asset graph's shape."""
        spec = parse_experiment_spec(self.spec)
        if built is not None:
            same_shape(spec, built)
        return spec

    def data_root(self) -> Path:
        path = resolve_path(self.model().data_root, "resources.experiment.config.spec.data_root")
        return path.resolve()

    def asset_dir(self, key: dg.AssetKey) -> Path:
        return self.data_root().joinpath(*key.path)

    def complete_file(self, key: dg.AssetKey, filename: str) -> Path:
        """A file of an upstream asset whose step completed, re-hashed against that step's
        manifest (raises, naming the file, if the step did not complete or the file changed)."""
        folder = self.asset_dir(key)
        verified_outputs(folder, [filename])
        return folder / filename

    def complete_folder(self, key: dg.AssetKey) -> Path:
        """An upstream asset's folder, every output file re-hashed against its manifest."""
        folder = self.asset_dir(key)
        verified_outputs(folder)
        return folder


class LeanResource(dg.ConfigurableResource):
    """The Lean verifier: `resources.lean.config.settings` (LeanSettings).

    Every use starts the backend, reads its pins, and runs the self-test (a known-good proof
    must be accepted, a known-bad one rejected); it refuses to verify otherwise.
    """

    settings: dict

    def model(self) -> LeanSettings:
        return parse_lean_settings(self.settings)

    @contextlib.contextmanager
    def open_verifier(
        self, experiment: ExperimentSpec, *, feedback: bool, scratch: Path
    ) -> Iterator[StrictVerifier]:
        """A verifier on this backend (no REPL starts until the first proof)."""
        settings = self.model()
        if settings.backend == "simulated" and experiment.kind != "demo":
            raise ConfigError("the simulated Lean backend is for the demo only")
        with backend_from_settings(settings, scratch=scratch) as backend:
            yield StrictVerifier(
                backend, VerifierPolicy(budget_s=settings.budget_s, feedback=feedback)
            )

    def require_self_test(self, verifier: StrictVerifier) -> None:
        """Refuse to verify with a broken instrument: a known-good proof must be accepted and a
        known-bad one rejected."""
        outcome = self_test(verifier.backend, verifier.policy.budget_s)
        if not outcome.passed:
            raise LeanInstrumentError(
                f"the verifier failed its self-test ({outcome.description}); it refuses to "
                f"start so that a broken instrument is never mistaken for bad proofs: "
                f"{outcome.metadata}"
            )


class GpuResource(dg.ConfigurableResource):
    """How samples are generated: `resources.gpu.config.settings` (EngineSettings)."""

    settings: dict

    def model(self) -> EngineSettings:
        return parse_engine_settings(self.settings)

    @contextlib.contextmanager
    def open_engine(
        self,
        model_path: Path,
        sampling: SamplingSettings,
        *,
        max_model_len: int,
        seed: int,
        workdir: Path,
        commit_every: int,
    ) -> Iterator[GenerationEngine]:
        settings = self.model()
        if settings.engine == "transformers":
            from prover_assets.generation.engines import TransformersEngine

            engine: GenerationEngine = TransformersEngine(
                model_path, sampling, device=settings.device, dtype=settings.dtype
            )
        else:
            from prover_assets.generation.engines import VllmEngine, VllmSpec

            engine = VllmEngine(
                VllmSpec(
                    model_path=str(model_path),
                    tensor_parallel_size=settings.tensor_parallel_size,
                    pipeline_parallel_size=settings.pipeline_parallel_size,
                    max_model_len=max_model_len,
                    gpu_memory_utilization=settings.gpu_memory_utilization,
                    max_num_seqs=settings.max_num_seqs,
                    dtype=settings.dtype,
                    seed=seed,
                    enforce_eager=settings.enforce_eager,
                    temperature=sampling.temperature,
                    top_p=sampling.top_p,
                    top_k=sampling.top_k,
                    chunk=commit_every,
                ),
                workdir=workdir,
            )
        with engine:
            yield engine
