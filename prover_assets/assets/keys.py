"""Asset keys, groups and pool names of the one graph, named in one place."""

from dataclasses import dataclass

import dagster as dg

from prover_assets.config import ExperimentSpec
from prover_assets.iteration import (
    EXPORTED_MODEL_PATH,
    pool_generations_path,
    pool_verdicts_path,
)
from prover_assets.records.layout import key_path, legacy_key_path

__all__ = [
    "BASELINE",
    "CANDIDATE",
    "DECONTAMINATION_KEY",
    "DEMO_BASE_MODEL",
    "DEMO_GROUP",
    "ETA_KEY",
    "EXPORTED_MODEL",
    "GPU_POOL",
    "HEAVY",
    "ITERATION",
    "LEAN_POOL",
    "OPERATIONS_GROUP",
    "POOL_CANDIDATES_KEY",
    "POOL_ROUND_GROUP",
    "PREFLIGHT_GROUP",
    "PREFLIGHT_KEY",
    "PROBLEMS_GROUP",
    "REPORT_GROUP",
    "REPORT_KEY",
    "SFT_CHECKPOINT",
    "SFT_GROUP",
    "SFT_SHARDS",
    "STATEMENT_AUDIT",
    "TRAIN_POOL",
    "EvaluationBatch",
    "PoolRoundBatch",
    "Schedule",
    "TrainingRun",
    "eval_set_key",
    "evaluated_systems",
    "generations_key",
    "iteration_partitions",
    "judged_batches",
    "legacy_key",
    "node_kinds",
    "pool_generations_key",
    "pool_verdicts_key",
    "reference_elaboration_key",
    "schedule_of",
    "statement_audit_key",
    "training_runs",
    "verdicts_key",
]

# Concurrency pools (one step at a time in each, across runs): `heavy` holds the GPU and the
# Lean workers together (schedule exclusive); `gpu` and `lean` hold one each (overlapped).
HEAVY = "heavy"
GPU_POOL = "gpu"
LEAN_POOL = "lean"


@dataclass(frozen=True)
class Schedule:
    """How heavy steps share the machine: the pool of GPU steps (generation, training, export),
    the pool of Lean steps (verification, elaboration), and whether a generation step verifies
    its samples while it generates."""

    name: str
    gpu_pool: str
    lean_pool: str
    overlapped: bool


def schedule_of(name: str) -> Schedule:
    """The schedule the `gpu` settings name (`overlapped` or `exclusive`)."""
    if name == "overlapped":
        return Schedule(name, GPU_POOL, LEAN_POOL, overlapped=True)
    if name == "exclusive":
        return Schedule(name, HEAVY, HEAVY, overlapped=False)
    raise ValueError(f"unknown schedule {name!r}: overlapped or exclusive")


BASELINE = "baseline"
PROBLEMS_GROUP = "problems"
DEMO_GROUP = "demo"
SFT_GROUP = "sft"
REPORT_GROUP = "report"
CANDIDATE = "candidate"
POOL_ROUND_GROUP = "pool_round"
OPERATIONS_GROUP = "operations"  # about the run, not the experiment (e.g. the ETA)
PREFLIGHT_GROUP = "preflight"  # the environment checked before heavy jobs may launch

TRAIN_POOL = dg.AssetKey(["train_pool"])
DEMO_BASE_MODEL = dg.AssetKey(["demo_base_model"])
SFT_SHARDS = dg.AssetKey(["sft_shards"])
SFT_CHECKPOINT = dg.AssetKey(["sft_checkpoint"])
EXPORTED_MODEL = dg.AssetKey(list(EXPORTED_MODEL_PATH))
DECONTAMINATION_KEY = dg.AssetKey(["decontamination_sets"])
POOL_CANDIDATES_KEY = dg.AssetKey(["train_pool_candidates"])
REPORT_KEY = dg.AssetKey(["eval_report"])
ETA_KEY = dg.AssetKey(["eta"])
PREFLIGHT_KEY = dg.AssetKey(["preflight_report"])


def eval_set_key(name: str) -> dg.AssetKey:
    """The key of the evaluation problems of eval set `name`."""
    return dg.AssetKey(["eval_problems", name])


STATEMENT_AUDIT = "statement_audit"


def statement_audit_key(name: str) -> dg.AssetKey:
    """The key of the Lean audit of eval set `name`'s statements
    (`statement_audit/statement_audit_<set>`, in folder `statement_audit/<set>`: labelled apart
    from the set's problems, `eval_problems/<set>`, which the report reads too)."""
    return dg.AssetKey(list(key_path((STATEMENT_AUDIT, name))))


REFERENCE_ELABORATION = "reference_elaboration"


def reference_elaboration_key(name: str) -> dg.AssetKey:
    """The key of eval set `name`'s statements elaborated as `theorem _ref <signature> := by
    sorry` (`reference_elaboration/reference_elaboration_<set>`, in folder
    `reference_elaboration/<set>`): what its generations wait for and its gate refuses."""
    return dg.AssetKey(list(key_path((REFERENCE_ELABORATION, name))))


def generations_key(eval_set: str, system: str, cap: int) -> dg.AssetKey:
    """The key of the generations of `system` on `eval_set` at completion cap `cap`
    (`generations/<set>/<system>/generations_<system>_<set>_c<cap>`, in folder
    `generations/<set>/<system>/c<cap>`)."""
    return dg.AssetKey(list(key_path(("generations", eval_set, system, f"c{cap}"))))


def verdicts_key(eval_set: str, system: str, cap: int) -> dg.AssetKey:
    """The key of the verdicts of `system` on `eval_set` at completion cap `cap`
    (`verdicts/<set>/<system>/verdicts_<system>_<set>_c<cap>`)."""
    return dg.AssetKey(list(key_path(("verdicts", eval_set, system, f"c{cap}"))))


def legacy_key(key: dg.AssetKey) -> dg.AssetKey | None:
    """The key `key`'s outputs were materialized under before generations, verdicts and
    statement audits were labelled (`prover_assets.records.layout`); None for a key never
    renamed. The gates and the readers of materializations look there too when `key` has none,
    until release 0.3.0."""
    old = legacy_key_path(tuple(key.path))
    return None if old is None else dg.AssetKey(list(old))


def pool_generations_key(round: int) -> dg.AssetKey:
    """The key of the train pool's generations of correction round `round` (0: the first
    samples)."""
    return dg.AssetKey(list(pool_generations_path(round)))


def pool_verdicts_key(round: int) -> dg.AssetKey:
    """The key of the train pool's verdicts of correction round `round`."""
    return dg.AssetKey(list(pool_verdicts_path(round)))


def node_kinds(key: dg.AssetKey, *formats: str) -> set[str]:
    """The kinds a node of `key` shows: every part of its key but the last, then `formats`.
    The UI labels a node with the key's last part only (`minif2f` for an eval set and its
    statement audit alike), and shows kinds on the node, so the whole key reads without
    hovering."""
    return {*key.path[:-1], *formats}


ITERATION = "iteration"  # the partition dimension of the per-iteration assets


def iteration_partitions(iterations: int) -> dg.StaticPartitionsDefinition | None:
    """The partitions of the per-iteration assets (pool rounds, SFT, the candidates): one per
    expert iteration, "1" to "K". None for one iteration: the registered design's graph stays
    unpartitioned, its keys, paths and jobs as they were."""
    if iterations == 1:
        return None
    return dg.StaticPartitionsDefinition([str(i) for i in range(1, iterations + 1)])


@dataclass(frozen=True)
class TrainingRun:
    """One training seed's assets: its LoRA checkpoint, its export, and the system name its
    candidate evaluation goes by. The registered seed keeps the one-seed graph's keys."""

    seed: int
    system: str
    checkpoint: dg.AssetKey
    export: dg.AssetKey

    @property
    def registered(self) -> bool:
        return self.system == CANDIDATE


def training_runs(seeds: list[int]) -> list[TrainingRun]:
    """The training run of each seed, the registered seed (the first) first.

    Seeds are keys, not a second partition dimension: a Dagster job targets one partitions
    definition, and with seeds as keys one run of a partition materializes its iteration whole,
    every seed included (a two-dimensional partition would split each iteration over two jobs
    and two partition keys); and seeds, like caps, are fixed by the config."""
    registered, *others = seeds
    return [
        TrainingRun(registered, CANDIDATE, SFT_CHECKPOINT, EXPORTED_MODEL),
        *(
            TrainingRun(
                seed,
                f"{CANDIDATE}_seed{seed}",
                dg.AssetKey([f"{SFT_CHECKPOINT.path[0]}_seed{seed}"]),
                dg.AssetKey([f"{EXPORTED_MODEL.path[0]}_seed{seed}"]),
            )
            for seed in others
        ),
    ]


def evaluated_systems(built: ExperimentSpec) -> list[tuple[str, dg.AssetKey | None]]:
    """Each evaluated system and the export it samples with: the baseline (the base model),
    then one candidate per training seed, the registered seed's first."""
    runs = training_runs(built.training.all_seeds())
    return [(BASELINE, None), *((run.system, run.export) for run in runs)]


@dataclass(frozen=True)
class EvaluationBatch:
    """The samples of an evaluated `system` on `eval_set` at `cap` and their verdicts; `export`
    is the model the system samples with (None: the baseline's base model)."""

    generations: dg.AssetKey
    verdicts: dg.AssetKey
    eval_set: str
    system: str
    export: dg.AssetKey | None
    cap: int


@dataclass(frozen=True)
class PoolRoundBatch:
    """The samples of pool round `round` (0, then the correction rounds) and their verdicts."""

    generations: dg.AssetKey
    verdicts: dg.AssetKey
    round: int


def judged_batches(built: ExperimentSpec) -> list[EvaluationBatch | PoolRoundBatch]:
    """Every generation asset with the verdict asset that judges it: each evaluated system on
    each eval set at each cap (eval set, cap, system), then each pool round."""
    evaluation = [
        EvaluationBatch(
            generations_key(name, system, cap),
            verdicts_key(name, system, cap),
            name,
            system,
            export,
            cap,
        )
        for name in built.eval_sets
        for cap in built.caps_of(name)
        for system, export in evaluated_systems(built)
    ]
    rounds = range(built.corrections.rounds + 1)
    return [
        *evaluation,
        *(PoolRoundBatch(pool_generations_key(r), pool_verdicts_key(r), r) for r in rounds),
    ]
