"""The round's balance on this host: how many Lean workers it runs, and for each sampling step
whether GPU generation or Lean verification bounds it, by how much, and the worker count that
would balance the two. A statement for the operator, never a gate: the overlapped schedule
runs both sides at once, so the slower one sets the step's time and the other waits."""

from __future__ import annotations

from collections.abc import Mapping

from prover_assets.config import RemoteLeanSettings, RunConfig
from prover_assets.gpus import training_ranks
from prover_assets.operations.eta import (
    eta_table,
    eval_problems_upper_bound,
    round_plan,
    step_balances,
)
from prover_assets.preflight.model import CheckStatus, Measurement, PreflightCheck, timed
from prover_assets.verify.sizing import HostShape, sized_workers

__all__ = ["RATE_INPUTS", "balance_check"]

# The rates a step's two sides are costed with, stated with their sources.
RATE_INPUTS = (
    "tokens_per_s",
    "mean_completion_tokens",
    "share_with_code",
    "verify_s_per_code_sample",
)


def balance_check(
    config: RunConfig,
    figures: Mapping[str, float],
    host: HostShape | None = None,
    gpus: int | None = None,
) -> PreflightCheck:
    """`round.balance`: the workers (pinned or sized to `host`, this one by default) and each
    sampling step's bound, from the smoke round's `figures` where measured, priors otherwise;
    `gpus`: the box's GPUs, which `training.gpus: all` trains on (None: this box's)."""
    lean = config.lean
    threshold = "none: which side bounds each step, stated (not a gate)"
    remedy = (
        "set `auto_workers: true` (with the reserve the engines need) or pin `workers` to the "
        "count that balances the pool round"
    )

    def measure() -> Measurement:
        if isinstance(lean, RemoteLeanSettings):
            return Measurement(CheckStatus.NOT_APPLICABLE, "a Lean server sizes its own workers")
        shape = host or HostShape.this_host()
        sizing = sized_workers(lean, shape)
        spec = config.experiment
        counts = {name: eval_problems_upper_bound(spec, name) for name in spec.eval_sets}
        ranks = training_ranks(spec.training, config.gpu.device, gpus)
        plan = round_plan(spec, counts, sizing.workers, config.gpu.engines, ranks)
        table = eta_table(plan, {}, figures)
        rates = ", ".join(
            f"{name} {table['inputs'][name]['central']:g} ({table['inputs'][name]['source']})"
            for name in RATE_INPUTS
        )
        steps = "; ".join(b.describe() for b in step_balances(table, sizing.workers))
        text = (
            f"{sizing.describe()} on {shape.cores} cores and {shape.memory_mb / 1024:.0f} GiB; "
            f"rates: {rates}; {steps}"
        )
        return Measurement(CheckStatus.PASSED, text)

    return timed("round.balance", threshold, remedy, measure)
