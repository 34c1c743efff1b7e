"""A training loop's progress: the rates it shows, and the tail that reads a child's lines."""

from prover_assets.records.progress import LineTail, TrainingProgress


def test_rates_count_only_the_steps_and_tokens_of_this_run():
    at = TrainingProgress(step=30, steps=100, loss=0.5, tokens=4000, elapsed_s=20.0, first_step=10)
    # 20 steps (10 were done before the resume) and 4,000 tokens in 20 s
    assert at.steps_per_s() == 1.0
    assert at.tokens_per_s() == 200.0
    assert at.extra() == {"loss": 0.5, "tokens_per_s": 200.0}


def test_a_run_that_has_not_stepped_yet_has_no_rate():
    at = TrainingProgress(step=10, steps=100, loss=None, tokens=0, elapsed_s=3.0, first_step=10)
    assert at.steps_per_s() is None and at.tokens_per_s() is None
    assert at.extra() == {}


def test_the_tail_returns_each_complete_line_once_and_waits_for_a_partial_one(tmp_path):
    path = tmp_path / "progress.jsonl"
    tail = LineTail(path)
    assert tail.new_lines() == []  # no file yet
    path.write_text('{"a": 1}\n{"b": ')
    assert tail.new_lines() == ['{"a": 1}']
    with open(path, "a") as handle:
        handle.write('2}\n{"c": 3}\n')
    assert tail.new_lines() == ['{"b": 2}', '{"c": 3}']
    assert tail.new_lines() == []
