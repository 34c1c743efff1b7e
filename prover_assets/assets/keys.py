"""Asset keys and groups of the one graph, named in one place."""

import dagster as dg

__all__ = [
    "BASELINE",
    "CANDIDATE",
    "DEMO_BASE_MODEL",
    "EXPORTED_MODEL",
    "OPERATIONS_GROUP",
    "POOL_ROUND_GROUP",
    "REPORT_GROUP",
    "SFT_CHECKPOINT",
    "SFT_GROUP",
    "SFT_SHARDS",
    "TRAIN_POOL",
    "generations_key",
    "pool_generations_key",
    "pool_verdicts_key",
    "verdicts_key",
]

BASELINE = "baseline"
SFT_GROUP = "sft"
REPORT_GROUP = "report"
CANDIDATE = "candidate"
POOL_ROUND_GROUP = "pool_round"
OPERATIONS_GROUP = "operations"  # about the run, not the experiment (e.g. the ETA)

TRAIN_POOL = dg.AssetKey(["train_pool"])
DEMO_BASE_MODEL = dg.AssetKey(["demo_base_model"])
SFT_SHARDS = dg.AssetKey(["sft_shards"])
SFT_CHECKPOINT = dg.AssetKey(["sft_checkpoint"])
EXPORTED_MODEL = dg.AssetKey(["exported_model"])


def generations_key(eval_set: str, system: str, cap: int) -> dg.AssetKey:
    return dg.AssetKey(["generations", eval_set, system, f"c{cap}"])


def verdicts_key(eval_set: str, system: str, cap: int) -> dg.AssetKey:
    return dg.AssetKey(["verdicts", eval_set, system, f"c{cap}"])


def pool_generations_key(round: int) -> dg.AssetKey:
    return dg.AssetKey(["generations", "pool", f"r{round}"])


def pool_verdicts_key(round: int) -> dg.AssetKey:
    return dg.AssetKey(["verdicts", "pool", f"r{round}"])
