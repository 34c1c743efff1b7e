"""The context window against the round's prompts: room for each cap below the largest, and for a
completion at all at the largest (where the window clamps by design)."""

from __future__ import annotations

import pytest
import yaml

from prover_assets.config import load_run_config, parse_experiment_spec, parse_run_config
from prover_assets.preflight.context import (
    LongestPrompt,
    context_check,
    context_faults,
    correction_rows_note,
    longest_prompts,
)
from prover_assets.preflight.model import CheckStatus
from prover_assets_tests.support import CONFIGS


def demo_raw(**changes) -> dict:
    """configs/demo.yaml as a run-config dict, sections of its spec updated with `changes`."""
    raw = yaml.safe_load((CONFIGS / "demo.yaml").read_text())
    spec = raw["resources"]["experiment"]["config"]["spec"]
    for section, values in changes.items():
        spec[section].update(values)
    return raw


def demo_spec(**changes):
    return parse_experiment_spec(demo_raw(**changes)["resources"]["experiment"]["config"]["spec"])


# window 600, caps 128 and 256 (the largest): a prompt of t tokens needs t + 128 <= 600 for the
# smaller cap, and t < 600 for a completion at the largest
@pytest.mark.parametrize(
    ("tokens", "expected"),
    [
        (400, []),
        (472, []),  # 472 + 128 = 600: exactly the window
        (473, ["minif2f 'p1' (473-token prompt) with cap 128 needs 601 > model.max_model_len 600"]),
        (599, ["minif2f 'p1' (599-token prompt) with cap 128 needs 727 > model.max_model_len 600"]),
        (
            600,
            [
                "minif2f 'p1' (600-token prompt) leaves no room for a completion in "
                "model.max_model_len 600"
            ],
        ),
    ],
)
def test_a_prompt_needs_room_for_each_cap_below_the_largest_and_a_completion_at_it(
    tokens, expected
):
    spec = demo_spec(model={"max_model_len": 600}, generation={"caps": [128, 256]})
    assert context_faults(spec, [LongestPrompt("minif2f", "p1", tokens)]) == expected


def test_only_the_caps_an_eval_set_is_sampled_at_are_held_to_the_window():
    spec = demo_spec(
        model={"max_model_len": 600},
        generation={"caps": [128, 256]},
        eval_sets={
            "minif2f": {
                **demo_raw()["resources"]["experiment"]["config"]["spec"]["eval_sets"]["minif2f"],
                "caps": [256],
            }
        },
    )  # minif2f at the largest cap only: clamped by design
    assert context_faults(spec, [LongestPrompt("minif2f", "p1", 599)]) == []


def test_the_longest_prompt_is_among_the_problems_the_limit_keeps(tiny_model_dir):
    from transformers import AutoTokenizer

    from prover_assets.config import resolve_path
    from prover_assets.generation.prompts import round0_messages
    from prover_assets.problems.eval_sets import load_minif2f

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    spec = demo_spec(eval_sets={})
    spec = spec.model_copy(
        update={"eval_sets": {"minif2f": spec.eval_sets["minif2f"].model_copy(update={"limit": 3})}}
    )
    problems = load_minif2f(resolve_path(spec.eval_sets["minif2f"].file.path, "minif2f"))[:3]
    lengths = {
        p.problem_id: len(
            tokenizer.apply_chat_template(
                [m.model_dump() for m in round0_messages(p.formal_statement)],
                tokenize=True,
                add_generation_prompt=True,
            )["input_ids"]
        )
        for p in problems
    }
    (longest,) = longest_prompts(spec, tokenizer)
    assert (longest.eval_set, longest.tokens) == ("minif2f", max(lengths.values()))
    assert lengths[longest.problem_id] == longest.tokens


def test_a_window_too_small_for_the_eval_prompts_fails_the_check_naming_the_problem(
    tiny_model_dir,
):
    raw = demo_raw(model={"max_model_len": 300})  # the demo's prompts are about 330 tokens
    check = context_check(parse_run_config(raw, "test"), tiny_model_dir)
    assert check.status is CheckStatus.FAILED
    assert "leaves no room for a completion in model.max_model_len 300" in check.measured
    assert check.figures["longest_prompt_tokens"] >= 300


def test_the_demo_config_passes_naming_its_longest_prompt(tiny_model_dir):
    check = context_check(load_run_config(CONFIGS / "demo.yaml"), tiny_model_dir)
    assert check.status is CheckStatus.PASSED, check.measured
    assert check.measured.startswith("longest round-0 prompts in tokens: minif2f ")


# the demo: sft.cap 256, sft.max_seq_len 1024, one correction round; a correction row reaches the
# longest prompt + 2 x 256 tokens and Lean's errors
@pytest.mark.parametrize(("prompt", "said"), [(512, False), (513, True)])
def test_correction_rows_the_limit_will_drop_are_said_before_the_round(prompt, said):
    note = correction_rows_note(demo_spec(), [LongestPrompt("minif2f", "p1", prompt)])
    assert (note is not None) == said
    if said:
        assert note.startswith(f"correction rows can reach {prompt + 512} tokens and more")
        assert "above sft.max_seq_len 1024: those are dropped from SFT as too_long" in note


def test_without_correction_rounds_nothing_is_said_of_correction_rows():
    spec = demo_spec(corrections={"rounds": 0})
    assert correction_rows_note(spec, [LongestPrompt("minif2f", "p1", 900)]) is None
