"""Every causal LM the product loads runs the layer code transformers ships, never Hub kernels."""

import ast
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from prover_assets.generation.engines import TransformersEngine
from prover_assets.model_loading import load_causal_lm
from prover_assets.records import SamplingSettings
from prover_assets.sft.attention import AttentionUnavailable
from prover_assets.sft.export import _load

PACKAGE = Path(__file__).parents[1] / "prover_assets"


def test_transformers_kernelizes_a_plain_load_by_default(tiny_model_dir):
    # the reason for load_causal_lm: with `kernels` installed (transformers requires it), a
    # plain load asks for Hub kernels; on CUDA they replace RMSNorm and the rotary embedding
    assert AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).use_kernels


def test_a_loaded_model_asks_for_no_hub_kernels_even_when_trained(tiny_model_dir):
    model = load_causal_lm(tiny_model_dir, torch.float32)
    assert model.use_kernels is False
    model.train()  # transformers kernelizes again on a change of mode when kernels are on
    assert model.use_kernels is False


def test_the_dtype_and_the_options_given_reach_the_load(tiny_model_dir):
    model = load_causal_lm(tiny_model_dir, torch.bfloat16, attn_implementation="eager")
    assert {parameter.dtype for parameter in model.parameters()} == {torch.bfloat16}
    assert model.config._attn_implementation == "eager"  # the tiny model's own default: sdpa


def test_a_hub_kernel_put_in_place_of_the_attention_asked_for_is_refused(
    tiny_model_dir, monkeypatch
):
    import transformers.modeling_utils

    # transformers' own substitution, the Hub's answer stubbed: with flash_attn missing and
    # kernels installed it loads kernels-community/flash-attn2 for flash_attention_2
    monkeypatch.setattr(
        transformers.modeling_utils, "lazy_import_flash_attention", lambda *a, **k: None
    )
    with pytest.raises(AttentionUnavailable) as refused:
        load_causal_lm(tiny_model_dir, torch.float32, attn_implementation="flash_attention_2")
    assert str(refused.value) == (
        "asked transformers for flash_attention_2 attention and it loaded "
        "kernels-community/flash-attn2 in its place (its own check found no usable flash_attn): "
        "install the flash-attn wheel built for this torch and CUDA (README, GPU setup), or set "
        "training.attention: sdpa"
    )


def test_the_export_and_the_transformers_engine_load_without_hub_kernels(tiny_model_dir):
    assert _load(tiny_model_dir, "float32", "cpu").use_kernels is False
    engine = TransformersEngine(
        tiny_model_dir, SamplingSettings(temperature=1.0, top_p=1.0, top_k=0)
    )
    assert engine.model.use_kernels is False


def from_pretrained_calls(path: Path) -> list[int]:
    """Lines of `path` that call `AutoModelForCausalLM.from_pretrained`."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "from_pretrained"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "AutoModelForCausalLM"
    ]


def test_no_module_but_model_loading_loads_a_causal_lm_itself():
    callers = {
        str(path.relative_to(PACKAGE)): lines
        for path in sorted(PACKAGE.rglob("*.py"))
        if (lines := from_pretrained_calls(path))
    }
    # The demo's format tuning runs on the CPU alone, where no Hub kernel maps to a layer, and
    # its module's bytes key the shipped tunings (tuning_recipe): it loads the tiny model itself.
    assert list(callers) == ["demo/tiny_model.py", "model_loading.py"]
