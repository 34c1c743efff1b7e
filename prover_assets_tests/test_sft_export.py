"""Export: merged weights in a plain HF folder, revision from the weights, logprob parity."""

import json

import numpy as np
import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

from prover_assets.config import TrainingSpec
from prover_assets.generation.revision import model_revision, weights_sha256
from prover_assets.records import SftRow
from prover_assets.sft.export import export_merged
from prover_assets.sft.shards import ShardWriter
from prover_assets.sft.stages import parity_inputs
from prover_assets.sft.trainer import FINAL_ADAPTER, TrainRun, train
from prover_assets_tests.conftest import gpu_missing


@pytest.fixture(scope="module")
def exported(tmp_path_factory, tiny_model_dir):
    root = tmp_path_factory.mktemp("export")
    rng = np.random.default_rng(2)
    writer = ShardWriter(root / "shards")
    for i in range(8):
        ids = rng.integers(3, 1000, 40).tolist()
        writer.write_row(
            SftRow(
                input_ids=ids,
                prompt_len=25,
                kind="first",
                round=0,
                sample_idx=i,
                cap_tokens=64,
                n_completion=15,
                proof_sha="b" * 64,
                model_rev="r",
                problem_id=f"p{i}",
            )
        )
    writer.close()
    spec = TrainingSpec(
        lora_r=4,
        lora_alpha=8,
        lora_dropout=0.0,
        target_modules=["q_proj", "v_proj"],
        learning_rate=5e-3,
        lr_scheduler="constant",
        warmup_ratio=0.0,
        epochs=2,
        tokens_per_micro_batch=128,
        gradient_accumulation=1,
        save_every=4,
        keep_checkpoints=2,
        seed=1,
        pad_token_id=None,
        precision="fp32",
    )
    run = TrainRun(
        shards_dir=str(root / "shards"),
        base_model_dir=str(tiny_model_dir),
        output_dir=str(root / "train"),
        training=spec.model_dump(mode="json"),
        device="cpu",
    )
    assert train(run)["status"] == "done"
    result = export_merged(
        tiny_model_dir,
        root / "train" / FINAL_ADAPTER,
        root / "export" / "model",
        parity_inputs=parity_inputs(root / "shards"),
    )
    return root / "export" / "model", result


def test_revision_is_sft_and_the_sha256_of_the_weight_shards(exported):
    folder, result = exported
    assert result.revision == f"sft-{weights_sha256(folder)}"
    assert model_revision(folder) == result.revision


def test_reloaded_export_reproduces_the_adapter_models_logprobs(exported):
    _, result = exported
    assert result.parity_passed
    assert result.parity_max_abs_diff <= 2e-5
    assert result.parity_tokens > 0


def test_export_is_a_plain_folder_with_tokenizer_and_chat_template(exported):
    folder, _ = exported
    model = AutoModelForCausalLM.from_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert not any("lora" in name for name, _ in model.named_parameters())
    assert tokenizer.chat_template
    assert json.loads((folder / "config.json").read_text())["model_type"] == "qwen3"


def test_the_adapter_changed_the_model(exported, tiny_model_dir):
    """A parity check on an unchanged model would prove nothing: the merge must differ from the base."""
    import torch

    folder, _ = exported
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir).state_dict()
    merged = AutoModelForCausalLM.from_pretrained(folder).state_dict()
    assert any(not torch.equal(base[name], merged[name]) for name in base if "q_proj" in name)


@pytest.mark.gpu
@pytest.mark.skipif(gpu_missing() is not None, reason=gpu_missing() or "")
def test_vllm_loads_the_export_and_matches_its_first_token_logprobs(exported):
    import torch
    from vllm import LLM, SamplingParams

    folder, _ = exported
    prompts = [ids[:48] for ids in parity_inputs(folder.parents[1] / "shards")]
    llm = LLM(
        model=str(folder), dtype="float32", enforce_eager=True, gpu_memory_utilization=0.3, seed=0
    )
    outputs = llm.generate(
        [{"prompt_token_ids": p} for p in prompts],
        SamplingParams(max_tokens=1, temperature=0, logprobs=5),
    )
    del llm
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).to("cuda").eval()
    for prompt, output in zip(prompts, outputs, strict=True):
        with torch.no_grad():
            logits = model(torch.tensor([prompt], device="cuda")).logits[0, -1]
        expected = torch.log_softmax(logits.float(), -1)
        for token, entry in output.outputs[0].logprobs[0].items():
            assert entry.logprob == pytest.approx(float(expected[token]), abs=1e-3)
