"""The run configuration: one YAML file, read into typed, validated objects.

A config file is also a valid Dagster run config (`dagster job launch -c configs/p2.yaml`):

    resources:
      experiment: {config: {spec: {...}}}     # ExperimentSpec: what the experiment is
      lean:       {config: {settings: {local: {...}}}} # LeanSettings, one model per backend
      gpu:        {config: {settings: {...}}} # EngineSettings: how samples are generated

Every section is strict: an unknown key, a wrong type or a duplicate YAML key is an error that
names the file and the key path. Values that the user must fill in (paths on their machine, the
pool shards' sha256) are written as `REPLACE_ME...` placeholders; the definitions load with
them (and say which are left), and a launch is refused, naming every one, until all are filled.
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

__all__ = [
    "LEAN_BACKENDS",
    "PLACEHOLDER_PREFIX",
    "PLACE_FIELDS",
    "ConfigError",
    "CorrectionSpec",
    "DemoSpec",
    "EngineSettings",
    "EvalSetSpec",
    "ExperimentSpec",
    "GenerationSpec",
    "InputFile",
    "IterationSpec",
    "LeanSettings",
    "LocalLeanSettings",
    "ModelSpec",
    "PoolColumns",
    "PoolSpec",
    "RemoteLeanSettings",
    "ReportSpec",
    "RunConfig",
    "SftSpec",
    "SimulatedLeanSettings",
    "TrainingSpec",
    "assemble_run_config",
    "lean_from_selector",
    "load_run_config",
    "parse_engine_settings",
    "parse_experiment_spec",
    "parse_lean_settings",
    "parse_run_config",
    "placeholders",
    "require_backend_allowed",
    "require_filled",
    "require_no_placeholders",
    "resolve_path",
    "same_shape",
]

PLACEHOLDER_PREFIX = "REPLACE_ME"
PACKAGE_PREFIX = "package:"


class ConfigError(ValueError):
    """A configuration file or value is invalid; the message says where and what to do."""


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


Sha256OrPlaceholder = Annotated[str, Field(pattern=rf"^([0-9a-f]{{64}}|{PLACEHOLDER_PREFIX}.*)$")]
PositiveInt = Annotated[int, Field(gt=0)]
NonNegativeInt = Annotated[int, Field(ge=0)]
Probability = Annotated[float, Field(gt=0, le=1)]


def is_placeholder(value: str) -> bool:
    """Whether a config value is still a `REPLACE_ME...` placeholder."""
    return value.startswith(PLACEHOLDER_PREFIX)


def require_filled(value: str, where: str) -> str:
    """Return `value`, or raise telling the user which placeholder to fill in."""
    if is_placeholder(value):
        raise ConfigError(
            f"{where} is still the placeholder {value!r}: fill it in in your config file"
        )
    return value


def resolve_path(value: str, where: str) -> Path:
    """`package:<rel>` is data shipped inside prover_assets/data; other paths are used as given
    (relative ones against the working directory, the project root)."""
    require_filled(value, where)
    if value.startswith(PACKAGE_PREFIX):
        root = importlib.resources.files("prover_assets") / "data"
        return Path(str(root)) / value[len(PACKAGE_PREFIX) :]
    return Path(value).expanduser()


class InputFile(_Spec):
    """A file the experiment reads, with the sha256 it must have."""

    path: str
    sha256: Sha256OrPlaceholder  # checked before the file is read


class EvalSetSpec(_Spec):
    """One evaluation set: its format, its file, and the caps it is evaluated at."""

    format: Literal["minif2f", "mobench"]
    file: InputFile
    # First N problems only (demo). Any limit makes a comparison secondary, never PRIMARY.
    limit: PositiveInt | None = None
    # The completion caps this set is evaluated at; None: every cap of `generation.caps`.
    caps: list[PositiveInt] | None = None
    allow_empty: bool = False  # an eval set with 0 problems is an error unless this says so
    # MOBench only, and required there: whether problems stated in a preamble of declarations
    # enter (359 of 360) or only those whose theorem stands alone (the seed's 135, the
    # registered S2). Which set a name means is said, never defaulted.
    preambles: bool | None = None
    # What this set's comparison is, printed in the report beside it ("S2, registered
    # secondary"); a comparison is PRIMARY only by the pre-registration, whatever this says.
    endpoint: str | None = None

    @model_validator(mode="after")
    def _preambles_said_for_mobench(self) -> EvalSetSpec:
        if self.format == "mobench" and self.preambles is None:
            raise ValueError(
                "a mobench eval set needs `preambles: false` (the 135 problems without a "
                "preamble, the registered S2) or `preambles: true` (359 of 360)"
            )
        if self.format == "minif2f" and self.preambles is not None:
            raise ValueError("`preambles` applies to mobench only (miniF2F has none)")
        return self


class PoolColumns(_Spec):
    """Column names in the pool's parquet shards (Goedel-Pset-v1 defaults)."""

    problem_id: str = "problem_id"
    formal_statement: str = "formal_statement"
    informal: str | None = "informal_statement"
    source: str | None = "source"


class PoolSpec(_Spec):
    """The train pool: shards, seed, the ranked candidates kept (K) and the pool size (N)."""

    dataset: str
    revision: str
    shards: Annotated[list[InputFile], Field(min_length=1)]
    columns: PoolColumns = PoolColumns()
    seed: int
    candidates: PositiveInt  # K: the ranked candidates kept (bounded heap)
    size: PositiveInt  # N: the first N candidates that elaborate form the train pool
    max_statement_chars: PositiveInt = 4000
    informal_long_ngram: PositiveInt = 13
    informal_short_ngram: PositiveInt = 8
    min_short_ngram_overlaps: PositiveInt = 3
    workers: PositiveInt = 2  # processes streaming row groups
    batch_rows: PositiveInt = 8192
    allow_empty: bool = False  # 0 candidates is an error unless this says so
    # A statement with a decimal literal that would elaborate as Float (`float_numerals`):
    # dropped (counted in the funnel), or kept and counted as flagged.
    float_numerals: Literal["drop", "keep"] = "drop"

    @model_validator(mode="after")
    def _size_within_candidates(self) -> PoolSpec:
        if self.size > self.candidates:
            raise ValueError(f"size {self.size} > candidates {self.candidates}")
        return self


class ModelSpec(_Spec):
    """The model generation starts from. `hub`: a local snapshot of a hub model, whose
    `revision` is required (40 hex digits); `demo_tiny`: the demo's tiny model, built and
    fine-tuned by the `demo_base_model` asset."""

    source: Literal["hub", "demo_tiny"]
    path: str | None = None
    revision: str | None = None
    max_model_len: PositiveInt

    @model_validator(mode="after")
    def _hub_needs_path_and_revision(self) -> ModelSpec:
        if self.source == "hub" and (self.path is None or self.revision is None):
            raise ValueError("a hub model needs both path and revision")
        return self


class GenerationSpec(_Spec):
    """Sampling (the handler's protocol, temperature, top-p, top-k), samples per problem, the
    caps."""

    handler: Literal["dpskcot"]
    temperature: Annotated[float, Field(ge=0)]
    top_p: Probability
    top_k: PositiveInt | None = None  # None: no top-k cut
    n_samples: PositiveInt
    caps: Annotated[list[PositiveInt], Field(min_length=1)]
    seed: int
    commit_every: PositiveInt = 256  # samples generated between appends to the store

    @model_validator(mode="after")
    def _distinct_caps(self) -> GenerationSpec:
        if len(set(self.caps)) != len(self.caps):
            raise ValueError(f"caps {self.caps} repeat a cap: each cap is one set of assets")
        return self


class CorrectionSpec(_Spec):
    """The correction rounds: how many, and children per failed parent."""

    rounds: Annotated[int, Field(ge=0)]
    samples_per_parent: PositiveInt
    # A round with no failed sample to correct is an error unless this says so: at the
    # registered scale it means the feedback was lost, not that everything was solved.
    allow_empty: bool = False


class SftSpec(_Spec):
    """Which accepted samples become SFT rows (cap, per-problem limit, exclusions, length)."""

    cap: PositiveInt
    max_per_problem: PositiveInt
    exclude_solved_all: bool
    fill_duplicates: bool
    max_seq_len: PositiveInt
    allow_empty: bool = False  # SFT data with 0 rows is an error unless this says so


class TrainingSpec(_Spec):
    """The LoRA fine-tune: adapter, optimiser, schedule, packing, checkpoints, precision."""

    lora_r: PositiveInt
    lora_alpha: PositiveInt
    lora_dropout: Annotated[float, Field(ge=0, lt=1)]
    target_modules: Annotated[list[str], Field(min_length=1)]
    learning_rate: Annotated[float, Field(gt=0)]
    lr_scheduler: Literal["cosine", "linear", "constant", "constant_with_warmup"]
    warmup_ratio: Annotated[float, Field(ge=0, lt=1)]
    epochs: PositiveInt
    tokens_per_micro_batch: PositiveInt
    gradient_accumulation: PositiveInt
    save_every: PositiveInt  # micro-steps between checkpoints
    keep_checkpoints: PositiveInt
    seed: int  # the registered seed: its candidate is the one the registered comparison reads
    # More training runs on the same SFT data, one per seed (the registered seed among them):
    # each gets its own checkpoint, export and candidate evaluation, to measure the spread.
    seeds: Annotated[list[int], Field(min_length=1)] | None = None
    pad_token_id: int | None = None  # None: the tokenizer's
    precision: Literal["auto", "bf16", "fp32"] = "auto"  # auto: bf16 on GPU, fp32 on CPU
    # flash_attention_2 reads the packed rows as variable-length sequences; sdpa attends a dense
    # block-diagonal mask over the whole micro-batch (about twice the step time at 18,432
    # tokens). A named one is used or the run refused, never replaced; auto: flash-attention 2
    # on a GPU where it imports, else sdpa.
    attention: Literal["auto", "flash_attention_2", "sdpa"] = "auto"
    max_steps: PositiveInt | None = None  # demo / smoke runs only
    # Memory (sft/memory.py): layer inputs kept and the rest recomputed in backward; the loss
    # computed this many tokens' logits at a time; the card a rank plans for.
    gradient_checkpointing: bool = True
    loss_chunk_tokens: PositiveInt = 1024
    gpu_memory_gib: Annotated[float, Field(gt=0)] = 80.0
    # The GPUs training uses (CUDA indices), one data-parallel rank each; the trainer sees
    # these and no others. `all`: every GPU the box has, resolved where the step runs (the
    # preflight says which, the checkpoint's manifest records them). `gradient_accumulation`
    # must be a multiple of their count.
    gpus: Annotated[list[NonNegativeInt], Field(min_length=1)] | Literal["all"] = [0]

    @model_validator(mode="after")
    def _registered_seed_among_seeds(self) -> TrainingSpec:
        if self.seeds is not None:
            if self.seed not in self.seeds:
                raise ValueError(
                    f"training.seeds {self.seeds} must include training.seed {self.seed}"
                )
            if len(set(self.seeds)) != len(self.seeds):
                raise ValueError(f"training.seeds {self.seeds} repeats a seed")
        return self

    @model_validator(mode="after")
    def _ranks_share_the_accumulation(self) -> TrainingSpec:
        if self.gpus != "all":
            if len(set(self.gpus)) != len(self.gpus):
                raise ValueError(f"training.gpus {self.gpus} repeats a GPU")
            self._refuse_unshared_accumulation(len(self.gpus), "in training.gpus")
        return self

    def _refuse_unshared_accumulation(self, count: int, which: str) -> None:
        if self.gradient_accumulation % count:
            raise ValueError(
                f"training.gradient_accumulation {self.gradient_accumulation} is not a multiple "
                f"of the {count} GPUs {which}: each rank trains the same number of micro-steps "
                "per optimizer step"
            )

    def resolved_gpus(self, visible: int) -> list[int]:
        """The GPUs training uses on a box with `visible` GPUs: `gpus` as listed, or with `all`
        every one of them (refused when there are none, or when the accumulation does not
        divide among them)."""
        if self.gpus != "all":
            return list(self.gpus)
        if visible < 1:
            raise ValueError("training.gpus is `all`, but this box has no visible GPU")
        self._refuse_unshared_accumulation(visible, "this box has (training.gpus: all)")
        return list(range(visible))

    def ranks(self, device: str, visible: int = 0) -> int:
        """The data-parallel ranks on `device`: one per GPU training uses on CUDA (`visible`:
        the box's GPUs, which `all` takes), one on CPU."""
        return len(self.resolved_gpus(visible)) if device == "cuda" else 1

    def all_seeds(self) -> list[int]:
        """Every training seed, the registered one first."""
        return [self.seed, *(s for s in self.seeds or () if s != self.seed)]

    def for_seed(self, seed: int) -> TrainingSpec:
        """This training with `seed` (one of `all_seeds`)."""
        if seed not in self.all_seeds():
            raise ValueError(f"seed {seed} is not one of training's seeds {self.all_seeds()}")
        return self.model_copy(update={"seed": seed})

    def uses_bf16(self, device: str) -> bool:
        """Whether training (and the export's weights) on `device` are bfloat16."""
        return self.precision == "bf16" or (self.precision == "auto" and device == "cuda")


class IterationSpec(_Spec):
    """Expert iteration past one round: iteration i samples the train pool with the model of
    iteration i-1 (the registered seed's export; the baseline for i = 1)."""

    # Round 0 of iteration i > 1 samples the pool problems no earlier iteration solved, or all.
    problems: Literal["unsolved", "all"] = "unsolved"
    # The SFT data of iteration i: its own accepted proofs, or every iteration's so far (distinct).
    sft_data: Literal["iteration", "cumulative"] = "iteration"
    # Iteration i > 1 trains LoRA from the base model, or continues from iteration i-1's export
    # of the same seed.
    start: Literal["base", "previous"] = "base"


class ReportSpec(_Spec):
    """The registered comparison and its statistics (k, alpha, bootstrap, power table)."""

    primary_set: str
    primary_cap: PositiveInt
    k: PositiveInt
    ks: Annotated[list[PositiveInt], Field(min_length=1)]
    alpha: Probability
    bootstrap_resamples: PositiveInt
    bootstrap_seed: int
    prereg: str  # path of prereg.md
    power_discordant_fractions: Annotated[list[Probability], Field(min_length=1)]
    power_gains_points: Annotated[list[Annotated[float, Field(gt=0)]], Field(min_length=1)]


class DemoSpec(_Spec):
    """The CPU demo: a tiny model fine-tuned for seconds, a simulated verifier."""

    finetune_steps: PositiveInt
    tiny_hidden_size: PositiveInt
    tiny_layers: PositiveInt
    tiny_vocab_size: PositiveInt
    # A folder of format-tuned models shared across data roots (prover_assets.generation.
    # shared_tunings): the demos tune once per statements and settings. None: each data root
    # tunes its own.
    shared_tunings: str | None = None


# Where the outputs go, not what they are: identities (the preflight's, a report's name) leave
# these experiment fields out, so a data root can move without changing them.
PLACE_FIELDS = frozenset({"data_root"})


def _refuse_lengths_that_cannot_hold_a_sample(spec: ExperimentSpec) -> None:
    """A model context below the largest cap cuts every long sample short of its cap (Goedel
    clamps to `max_model_len - prompt`, by design only at the largest); an SFT row holds its
    prompt and a completion of up to `sft.cap` tokens, so `sft.max_seq_len` must exceed it."""
    largest = max(spec.generation.caps)
    if spec.model.max_model_len < largest:
        raise ValueError(
            f"model.max_model_len {spec.model.max_model_len} is below the largest "
            f"generation.caps {largest}: no sample could reach that cap"
        )
    if spec.sft.max_seq_len <= spec.sft.cap:
        raise ValueError(
            f"sft.max_seq_len {spec.sft.max_seq_len} does not exceed sft.cap {spec.sft.cap}: "
            "a row is its prompt and a completion of up to the cap, so rows at the cap would "
            "all be dropped"
        )


def _refuse_a_model_of_the_other_kind(spec: ExperimentSpec) -> None:
    """The demo samples its tiny model, and only the demo does; each refusal names the source
    the config gave."""
    if spec.kind == "demo" and spec.model.source != "demo_tiny":
        raise ValueError(
            f"model.source {spec.model.source} in a demo: the demo samples its own tiny model "
            "(model.source: demo_tiny); a hub model is a registered experiment's "
            "(kind: registered)"
        )
    if spec.kind != "demo" and spec.model.source == "demo_tiny":
        raise ValueError(
            f"model.source demo_tiny in a {spec.kind} experiment: the tiny model is the demo's "
            "(kind: demo) only; give the hub snapshot (source: hub, path, revision)"
        )


def _refuse_commits_larger_than_the_pool_round(spec: ExperimentSpec) -> None:
    """Samples are appended `commit_every` at a time: a batch smaller than that is committed
    only when it ends, and a kill loses all of it. The pool's first round (pool.size x
    n_samples) is the largest batch the config alone sizes."""
    pool_round = spec.pool.size * spec.generation.n_samples
    if spec.generation.commit_every > pool_round:
        raise ValueError(
            f"generation.commit_every {spec.generation.commit_every} exceeds the pool round's "
            f"{pool_round} samples (pool.size {spec.pool.size} x generation.n_samples "
            f"{spec.generation.n_samples}): no batch would commit before it ends; set it at "
            f"most {pool_round}"
        )


class ExperimentSpec(_Spec):
    """What the experiment is: every section, with the rules that tie them together."""

    name: str
    kind: Literal["registered", "demo"]
    data_root: str
    eval_sets: Annotated[dict[str, EvalSetSpec], Field(min_length=1)]
    pool: PoolSpec
    model: ModelSpec
    generation: GenerationSpec
    corrections: CorrectionSpec
    sft: SftSpec
    training: TrainingSpec
    report: ReportSpec
    demo: DemoSpec | None = None
    # Expert iterations: 1 is the registered design (one round); more partition the graph's
    # per-iteration assets by iteration.
    iterations: PositiveInt = 1
    iteration: IterationSpec = IterationSpec()

    @model_validator(mode="after")
    def _consistent(self) -> ExperimentSpec:
        if (self.kind == "demo") != (self.demo is not None):
            raise ValueError("a demo experiment has a `demo` section, and only a demo has one")
        _refuse_a_model_of_the_other_kind(self)
        if self.sft.cap not in self.generation.caps:
            raise ValueError(f"sft.cap {self.sft.cap} is not one of generation.caps")
        if self.report.primary_cap not in self.generation.caps:
            raise ValueError(f"report.primary_cap {self.report.primary_cap} not in generation.caps")
        if self.report.primary_set not in self.eval_sets:
            raise ValueError(f"report.primary_set {self.report.primary_set!r} is not an eval set")
        if not self.data_root.strip():
            raise ValueError("data_root is empty: name the folder the outputs go to")
        if not self.name.strip():
            raise ValueError("name is empty: name the experiment (reports and runs carry it)")
        _refuse_lengths_that_cannot_hold_a_sample(self)
        _refuse_commits_larger_than_the_pool_round(self)
        if self.report.k > self.generation.n_samples:
            raise ValueError("report.k exceeds generation.n_samples")
        if above := [k for k in self.report.ks if k > self.generation.n_samples]:
            raise ValueError(f"report.ks {above} exceed generation.n_samples")
        if self.training.save_every % self.training.gradient_accumulation:
            raise ValueError(
                "training.save_every (micro-steps) must be a multiple of gradient_accumulation"
            )
        if self.sft.max_seq_len > self.training.tokens_per_micro_batch:
            raise ValueError(
                "sft.max_seq_len exceeds training.tokens_per_micro_batch: a row would not fit"
            )
        for name, eval_set in self.eval_sets.items():
            if not set(eval_set.caps or ()) <= set(self.generation.caps):
                raise ValueError(f"eval_sets.{name}.caps must be a subset of generation.caps")
        return self

    def caps_of(self, eval_set: str) -> list[int]:
        return list(self.eval_sets[eval_set].caps or self.generation.caps)


class _LeanCommon(_Spec):
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


class EngineSettings(_Spec):
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


class RunConfig(_Spec):
    """The three resources' settings of one run config, validated together."""

    experiment: ExperimentSpec
    lean: LeanSettings
    gpu: EngineSettings
    source: str  # the file it was read from
    placeholders: tuple[str, ...] = ()  # key paths of the `REPLACE_ME` values still in it

    @model_validator(mode="after")
    def _simulated_only_in_demo(self) -> RunConfig:
        require_backend_allowed(self.experiment.kind, self.lean.backend)
        return self


_LEAN_ADAPTER: TypeAdapter[LeanSettings] = TypeAdapter(LeanSettings)


class _UniqueKeyLoader(yaml.SafeLoader):
    pass


def _construct_unique_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    mapping: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in mapping:
            raise ConfigError(
                f"line {key_node.start_mark.line + 1}: duplicate key {key!r} in the same mapping"
            )
        mapping[key] = loader.construct_object(value_node, deep=True)
    return mapping


_UniqueKeyLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_unique_mapping
)


_SECTION_PATHS = {
    "experiment": "resources.experiment.config.spec",
    "lean": "resources.lean.config.settings",
    "gpu": "resources.gpu.config.settings",
}


def _format_errors(exc: ValidationError, section: str | None = None) -> str:
    """One line per error, at its key path in the run config; `section`: the resource the
    errors' locations are relative to (else their first element names it)."""
    lines = []
    for error in exc.errors():
        loc = [str(part) for part in error["loc"]]
        head, rest = (section, loc) if section else (loc[0] if loc else "", loc[1:])
        where = ".".join([_SECTION_PATHS.get(head, head), *rest])
        lines.append(f"  {where}: {error['msg']} (got {error.get('input')!r:.80})")
    return "\n".join(lines)


def _section(raw: dict[str, Any], name: str, field: str, source: str) -> Any:
    try:
        section = raw["resources"][name]["config"][field]
    except (KeyError, TypeError) as exc:
        raise ConfigError(f"{source}: missing resources.{name}.config.{field}") from exc
    return section


def _parse(model: type[_Spec], data: Any, section: str, source: str) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(
            f"{source}: invalid configuration:\n{_format_errors(exc, section)}"
        ) from exc


def parse_experiment_spec(data: Any, source: str = "run config") -> ExperimentSpec:
    """The experiment section as an ExperimentSpec; raises `ConfigError` naming each invalid key."""
    return _parse(ExperimentSpec, data, "experiment", source)


def parse_lean_settings(data: Any, source: str = "run config") -> LeanSettings:
    """The Lean settings from the run config's `{backend: {...}}` selector (or a flat mapping
    with `backend`)."""
    try:
        return _LEAN_ADAPTER.validate_python(lean_from_selector(data))
    except ValidationError as exc:
        raise ConfigError(
            f"{source}: invalid configuration:\n{_format_errors(exc, 'lean')}"
        ) from exc


def parse_engine_settings(data: Any, source: str = "run config") -> EngineSettings:
    """The gpu section as EngineSettings; raises `ConfigError` naming each invalid key."""
    return _parse(EngineSettings, data, "gpu", source)


def same_shape(run: ExperimentSpec, built: ExperimentSpec) -> None:
    """The asset graph was built from one config; a run must not bring another shape."""
    shape = lambda spec: (  # noqa: E731
        spec.kind,
        {name: spec.caps_of(name) for name in spec.eval_sets},
        spec.generation.caps,
        spec.sft.cap,
        spec.corrections.rounds,
        spec.iterations,
        spec.training.all_seeds(),
    )
    if shape(run) != shape(built):
        raise ConfigError(
            f"this run's config has the shape {shape(run)}, but the asset graph was built from "
            f"{shape(built)}: point PROVER_ASSETS_CONFIG at the config you launch with"
        )


def placeholders(raw: Any, path: str = "") -> list[str]:
    """The key path of every `REPLACE_ME...` value in a run config, in file order."""
    if isinstance(raw, str):
        return [path] if is_placeholder(raw) else []
    if isinstance(raw, dict):
        items = [(f"{path}.{key}" if path else str(key), value) for key, value in raw.items()]
    elif isinstance(raw, list):
        items = [(f"{path}[{index}]", value) for index, value in enumerate(raw)]
    else:
        return []
    return [found for where, value in items for found in placeholders(value, where)]


def require_no_placeholders(raw: Any, source: str) -> None:
    """Raise naming every placeholder still in the run config, with its key path."""
    if found := placeholders(raw):
        lines = "\n".join(f"  {where}" for where in found)
        raise ConfigError(
            f"{source}: {len(found)} placeholder values are still to be filled in (paths on "
            f"your machine, the pool shards' sha256):\n{lines}"
        )


def parse_run_config(raw: Any, source: str) -> RunConfig:
    """A run config (the file's or a launch's mapping) as a RunConfig; raises `ConfigError`
    naming the source and the key path of every invalid value."""
    if not isinstance(raw, dict) or set(raw) - {"resources", "execution", "loggers"}:
        raise ConfigError(
            f"{source}: a run config has top-level keys resources (and optionally execution, "
            f"loggers); found {sorted(raw) if isinstance(raw, dict) else type(raw).__name__}"
        )
    unknown_resources = set(raw.get("resources") or {}) - {"experiment", "lean", "gpu"}
    if unknown_resources:
        raise ConfigError(f"{source}: unknown resources {sorted(unknown_resources)}")
    sections = {
        "experiment": _section(raw, "experiment", "spec", source),
        "lean": lean_from_selector(_section(raw, "lean", "settings", source)),
        "gpu": _section(raw, "gpu", "settings", source),
    }
    try:
        return RunConfig.model_validate(
            {**sections, "source": source, "placeholders": tuple(placeholders(raw))}
        )
    except ValidationError as exc:
        raise ConfigError(f"{source}: invalid configuration:\n{_format_errors(exc)}") from exc


def assemble_run_config(
    experiment: ExperimentSpec, lean: LeanSettings, gpu: EngineSettings, source: str
) -> RunConfig:
    """The RunConfig of three validated sections (a run's resources), its placeholders found
    again under their key paths."""
    raw = {
        "resources": {
            "experiment": {"config": {"spec": experiment.model_dump(mode="json")}},
            "lean": {"config": {"settings": lean.model_dump(mode="json")}},
            "gpu": {"config": {"settings": gpu.model_dump(mode="json")}},
        }
    }
    return parse_run_config(raw, source)


def load_run_config(path: str | Path) -> RunConfig:
    """Read and validate a run config file; raises `ConfigError` naming the file and key."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc}") from exc
    try:
        raw = yaml.load(text, Loader=_UniqueKeyLoader)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    return parse_run_config(raw, str(path))
