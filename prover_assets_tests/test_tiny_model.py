"""The tiny model is a normal Hugging Face folder: loaded by the Auto classes, Qwen-shaped."""

from transformers import AutoModelForCausalLM, AutoTokenizer

from prover_assets.generation.revision import model_revision, weights_sha256
from prover_assets.generation.tiny_model import EOS_TOKEN


def test_loads_with_auto_classes_as_qwen3(tiny_model_dir):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    assert model.config.model_type == "qwen3"
    assert tokenizer.eos_token == EOS_TOKEN
    assert model.config.vocab_size == len(tokenizer)


def test_chat_template_is_qwen_style(tiny_model_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_tokenizer_round_trips_lean_text(tiny_model_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    text = "theorem t (x : ℝ) (h₀ : 0 < x) : x ^ 2 > 0 := by\n  positivity"
    assert tokenizer.decode(tokenizer(text)["input_ids"]) == text


def test_revision_is_derived_from_the_weight_shards(tiny_model_dir):
    assert model_revision(tiny_model_dir) == f"tiny-{weights_sha256(tiny_model_dir)}"
