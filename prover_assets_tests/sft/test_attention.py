"""The attention training takes: the named one, or for auto the best that runs; a named one
that cannot run refuses the training."""

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


@pytest.mark.parametrize(("device", "reason"), [("cuda", "does not import"), ("cpu", "CUDA")])
def test_a_named_flash_attention_that_cannot_run_refuses_the_training(monkeypatch, device, reason):
    monkeypatch.setattr(
        attention_module, "flash_attention_import_error", lambda: "ImportError: undefined symbol"
    )
    with pytest.raises(AttentionUnavailable, match=reason):
        attention_implementation(device, "flash_attention_2")
