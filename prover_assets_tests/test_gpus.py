"""`training.gpus` on the box a step runs on: `all` takes every GPU this process sees, a list
is used as listed, and CPU training has no GPU and one rank."""

from __future__ import annotations

import pytest

from prover_assets import gpus
from prover_assets_tests.factories import training_spec


@pytest.fixture
def box_with(monkeypatch):
    def visible(count: int) -> None:
        monkeypatch.setattr(gpus, "visible_gpu_count", lambda: count)

    return visible


def test_all_trains_on_every_gpu_this_box_has(box_with):
    box_with(4)
    training = training_spec(gpus="all", gradient_accumulation=8)
    assert gpus.training_gpus(training, "cuda") == [0, 1, 2, 3]
    assert gpus.training_ranks(training, "cuda") == 4


def test_a_box_given_by_its_gpu_count_is_used_instead_of_this_one(box_with):
    box_with(0)
    training = training_spec(gpus="all", gradient_accumulation=8)
    assert gpus.training_ranks(training, "cuda", visible=8) == 8


def test_a_listed_set_of_gpus_never_asks_the_box(box_with):
    box_with(-1)  # asked, it would be refused
    training = training_spec(gpus=[1, 3], gradient_accumulation=8)
    assert gpus.training_gpus(training, "cuda") == [1, 3]


def test_training_on_cpu_has_no_gpu_and_one_rank(box_with):
    box_with(8)
    training = training_spec(gpus="all", gradient_accumulation=8)
    assert gpus.training_gpus(training, "cpu") == []
    assert gpus.training_ranks(training, "cpu") == 1


def test_this_cpu_box_sees_no_gpu():
    assert gpus.visible_gpu_count() == 0


@pytest.mark.parametrize(("available", "count", "seen"), [(True, 2, 2), (False, 3, 0)])
def test_the_box_counts_the_cuda_devices_only_where_cuda_is_available(
    monkeypatch, available, count, seen
):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: available)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
    assert gpus.visible_gpu_count() == seen
