"""The vLLM child's loop, on a continuous-batching double of vLLM's engine: every request fed
at once, each result written as it finishes, durable every `commit_every`; final-only outputs;
an aborted request added again, never recorded as a completion; the served model named."""

import json
import os
import sys

import pytest
from pydantic import ValidationError

from prover_assets.generation import vllm_child
from prover_assets.generation.vllm_child import EngineAborted, stream_results
from prover_assets.records import SamplingSettings
from prover_assets_tests.doubles.step_engine import ContinuousBatchingDouble
from prover_assets_tests.doubles.vllm_package.vllm.sampling_params import (
    RequestOutputKind,
    SamplingParams,
)
from prover_assets_tests.generation.test_vllm_engine import FAKE_VLLM, spec_of, vllm_spec

FINAL_ONLY = RequestOutputKind.FINAL_ONLY


def step_requests(lengths: list[int]) -> list[dict]:
    return [
        {"key": ["p1", i, 0, 64], "prompt_ids": [1, 2], "max_tokens": 64, "seed": i}
        for i in range(len(lengths))
    ]


def final_only(request: dict) -> SamplingParams:
    return SamplingParams(
        max_tokens=request["max_tokens"], seed=request["seed"], output_kind=FINAL_ONLY
    )


def stream(engine, requests, path, *, commit_every=8, abort_retries=2, params_of=final_only):
    with open(path, "a", encoding="utf-8") as out:
        written = stream_results(
            engine,
            requests,
            params_of,
            out,
            commit_every=commit_every,
            abort_retries=abort_retries,
        )
    return written, [json.loads(line) for line in path.read_text().splitlines()]


def test_the_vllm_child_feeds_every_request_at_once_and_writes_each_as_it_finishes(
    monkeypatch, tmp_path
):
    lengths = [50, 3, 3, 3, 3]  # the first is long: a chunk of all five would wait for it
    engine = ContinuousBatchingDouble(
        lambda request_id, prompt, params: lengths[params.seed], max_num_seqs=2
    )
    path = tmp_path / "results.jsonl"
    durable: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(
        os, "fsync", lambda fd: (durable.append(path.read_text().count("\n")), real_fsync(fd))
    )
    written, rows = stream(engine, step_requests(lengths), path, commit_every=2)
    assert written == 5
    assert [row["key"][1] for row in rows] == [1, 2, 3, 4, 0]  # the short ones do not wait
    assert [len(row["completion_ids"]) for row in rows] == [3, 3, 3, 3, 50]
    assert durable == [2, 4, 5]  # every two results, then the end
    assert engine.steps == 50  # the long one decodes from the first step to the last


def test_a_completion_that_reaches_max_tokens_is_a_length_finish(tmp_path):
    engine = ContinuousBatchingDouble(lambda *args: 1000, max_num_seqs=4)
    _, (row,) = stream(engine, step_requests([1000]), tmp_path / "results.jsonl")
    assert (len(row["completion_ids"]), row["finish_reason"]) == (64, "length")


def test_each_row_records_the_sampling_its_params_carried(tmp_path):
    engine = ContinuousBatchingDouble(lambda *args: 4, max_num_seqs=4)

    def params_of(request: dict) -> SamplingParams:
        return SamplingParams(
            temperature=0.7, top_p=0.9, top_k=20, min_p=0.05, repetition_penalty=1.1,
            max_tokens=64, seed=request["seed"], output_kind=FINAL_ONLY,
        )  # fmt: skip

    _, (row,) = stream(engine, step_requests([4]), tmp_path / "r.jsonl", params_of=params_of)
    assert row["sampling"] == {
        "temperature": 0.7,
        "top_p": 0.9,
        "top_k": 20,
        "min_p": 0.05,
        "repetition_penalty": 1.1,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
    }


def test_cumulative_outputs_build_one_output_per_running_request_per_step(tmp_path):
    """The double is no kinder than vLLM: without FINAL_ONLY every step builds outputs."""
    lengths = [5, 3]

    def cumulative(request: dict) -> SamplingParams:
        return SamplingParams(max_tokens=64, seed=request["seed"])  # vLLM's default kind

    engine = ContinuousBatchingDouble(lambda r, p, params: lengths[params.seed], max_num_seqs=2)
    written, rows = stream(
        engine, step_requests(lengths), tmp_path / "c.jsonl", params_of=cumulative
    )
    assert engine.outputs_built == 5 + 3  # request 0 at steps 1..5, request 1 at steps 1..3
    assert (written, [len(row["completion_ids"]) for row in rows]) == (2, [3, 5])
    engine = ContinuousBatchingDouble(lambda r, p, params: lengths[params.seed], max_num_seqs=2)
    stream(engine, step_requests(lengths), tmp_path / "f.jsonl")
    assert engine.outputs_built == 2  # one each, when it finishes


def test_an_aborted_request_is_added_again_with_its_seed_and_never_written_as_stop(
    tmp_path, capsys
):
    lengths = [4, 1, 5]  # request 1 finishes in the step where request 0 first aborts

    def run(aborting: set[str], path):
        engine = ContinuousBatchingDouble(
            lambda r, p, params: lengths[params.seed],
            max_num_seqs=2,
            aborts=lambda request_id, prompt, params: request_id in aborting,
        )
        return engine, *stream(engine, step_requests(lengths), path)

    engine, written, rows = run({"0.0", "0.1"}, tmp_path / "aborted.jsonl")  # twice, then done
    _, _, clean = run(set(), tmp_path / "clean.jsonl")
    assert written == 3
    assert sorted(map(json.dumps, rows)) == sorted(map(json.dumps, clean))
    assert {row["finish_reason"] for row in rows} == {"stop"}
    tries = [(request_id, params.seed) for request_id, params in engine.added]
    assert tries == [("0.0", 0), ("1.0", 1), ("2.0", 2), ("0.1", 0), ("0.2", 0)]
    assert capsys.readouterr().out.count("sample ['p1', 0, 0, 64] finished 'abort'; again") == 2


def test_a_request_aborted_past_its_retries_stops_the_child_keeping_what_it_wrote(tmp_path):
    engine = ContinuousBatchingDouble(
        lambda r, p, params: [1, 9][params.seed],
        max_num_seqs=2,
        aborts=lambda request_id, prompt, params: request_id.startswith("1."),
    )
    path = tmp_path / "results.jsonl"
    with pytest.raises(EngineAborted, match=r"\['p1', 1, 0, 64\] finished 'abort' on 3 attempts"):
        stream(engine, step_requests([1, 9]), path, abort_retries=2)
    assert [json.loads(line)["key"][1] for line in path.read_text().splitlines()] == [0]
    assert [request_id for request_id, _ in engine.added] == ["0.0", "1.0", "1.1", "1.2"]


def test_a_served_folder_whose_revision_cannot_be_read_says_why(tmp_path):
    identity = vllm_child.served_identity(str(tmp_path), "not-a-revision")
    assert identity["model_path"] == str(tmp_path)
    assert (
        identity["model_rev"].startswith("unreadable (")
        and "not-a-revision" in identity["model_rev"]
    )


def test_advancing_to_the_next_finish_keeps_the_step_by_step_schedule_and_clock():
    lengths = [7, 2, 5, 9, 1, 4]

    def run(move: str) -> tuple[list[tuple[str, int]], int, float, int, int]:
        double = ContinuousBatchingDouble(
            lambda request_id, prompt, params: lengths[int(request_id)], max_num_seqs=3
        )
        for i in range(len(lengths)):
            double.add_request(str(i), None, {"max_tokens": 100})
        finished = []
        while double.has_unfinished_requests():
            finished += [
                (o.request_id, double.steps) for o in getattr(double, move)() if o.finished
            ]
        return finished, double.steps, double.now_s, double.busy_slot_steps, double.outputs_built

    stepped = run("step")
    assert run("advance") == stepped
    # By hand: slots {0,1,2}; 1 ends at 2, 3 joins; 2 ends at 5, 4 joins and ends at 6, 5 joins;
    # 0 ends at 7; 5 ends at 10; 3 ends at 11.
    assert stepped[0] == [("1", 2), ("2", 5), ("4", 6), ("0", 7), ("5", 10), ("3", 11)]
    assert stepped[4] == sum(lengths)  # cumulative: one output per request per step it ran


@pytest.fixture
def fake_vllm(monkeypatch):
    """The SIMULATED vllm importable as `vllm` in this process, and gone afterwards."""
    monkeypatch.syspath_prepend(str(FAKE_VLLM))
    yield
    for name in [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]:
        del sys.modules[name]


def test_the_child_asks_vllm_for_final_only_outputs_and_every_sampling_field(
    fake_vllm, tmp_path, monkeypatch
):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("FAKE_VLLM_SCRIPT", json.dumps({"": {"abort_seeds": [1]}}))
    model = tmp_path / "model"
    model.mkdir()
    run = tmp_path / "run"
    run.mkdir()
    sampling = SamplingSettings(temperature=0.8, top_p=0.9, top_k=0)
    (run / "spec.json").write_text(json.dumps(spec_of(model, sampling=sampling)))
    requests = step_requests([0, 0, 0])
    (run / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in requests))
    assert vllm_child._generate(run) == 0

    import vllm

    llm = vllm.LLM.instances[-1]
    assert llm.engine_args == {
        "model": str(model),
        "tensor_parallel_size": 1,
        "pipeline_parallel_size": 1,
        "max_model_len": 4096,
        "gpu_memory_utilization": 0.9,
        "max_num_seqs": 4,
        "dtype": "bfloat16",
        "seed": 0,
        "enforce_eager": False,
    }
    engine = llm.llm_engine
    assert engine.outputs_built == 4  # final-only: one per request, and the aborted attempt
    assert [request_id for request_id, _ in engine.added] == ["0.0", "1.0", "2.0", "1.1"]
    for (_, params), request in zip(engine.added, requests, strict=False):
        assert (params.n, params.seed, params.max_tokens, params.stop, params.logprobs) == (
            1,
            request["seed"],
            64,
            [],
            None,
        )
        assert params.output_kind.name == "FINAL_ONLY"  # vllm.sampling_params, imported as vllm
    rows = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    assert {row["finish_reason"] for row in rows} == {"stop"}
    assert all(row["completion_text"].startswith("t") for row in rows)
    assert rows[0]["sampling"] == {
        "temperature": 0.8,
        "top_p": 0.9,
        "top_k": 0,
        "min_p": 0.0,
        "repetition_penalty": 1.0,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
    }
    ready = json.loads((run / "ready.json").read_text())
    assert ready == {"model_path": str(model), "model_rev": "a" * 40}


def test_the_spec_the_parent_writes_is_the_spec_the_child_reads(tmp_path):
    spec = vllm_spec(
        tmp_path / "model", sampling=SamplingSettings(temperature=0.6, top_p=0.95, top_k=20)
    )
    vllm_child.write_spec(tmp_path, spec)
    assert vllm_child.read_spec(tmp_path) == spec


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"chunks": 2}, "chunks"),  # a name of another version
        ({"max_num_seqs": "4"}, "max_num_seqs"),  # a number written as text
        ({"sampling": {"temperature": 1.0, "top_p": 0.95}}, "sampling.top_k"),  # one missing
    ],
)
def test_a_spec_the_child_does_not_know_whole_is_refused_naming_the_field(tmp_path, change, field):
    written = {**spec_of(tmp_path / "model"), **change}
    (tmp_path / vllm_child.SPEC_FILE).write_text(json.dumps(written))
    with pytest.raises(ValidationError) as refused:
        vllm_child.read_spec(tmp_path)
    assert [".".join(map(str, e["loc"])) for e in refused.value.errors()] == [field]
