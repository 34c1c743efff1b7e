"""The Lean and engine settings: a simulated rule takes its own settings only, and GPUs must
cut into engines."""

from pathlib import Path

import pytest
from pydantic import ValidationError

from prover_assets.config import (
    EngineSettings,
    SimulatedLeanSettings,
)

CONFIGS = Path(__file__).parents[2] / "configs"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"rule": "planted_tactic", "accept_share": 0.4, "seed": 1}, "meaningless for"),
        ({"rule": "seeded_share", "seed": 1}, "required by rules seeded_theorems and seeded_share"),
        ({"rule": "seeded_theorems", "seed": 1}, "required by rules"),
        ({"rule": "every_third", "seed": 1}, "rule"),
    ],
)
def test_a_simulated_rule_takes_exactly_its_own_settings(settings, message):
    with pytest.raises(ValidationError, match=message):
        SimulatedLeanSettings(**settings)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"gpus": [0, 1, 1, 2]}, r"gpus \[0, 1, 1, 2\] names a GPU twice"),
        (
            {"gpus": [0, 1, 2], "tensor_parallel_size": 2},
            r"gpus \[0, 1, 2\] do not split into engines of 2 GPUs",
        ),
        ({"gpus": []}, r"gpus \[\] do not split into engines of 1 GPUs"),
    ],
)
def test_gpus_that_cannot_be_cut_into_engines_are_refused(settings, message):

    with pytest.raises(ValidationError, match=message):
        EngineSettings(engine="vllm", **settings)
