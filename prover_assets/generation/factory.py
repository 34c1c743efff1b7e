"""The engine a step samples with: the one the `gpu` settings name, opened for one model.

Its own module, above the engines: `engines.py` holds what every engine shares, each engine
module imports it, and only this one knows them all (no engine imports the factory back).
"""

from __future__ import annotations

from prover_assets.config import EngineSettings
from prover_assets.generation.engines import EngineOpening, GenerationEngine, TransformersEngine

__all__ = ["open_engine"]


def open_engine(settings: EngineSettings, opening: EngineOpening) -> GenerationEngine:
    """The engine `settings` name, opened as `opening` asks (a context manager: closed when
    the step ends)."""
    if settings.engine == "transformers":
        return TransformersEngine(
            opening.model_path,
            opening.sampling,
            device=settings.device,
            dtype=settings.dtype,
            cpu_threads=opening.cpu_threads,
        )
    if settings.engine == "openai":
        from prover_assets.generation.openai_engine import OpenAICompletionsEngine

        assert settings.served_model is not None  # the settings' validator requires it
        return OpenAICompletionsEngine(
            settings.urls,
            settings.served_model,
            opening.sampling,
            model_root=str(opening.model_path),
            requests_per_replica=settings.requests_per_replica,
            retries=settings.http_retries,
        )
    from prover_assets.generation.vllm_child import VllmSpec
    from prover_assets.generation.vllm_engine import VllmEngine

    spec = VllmSpec(
        model_path=str(opening.model_path),
        model_rev=opening.model_rev,
        tensor_parallel_size=settings.tensor_parallel_size,
        pipeline_parallel_size=settings.pipeline_parallel_size,
        max_model_len=opening.max_model_len,
        gpu_memory_utilization=settings.gpu_memory_utilization,
        max_num_seqs=settings.max_num_seqs,
        dtype=settings.dtype,
        seed=opening.seed,
        enforce_eager=settings.enforce_eager,
        sampling=opening.sampling,
        chunk=opening.commit_every,
    )
    return VllmEngine(
        spec, workdir=opening.workdir, gpus=settings.gpus, batch_invariant=settings.batch_invariant
    )
