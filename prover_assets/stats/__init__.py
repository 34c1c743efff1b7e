"""Statistics of the registered comparison (design section 6), each tested against an
independent computation."""

from prover_assets.stats.bootstrap import (
    Interval,
    cluster_bootstrap_mean,
    paired_bootstrap_difference,
)
from prover_assets.stats.core import (
    MissingSamplesError,
    mcnemar_exact,
    mcnemar_power,
    min_discordant_split,
    pass_at_k,
    solved_at_k,
    wilson_interval,
)

__all__ = [
    "Interval",
    "MissingSamplesError",
    "cluster_bootstrap_mean",
    "mcnemar_exact",
    "mcnemar_power",
    "min_discordant_split",
    "paired_bootstrap_difference",
    "pass_at_k",
    "solved_at_k",
    "wilson_interval",
]
