"""What the experiment is (the `experiment` resource's spec): eval sets, pool, model,
generation, correction, SFT, training, iterations and report, validated together."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from prover_assets.config.base import (
    InputFile,
    NonNegativeInt,
    PositiveInt,
    Probability,
    StrictSpec,
)
from prover_assets.records.models import SamplingSettings


class EvalSetSpec(StrictSpec):
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


class PoolColumns(StrictSpec):
    """Column names in the pool's parquet shards (Goedel-Pset-v1 defaults)."""

    problem_id: str = "problem_id"
    formal_statement: str = "formal_statement"
    informal: str | None = "informal_statement"
    source: str | None = "source"


class PoolSpec(StrictSpec):
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


class ModelSpec(StrictSpec):
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


class GenerationSpec(StrictSpec):
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

    @property
    def sampling(self) -> SamplingSettings:
        """What every request of the experiment carries: these three fields as given (no top-k
        cut: 0), every other sampling field neutral."""
        return SamplingSettings(
            temperature=self.temperature, top_p=self.top_p, top_k=self.top_k or 0
        )

    @model_validator(mode="after")
    def _distinct_caps(self) -> GenerationSpec:
        if len(set(self.caps)) != len(self.caps):
            raise ValueError(f"caps {self.caps} repeat a cap: each cap is one set of assets")
        return self


class CorrectionSpec(StrictSpec):
    """The correction rounds: how many, and children per failed parent."""

    rounds: Annotated[int, Field(ge=0)]
    samples_per_parent: PositiveInt
    # A round with no failed sample to correct is an error unless this says so: at the
    # registered scale it means the feedback was lost, not that everything was solved.
    allow_empty: bool = False


class SftSpec(StrictSpec):
    """Which accepted samples become SFT rows (cap, per-problem limit, exclusions, length)."""

    cap: PositiveInt
    max_per_problem: PositiveInt
    exclude_solved_all: bool
    fill_duplicates: bool
    max_seq_len: PositiveInt
    allow_empty: bool = False  # SFT data with 0 rows is an error unless this says so


class TrainingSpec(StrictSpec):
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


class IterationSpec(StrictSpec):
    """Expert iteration past one round: iteration i samples the train pool with the model of
    iteration i-1 (the registered seed's export; the baseline for i = 1)."""

    # Round 0 of iteration i > 1 samples the pool problems no earlier iteration solved, or all.
    problems: Literal["unsolved", "all"] = "unsolved"
    # The SFT data of iteration i: its own accepted proofs, or every iteration's so far (distinct).
    sft_data: Literal["iteration", "cumulative"] = "iteration"
    # Iteration i > 1 trains LoRA from the base model, or continues from iteration i-1's export
    # of the same seed.
    start: Literal["base", "previous"] = "base"


class ReportSpec(StrictSpec):
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


class DemoSpec(StrictSpec):
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


class ExperimentSpec(StrictSpec):
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
