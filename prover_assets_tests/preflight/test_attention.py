"""The attention a GPU run trains with: named by the config, proved by the preflight, never
replaced without a word."""

from prover_assets.config import parse_run_config
from prover_assets.preflight.attention import attention_check
from prover_assets.preflight.model import CheckStatus
from prover_assets_tests.factories import registered_like
from prover_assets_tests.support import full_demo_run_config


def gpu_config(tmp_path, attention: str):
    """The demo's sections on eight GPUs (vLLM), with `attention`."""
    return registered_like(tmp_path, attention=attention)


def test_a_named_flash_attention_that_does_not_import_fails_the_preflight_with_its_error(
    tmp_path,
):
    # No flash_attn on this CPU box: the registered choice is refused, with the import's error.
    check = attention_check(gpu_config(tmp_path, "flash_attention_2"))
    assert check.status == CheckStatus.FAILED
    assert check.measured == (
        "flash_attn does not import or run: ModuleNotFoundError: No module named 'flash_attn'"
    )
    assert "training.attention: sdpa" in check.remedy


def test_auto_on_a_gpu_without_flash_attention_says_it_would_fall_back(tmp_path):
    check = attention_check(gpu_config(tmp_path, "auto"))
    assert check.status == CheckStatus.FAILED
    assert "(auto would fall back to SDPA)" in check.measured


def test_sdpa_named_passes_and_states_its_cost(tmp_path):
    check = attention_check(gpu_config(tmp_path, "sdpa"))
    assert check.status == CheckStatus.PASSED
    assert "about twice the step time" in check.measured


def test_on_cpu_the_check_does_not_apply(tmp_path):
    raw = full_demo_run_config(tmp_path / "data")
    check = attention_check(parse_run_config(raw, "test config"))
    assert check.status == CheckStatus.NOT_APPLICABLE
