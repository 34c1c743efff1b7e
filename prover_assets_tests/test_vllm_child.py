"""The vLLM child's loop, on a continuous-batching double of vLLM's engine: every request fed
at once, each result written as it finishes, durable every `commit_every`."""

import json
import os

from prover_assets.generation.vllm_child import stream_results
from prover_assets_tests.doubles.step_engine import ContinuousBatchingDouble


def step_requests(lengths: list[int]) -> list[dict]:
    return [
        {"key": ["p1", i, 0, 64], "prompt_ids": [1, 2], "max_tokens": 64, "seed": i}
        for i in range(len(lengths))
    ]


def test_the_vllm_child_feeds_every_request_at_once_and_writes_each_as_it_finishes(
    monkeypatch, tmp_path
):
    lengths = [50, 3, 3, 3, 3]  # the first is long: a chunk of all five would wait for it
    engine = ContinuousBatchingDouble(
        lambda request_id, prompt, params: lengths[int(request_id)], max_num_seqs=2
    )
    path = tmp_path / "results.jsonl"
    durable: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(
        os, "fsync", lambda fd: (durable.append(path.read_text().count("\n")), real_fsync(fd))
    )
    with open(path, "a", encoding="utf-8") as out:
        written = stream_results(
            engine,
            step_requests(lengths),
            lambda r: {"max_tokens": r["max_tokens"]},
            out,
            commit_every=2,
        )
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert written == 5
    assert [row["key"][1] for row in rows] == [1, 2, 3, 4, 0]  # the short ones do not wait
    assert [len(row["completion_ids"]) for row in rows] == [3, 3, 3, 3, 50]
    assert durable == [2, 4, 5]  # every two results, then the end
    assert engine.steps == 50  # the long one decodes from the first step to the last


def test_a_completion_that_reaches_max_tokens_is_a_length_finish(tmp_path):
    engine = ContinuousBatchingDouble(lambda *args: 1000, max_num_seqs=4)
    path = tmp_path / "results.jsonl"
    with open(path, "a", encoding="utf-8") as out:
        stream_results(
            engine, step_requests([1000]), lambda r: {"max_tokens": 64}, out, commit_every=8
        )
    (row,) = [json.loads(line) for line in path.read_text().splitlines()]
    assert (len(row["completion_ids"]), row["finish_reason"]) == (64, "length")


def test_advancing_to_the_next_finish_keeps_the_step_by_step_schedule_and_clock():
    lengths = [7, 2, 5, 9, 1, 4]

    def run(move: str) -> tuple[list[tuple[str, int]], int, float, int]:
        double = ContinuousBatchingDouble(
            lambda request_id, prompt, params: lengths[int(request_id)], max_num_seqs=3
        )
        for i in range(len(lengths)):
            double.add_request(str(i), None, {"max_tokens": 100})
        finished = []
        while double.has_unfinished_requests():
            finished += [(o.request_id, double.steps) for o in getattr(double, move)()]
        return finished, double.steps, double.now_s, double.busy_slot_steps

    stepped = run("step")
    assert run("advance") == stepped
    # By hand: slots {0,1,2}; 1 ends at 2, 3 joins; 2 ends at 5, 4 joins and ends at 6, 5 joins;
    # 0 ends at 7; 5 ends at 10; 3 ends at 11.
    assert stepped[0] == [("1", 2), ("2", 5), ("4", 6), ("0", 7), ("5", 10), ("3", 11)]
