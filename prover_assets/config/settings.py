"""How the experiment runs on this machine: the Lean verifier's settings, one model per backend
(the `lean` resource), and the generation engines' (the `gpu` resource)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from prover_assets.config.base import PositiveInt, Probability, StrictSpec


class _LeanCommon(StrictSpec):
    workers: PositiveInt = 8
    budget_s: Annotated[float, Field(gt=0)] = 180.0
    infrastructure_retries: Annotated[int, Field(ge=0)] = 2
    commit_every: PositiveInt = 64  # verdicts per commit chunk
    # A verdict file with a larger share of `infrastructure` verdicts fails its validity check.
    max_infrastructure_share: Annotated[float, Field(ge=0, le=1)] = 0.01
    # Reuse final verdicts of this verifier (same pins and config) across assets, rounds and
    # runs, from `<data_root>/verdict_cache/` (verify/cache.py).
    verdict_cache: bool = True
    # Run every `timeout` once more after its batch, on at most this share of the workers.
    recheck_timeouts: bool = True
    recheck_share: Annotated[float, Field(gt=0, le=1)] = 0.5


class _ReplPoolSettings(_LeanCommon):
    """A pool of REPL processes on this machine (the local backend and the simulation)."""

    header_timeout_s: Annotated[float, Field(gt=0)] = 600.0
    # `#print axioms` and the statement check after a proof compiled, as a share of budget_s:
    # a hang there is infrastructure, never the proof's timeout.
    check_timeout_factor: Annotated[float, Field(gt=0)] = 0.5
    memory_cap_mb: PositiveInt = 12288  # RLIMIT_AS of each REPL process
    # anonymous memory (the REPL's own, not the mapped .olean files) after which a worker recycles
    memory_ceiling_mb: PositiveInt = 8192
    recycle_after: PositiveInt = 1000  # commands after which a worker is recycled
    # Contain each REPL: bubblewrap where it runs, else no network alone (`lean/repl.py`).
    sandbox: bool = True
    # One more REPL kept started with the header imported, taken by the next worker to restart
    # (after a timeout, a fault or a recycle): no import on the restart path.
    warm_spare: bool = True

    @property
    def check_timeout_s(self) -> float:
        return self.check_timeout_factor * self.budget_s


class LocalLeanSettings(_ReplPoolSettings):
    """Real Lean: REPL processes in a Lean + Mathlib workspace (`lake exe repl`, started as the
    built binary with `lake env`'s environment: `lean/launch.py`)."""

    backend: Literal["local"] = "local"
    # In place of `workers` (which it overrides): as many workers as the host's cores and
    # memory hold (`verify/sizing.py`), after what the engines and the run need beside them.
    auto_workers: bool = False
    host_reserve_cores: Annotated[int, Field(ge=0)] = 2
    host_reserve_mb: Annotated[int, Field(ge=0)] = 8192
    workspace: str  # the Lean + Mathlib workspace
    command: Annotated[list[str], Field(min_length=1)] = ["lake", "exe", "repl"]
    expected_pins: dict[str, str] = {}  # e.g. lean_version, mathlib_rev, repl_rev prefixes


REMOTE_PINS = ("lean_version", "mathlib_rev", "repl_rev")


class RemoteLeanSettings(_LeanCommon):
    """Real Lean behind a Kimina Lean Server, whose pins are declared (it cannot be asked)."""

    backend: Literal["remote"] = "remote"
    url: str
    position_base: Literal["snippet", "body"] = "snippet"
    expected_pins: dict[str, str]

    @model_validator(mode="after")
    def _pins_declared(self) -> RemoteLeanSettings:
        if missing := sorted(set(REMOTE_PINS) - set(self.expected_pins)):
            raise ValueError(f"a remote backend needs declared expected_pins; missing {missing}")
        return self


class SimulatedLeanSettings(_ReplPoolSettings):
    """The demo's REPL simulator: every verdict labelled simulated; only a demo may use it.

    `rule` is the simulator's (prover_assets/verify/simulator.py): `planted_tactic` accepts a proof
    by its last tactic, an effect a model can learn (the positive control); `seeded_theorems`
    accepts a share `accept_share` of the theorems whatever their proofs (the null control);
    `seeded_share` accepts that share of proofs by a hash of their code."""

    backend: Literal["simulated"] = "simulated"
    rule: Literal["planted_tactic", "seeded_theorems", "seeded_share"]
    accept_share: Probability | None = None
    seed: int

    @model_validator(mode="after")
    def _share_with_its_rule(self) -> SimulatedLeanSettings:
        if (self.rule != "planted_tactic") != (self.accept_share is not None):
            raise ValueError(
                "accept_share is required by rules seeded_theorems and seeded_share and "
                f"meaningless for planted_tactic (rule {self.rule}, accept_share "
                f"{self.accept_share})"
            )
        return self


LeanSettings = Annotated[
    LocalLeanSettings | RemoteLeanSettings | SimulatedLeanSettings,
    Field(discriminator="backend"),
]
LEAN_BACKENDS: dict[str, type[_LeanCommon]] = {
    "local": LocalLeanSettings,
    "remote": RemoteLeanSettings,
    "simulated": SimulatedLeanSettings,
}


def lean_from_selector(data: Any) -> Any:
    """`{backend_name: {...}}` (the run config's shape: one key, the backend) as the flat
    mapping the settings model reads; anything else is returned for validation to judge."""
    if isinstance(data, dict) and len(data) == 1 and next(iter(data)) in LEAN_BACKENDS:
        ((backend, body),) = data.items()
        if isinstance(body, dict):
            return {**body, "backend": backend}
    return data


class EngineSettings(StrictSpec):
    """How samples are generated (the `gpu` resource)."""

    engine: Literal["vllm", "transformers", "openai"]
    # overlapped: the GPU and the Lean workers work at once (pools `gpu` and `lean`, steps run
    # concurrently, a generation step verifies its committed samples as they land); exclusive:
    # one `heavy` pool for both, strictly in turn, for a machine whose memory cannot hold vLLM
    # and the Lean workers together.
    schedule: Literal["overlapped", "exclusive"] = "exclusive"
    device: Literal["cuda", "cpu"] = "cuda"
    dtype: Literal["bfloat16", "float16", "float32"] = "bfloat16"
    tensor_parallel_size: PositiveInt = 1
    pipeline_parallel_size: PositiveInt = 1
    gpu_memory_utilization: Probability = 0.9
    max_num_seqs: PositiveInt = 256
    enforce_eager: bool = False
    # engine vllm: the GPUs generation uses, one engine child per tensor_parallel_size x
    # pipeline_parallel_size of them; batch_invariant sets VLLM_BATCH_INVARIANT=1, so a sample's
    # tokens do not depend on what else shares its batch (vLLM's kernels, on compute
    # capability 8.0 and above, at some speed).
    gpus: list[Annotated[int, Field(ge=0)]] = [0]
    batch_invariant: bool = False
    # engine openai: `vllm serve` replicas (base URLs), the model name they serve, requests in
    # flight per replica, and attempts after a failed one (with backoff, on another replica).
    urls: list[str] = []
    served_model: str | None = None
    requests_per_replica: PositiveInt = 64
    http_retries: Annotated[int, Field(ge=0)] = 3
    # torch's threads on the CPU in every process the project starts (the CPU engine, the demo's
    # format tuning, the trainer, the export's merge); None: $OMP_NUM_THREADS, else the cores
    # less the Lean workers beside and one (prover_assets/cpu_threads.py).
    cpu_threads: PositiveInt | None = None

    @property
    def engines(self) -> int:
        """The generation engines that sample at once: a vLLM child per slice of GPUs, a
        replica per URL, one transformers model."""
        if self.engine == "vllm":
            return len(self.gpus) // (self.tensor_parallel_size * self.pipeline_parallel_size)
        return len(self.urls) if self.engine == "openai" else 1

    @model_validator(mode="after")
    def _gpus_split_into_engines(self) -> EngineSettings:
        per_engine = self.tensor_parallel_size * self.pipeline_parallel_size
        if len(set(self.gpus)) != len(self.gpus):
            raise ValueError(f"gpus {self.gpus} names a GPU twice")
        if not self.gpus or len(self.gpus) % per_engine:
            raise ValueError(
                f"gpus {self.gpus} do not split into engines of {per_engine} GPUs "
                "(tensor_parallel_size x pipeline_parallel_size): give a multiple of it"
            )
        return self

    @model_validator(mode="after")
    def _replicas_named(self) -> EngineSettings:
        if self.engine == "openai" and not (self.urls and self.served_model):
            raise ValueError(
                "engine openai needs `urls` (one per `vllm serve` replica) and `served_model`"
            )
        return self


def require_backend_allowed(experiment_kind: str, backend: str) -> None:
    """The simulated Lean is the demo's only: raise ValueError for any other experiment."""
    if backend == "simulated" and experiment_kind != "demo":
        raise ValueError(
            "the simulated Lean backend is for the demo only; a registered experiment "
            "must verify with real Lean (backend local or remote)"
        )
