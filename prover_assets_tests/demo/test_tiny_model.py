"""The tiny model is a normal Hugging Face folder: loaded by the Auto classes, Qwen-shaped."""

from transformers import AutoModelForCausalLM, AutoTokenizer

from prover_assets.demo.tiny_model import EOS_TOKEN
from prover_assets.generation.revision import model_revision, weights_sha256


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


STATEMENTS = [
    "theorem a (x : ℕ) : x + 0 = x := by sorry",
    "theorem b (x : ℝ) (h : 0 < x) : 0 ≤ x := by sorry",
    "theorem c : (2 : ℕ) + 2 = 4 := by sorry",
    "theorem d (n : ℤ) : n - n = 0 := by sorry",
    "theorem e (y : ℚ) : y * 1 = y := by sorry",
]
# The closing tactic's name in each taught completion (written out here).
TACTIC_NAMES = {"nlinarith", "norm_num", "omega", "simp_all", "linarith", "positivity"}


def closing_name(text: str) -> str:
    return text.rsplit("```", 2)[-2].strip().split("\n")[-1].split()[0]


def test_the_format_corpus_closes_each_statement_once_with_each_tactic_and_corrects_it_once(
    tiny_model_dir,
):
    from transformers import AutoTokenizer

    from prover_assets.demo.tiny_model import _format_examples

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    examples = _format_examples(tokenizer, STATEMENTS)
    per_statement = len(TACTIC_NAMES) + 1
    assert len(examples) == len(STATEMENTS) * per_statement
    fixes = []
    for index in range(len(STATEMENTS)):
        block = examples[index * per_statement : (index + 1) * per_statement]
        texts = [tokenizer.decode(c, skip_special_tokens=True) for _, c in block]
        assert {closing_name(t) for t in texts[:-1]} == TACTIC_NAMES
        correction_prompt = tokenizer.decode(block[-1][0])
        assert "Error Message:" in correction_prompt
        failed = correction_prompt.split("Error Message: ")[1].split()[0]
        assert closing_name(texts[-1]) != failed
        fixes.append(closing_name(texts[-1]))
        assert all(STATEMENTS[index].removesuffix(" := by sorry") in t for t in texts)
    assert len(set(fixes)) > 1  # the answers to corrections vary from statement to statement


def test_format_tuning_visits_every_example_equally_often():
    import torch

    from prover_assets.demo.tiny_model import _epochs

    order = _epochs(7, 7 * 3 + 2, torch.Generator().manual_seed(1))
    counts = [order.count(i) for i in range(7)]
    assert len(order) == 23 and sorted(counts) == [3, 3, 3, 3, 3, 4, 4]
