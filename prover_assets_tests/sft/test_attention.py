"""The attention training takes: the named one, or for auto the best that runs; a named one
that cannot run refuses the training."""

import importlib.util

import pytest

import prover_assets.sft.attention as attention_module
from prover_assets.sft.attention import AttentionUnavailable, attention_implementation


@pytest.mark.parametrize(
    ("device", "wanted", "imports", "chosen"),
    [
        ("cuda", "auto", True, "flash_attention_2"),
        ("cuda", "auto", False, "sdpa"),
        ("cuda", "flash_attention_2", True, "flash_attention_2"),
        ("cuda", "sdpa", True, "sdpa"),
        ("cpu", "auto", True, "sdpa"),
        ("cpu", "sdpa", False, "sdpa"),
    ],
)
def test_the_trainer_takes_the_named_attention_or_for_auto_the_best_that_runs(
    monkeypatch, device, wanted, imports, chosen
):
    error = None if imports else "ImportError: undefined symbol"
    monkeypatch.setattr(attention_module, "flash_attention_import_error", lambda: error)
    assert attention_implementation(device, wanted) == chosen


def test_a_named_flash_attention_without_cuda_refuses_the_training_and_says_why(monkeypatch):
    monkeypatch.setattr(attention_module, "flash_attention_import_error", lambda: None)
    with pytest.raises(AttentionUnavailable) as refused:
        attention_implementation("cpu", "flash_attention_2")
    assert str(refused.value) == "training.attention flash_attention_2 needs a CUDA device"


def test_a_named_flash_attention_that_does_not_import_refuses_with_its_error_and_the_ways_out(
    monkeypatch,
):
    monkeypatch.setattr(
        attention_module, "flash_attention_import_error", lambda: "ImportError: undefined symbol"
    )
    with pytest.raises(AttentionUnavailable) as refused:
        attention_implementation("cuda", "flash_attention_2")
    assert str(refused.value) == (
        "training.attention is flash_attention_2 but flash_attn does not import: ImportError: "
        "undefined symbol. Install the flash-attn wheel built for this torch and CUDA (README, "
        "GPU setup), or set training.attention: sdpa (about twice the step time at 18,432 tokens)"
    )


def test_the_import_error_names_the_exception_and_its_message():
    # this machine has no flash_attn (CPU CI never installs it)
    assert importlib.util.find_spec("flash_attn") is None
    assert attention_module.flash_attention_import_error() == (
        "ModuleNotFoundError: No module named 'flash_attn'"
    )
