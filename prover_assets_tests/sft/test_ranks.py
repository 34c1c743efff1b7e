"""Data-parallel training: the rule that gives micro-steps to ranks, the launch command, and
the GPUs the trainer child sees (the 2-rank gloo runs are in sft/test_trainer.py)."""

import json
import sys

import pytest

from prover_assets.sft.ranks import PADDING, rank_micro_steps, trainer_command
from prover_assets.sft.stages import materialize_checkpoint
from prover_assets_tests.sft.test_memory import registered

P = PADDING


@pytest.mark.parametrize(
    ("micro_steps", "optimizer_steps", "accumulation", "ranks", "expected"),
    [
        (8, 2, 4, 2, [[0, 2, 4, 6], [1, 3, 5, 7]]),
        (5, 3, 2, 2, [[0, 2, 4], [1, 3, P]]),  # the last step has one micro-step: rank 1 pads
        (10, 1, 4, 2, [[0, 2], [1, 3]]),  # max_steps cuts the schedule
        (7, 1, 8, 4, [[0, 4], [1, 5], [2, 6], [3, P]]),
        (3, 2, 2, 1, [[0, 1, 2]]),  # one process: the schedule as it is
    ],
)
def test_each_rank_trains_the_micro_steps_of_its_residue_and_pads_to_the_same_count(
    micro_steps, optimizer_steps, accumulation, ranks, expected
):
    assert [
        rank_micro_steps(micro_steps, optimizer_steps, accumulation, ranks, r) for r in range(ranks)
    ] == expected


def test_an_accumulation_the_ranks_cannot_share_is_an_error():
    with pytest.raises(ValueError, match="not a multiple"):
        rank_micro_steps(10, 2, 3, 2, 0)
    with pytest.raises(ValueError, match="not a multiple"):
        registered(gpus=[0, 1, 2])  # gradient_accumulation 8


def test_one_rank_runs_the_module_and_several_run_under_torchrun():
    assert trainer_command("run.json", 1) == [
        sys.executable,
        "-m",
        "prover_assets.sft.trainer",
        "run.json",
    ]
    several = trainer_command("run.json", 4)
    assert several[:3] == [sys.executable, "-m", "torch.distributed.run"]
    assert "--nproc-per-node=4" in several and "--standalone" in several
    assert several[-3:] == ["-m", "prover_assets.sft.trainer", "run.json"]


class Launched(Exception):
    """Raised by the stand-in for spawning: what the trainer child would have been."""


@pytest.mark.parametrize(
    ("device", "gpus", "visible", "torchrun"),
    [("cuda", [2, 5], "2,5", True), ("cuda", [3], "3", False), ("cpu", [0, 1], "", False)],
)
def test_the_trainer_child_sees_exactly_the_configured_gpus(
    tmp_path, tiny_model_dir, monkeypatch, device, gpus, visible, torchrun
):
    from prover_assets.sft import stages
    from prover_assets_tests.records.test_consumers import completed

    def spawn(argv, **popen):
        raise Launched(argv, popen["env"]["CUDA_VISIBLE_DEVICES"])

    monkeypatch.setattr(stages, "spawn_tied", spawn)
    with pytest.raises(Launched) as launched:
        materialize_checkpoint(
            tmp_path / "checkpoint",
            shards_dir=completed(tmp_path / "shards", {"rows.jsonl": b""}),
            base_model_dir=tiny_model_dir,
            base_revision="tiny",
            training=registered(gpus=gpus, lora_r=4, tokens_per_micro_batch=256),
            device=device,
        )
    argv, seen = launched.value.args
    assert seen == visible
    assert ("torch.distributed.run" in argv) == torchrun
    if torchrun:
        assert f"--nproc-per-node={len(gpus)}" in argv
    run = json.loads((tmp_path / "checkpoint" / "run.json").read_text())
    assert run["ranks"] == (len(gpus) if device == "cuda" else 1)
