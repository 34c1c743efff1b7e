"""The tiny model through the whole generation path on CPU: engine, runner, contract, resume."""

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from prover_assets.config import ConfigError
from prover_assets.generation.engines import GenerationRequest, TransformersEngine
from prover_assets.generation.prompts import render_prompt, round0_messages
from prover_assets.generation.runner import (
    SampleSpec,
    generate_samples,
    round0_specs,
    sample_seed,
)
from prover_assets.generation.stages import GENERATIONS_FILE, Samples, materialize_generations
from prover_assets.records import (
    Appender,
    Generation,
    Message,
    SampleKey,
    SamplingSettings,
    read_records,
)
from prover_assets.records.usage import recorded_earlier_attempts
from prover_assets.report.cost import generation_work
from prover_assets_tests.factories import STATEMENT, make_opening, make_problem

SAMPLING = SamplingSettings(temperature=1.0, top_p=0.95, top_k=0)


@pytest.fixture(scope="module")
def engine(tiny_model_dir):
    return TransformersEngine(tiny_model_dir, SAMPLING)


def prompt_ids(engine):
    return render_prompt(engine.tokenizer, round0_messages(make_problem().formal_statement))[1]


def test_same_seed_reproduces_a_sample_and_other_seeds_differ(engine):
    ids = tuple(prompt_ids(engine))
    requests = [
        GenerationRequest(("a",), ids, 24, 7),
        GenerationRequest(("b",), ids, 24, 7),
        GenerationRequest(("c",), ids, 24, 8),
    ]
    a, b, c = engine.generate(requests)
    assert a.completion_ids == b.completion_ids
    assert a.completion_ids != c.completion_ids


def test_length_finish_has_exactly_max_tokens(engine):
    (result,) = engine.generate([GenerationRequest(("a",), tuple(prompt_ids(engine)), 5, 1)])
    assert result.finish_reason == "length" or result.completion_ids[-1] in engine.eos_ids
    if result.finish_reason == "length":
        assert len(result.completion_ids) == 5


def test_stop_finish_ends_with_eos(engine):
    results = list(
        engine.generate(
            [GenerationRequest((i,), tuple(prompt_ids(engine)), 150, i) for i in range(6)]
        )
    )
    stopped = [r for r in results if r.finish_reason == "stop"]
    assert all(r.completion_ids[-1] in engine.eos_ids for r in stopped)
    assert all(len(r.completion_ids) <= 150 for r in results)


def run(engine, path, problems, *, n=2, cap=16, max_model_len=4096, commit_every=2, specs=None):
    with Appender(path, Generation) as appender:
        return generate_samples(
            specs or round0_specs(problems, n, cap),
            engine,
            engine.tokenizer,
            appender,
            opening=make_opening(
                sampling=SAMPLING, max_model_len=max_model_len, commit_every=commit_every
            ),
        )


def test_every_row_satisfies_the_contract_and_records_the_sample(engine, tmp_path):
    problems = [make_problem("p1"), make_problem("p2")]
    stats = run(engine, tmp_path / "gen.jsonl", problems)
    rows = read_records(tmp_path / "gen.jsonl", Generation)
    assert sorted(r.key for r in rows) == [
        ("p1", 0, 0, 16),
        ("p1", 1, 0, 16),
        ("p2", 0, 0, 16),
        ("p2", 1, 0, 16),
    ]
    row = rows[0]
    text, ids = render_prompt(engine.tokenizer, round0_messages(problems[0].formal_statement))
    assert (row.prompt_text, row.prompt_ids) == (text, ids)
    assert row.sampling.seed == sample_seed(1, row.key)
    # every field the transformers engine passed, none left to its own defaults (top_k 50)
    assert row.sampling.values == (1.0, 0.95, 0, 0.0, 1.0, 0.0, 0.0)
    assert stats.generated_now == 4


def test_context_window_clips_max_tokens_and_records_it(engine, tmp_path):
    problem = make_problem()
    window = len(prompt_ids(engine)) + 10
    run(engine, tmp_path / "gen.jsonl", [problem], n=1, cap=16, max_model_len=window)
    (row,) = read_records(tmp_path / "gen.jsonl", Generation)
    assert (row.sampling.max_tokens, row.context_clipped) == (10, True)


def test_a_round0_prompt_without_room_is_a_config_error_before_anything_is_written(
    engine, tmp_path
):
    long_statement = STATEMENT.replace("0 < x + 1", " + ".join(["x"] * 60) + " > 0")
    fits, too_long = make_problem("fits"), make_problem("long", long_statement)
    window = len(prompt_ids(engine)) + 4
    with pytest.raises(ConfigError, match=r"'long'.*max_model_len to at least"):
        run(engine, tmp_path / "gen.jsonl", [fits, too_long], n=1, max_model_len=window)
    assert read_records(tmp_path / "gen.jsonl", Generation) == []


def test_a_correction_prompt_without_room_is_recorded_and_counted(engine, tmp_path):
    problem = make_problem()
    window = len(prompt_ids(engine)) + 4
    long_feedback = (
        Message(role="user", content=problem.formal_statement),
        Message(role="assistant", content="attempt " * 100),
        Message(role="user", content="error " * 100),
    )
    parent = SampleKey(problem_id=problem.problem_id, sample_idx=0, round=0, cap_tokens=16)
    specs = [SampleSpec(problem, i, 1, 16, long_feedback, parent) for i in range(2)]
    stats = run(engine, tmp_path / "gen.jsonl", [], max_model_len=window, specs=specs)
    rows = read_records(tmp_path / "gen.jsonl", Generation)
    assert stats.no_room == 2
    assert [(r.finish_reason, r.completion_ids, r.lean_code) for r in rows] == [
        ("no_room", [], None)
    ] * 2


def test_rerun_generates_only_missing_keys(engine, tmp_path):
    path = tmp_path / "gen.jsonl"
    run(engine, path, [make_problem("p1")])
    stats = run(engine, path, [make_problem("p1"), make_problem("p2")])
    assert (stats.already_present, stats.generated_now) == (2, 2)
    assert len(read_records(path, Generation)) == 4


KILL_SCRIPT = """
import sys
sys.path.insert(0, {root!r})
from pathlib import Path
from prover_assets.records import outputs
from prover_assets_tests.generation.test_runner import generation_step
outputs.JOURNAL_EVERY_S = 0.1  # records the killed attempt's usage up to its last tenth
generation_step(Path({folder!r}), Path({model!r}), halt_after={halt_after})
"""
# The killed step stops (sleeps) before its third problem, so the kill always lands
# mid-stream: a poll that watched the stream race the model ended past the last sample
# on a loaded CI machine (12 of 12 written before the kill).
HALT_AFTER = 6


class HaltingEngine(TransformersEngine):
    """The tiny model's engine, which stops for good after its first `halt_after` results:
    where the killed process is when the kill comes, whatever the machine's speed."""

    def __init__(self, model: Path, halt_after: int):
        super().__init__(model, SAMPLING)
        self.halt_after = halt_after

    def generate(self, requests):
        for done, result in enumerate(super().generate(requests)):
            if done == self.halt_after:
                time.sleep(3600)
            yield result


def generation_step(folder: Path, model: Path, halt_after: int | None = None):
    """The generation step of 4 problems x 3 samples on the tiny model, committing every
    sample: a whole step, with its manifest, its usage and its attempt journal; with
    `halt_after`, a step that stops for good after that many samples, to be killed."""
    problems = [make_problem(f"p{i}") for i in range(4)]

    def engine() -> TransformersEngine:  # loaded inside the step: its usage counts the load
        if halt_after is None:
            return TransformersEngine(model, SAMPLING)
        return HaltingEngine(model, halt_after)

    return materialize_generations(
        folder,
        Samples(round0_specs(problems, 3, 24), {}, samples_per_problem=3),
        opening=make_opening(model_path=model, sampling=SAMPLING, commit_every=1),
        open_engine=lambda opening: contextlib.nullcontext(engine()),
        load_tokenizer=lambda _: None,
    )


@pytest.mark.slow
def test_kill_9_mid_stream_then_resume_loses_and_doubles_nothing(tiny_model_dir, tmp_path):
    killed, clean = tmp_path / "killed", tmp_path / "clean"
    stream = killed / GENERATIONS_FILE
    script = KILL_SCRIPT.format(
        root=str(Path(__file__).parents[2]),
        folder=str(killed),
        model=str(tiny_model_dir),
        halt_after=HALT_AFTER,
    )
    process = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (
        not stream.exists() or stream.read_bytes().count(b"\n") < HALT_AFTER
    ):
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    partial = stream.read_bytes().count(b"\n")
    assert partial == HALT_AFTER
    # The rerun resumes the killed step; `clean` is the same step uninterrupted. Both in this
    # process: the killed process's folder is all a rerun reads, whatever process reads it.
    resumed_step, clean_step = (generation_step(f, tiny_model_dir) for f in (killed, clean))
    resumed = {r.key: r for r in read_records(stream, Generation)}
    reference = {r.key: r for r in read_records(clean / GENERATIONS_FILE, Generation)}
    assert len(resumed) == 12
    assert resumed == reference  # per-sample seeds: the resumed run equals an uninterrupted one
    # the sums the report's cost section makes: the work of every attempt, each sample once,
    # equal to the uninterrupted step's; the killed attempt's usage apart, as waste
    assert generation_work(stream) == generation_work(clean / GENERATIONS_FILE)
    work = generation_work(stream)
    assert (work.samples, work.completion_tokens) == (
        12,
        sum(len(r.completion_ids) for r in reference.values()),
    )
    assert resumed_step.result.already_present == partial
    (killed_attempt,) = recorded_earlier_attempts(resumed_step.manifest)
    assert killed_attempt.ended is None  # no end recorded: killed
    assert killed_attempt.attempt.endswith(f"-{process.pid}")
    # what it had used by its last record: the model's load and its samples, a lower bound
    assert killed_attempt.usage.wall_s > 0.2 and killed_attempt.usage.cpu_s > 0.2
    assert recorded_earlier_attempts(clean_step.manifest) == []
