"""The vLLM engine on every GPU slice, with real child processes running a SIMULATED vllm
(`doubles/vllm_package`, continuous-batching doubles): N engines give what one gives, key by
key, an engine killed mid-batch has its samples redone elsewhere (none lost, none doubled),
each child sees only its slice's GPUs, and a child serving another model stops the step."""

import json
import logging
import os
import signal
import subprocess
import time
from dataclasses import asdict
from pathlib import Path

import psutil
import pytest

from prover_assets.generation.engines import GenerationRequest
from prover_assets.generation.vllm_child import VllmSpec
from prover_assets.generation.vllm_engine import (
    EngineIdentityError,
    VllmEngine,
    _Child,
    gpu_slices,
    slice_cache_root,
)
from prover_assets.records import SamplingSettings
from prover_assets_tests.doubles.completions_server import completion_ids
from prover_assets_tests.factories import REGISTERED_SAMPLING_SENT, make_opening

FAKE_VLLM = Path(__file__).parents[1] / "doubles" / "vllm_package"
REPO = Path(__file__).parents[2]
SAMPLING = SamplingSettings(temperature=1.0, top_p=0.95, top_k=0)
REVISION = "a" * 40


def spec_of(model: Path, *, sampling: SamplingSettings = SAMPLING, tp: int = 1) -> dict:
    return asdict(vllm_spec(model, sampling=sampling, tp=tp))


def vllm_spec(model: Path, *, sampling: SamplingSettings = SAMPLING, tp: int = 1) -> VllmSpec:
    return VllmSpec(
        model_path=str(model),
        model_rev=REVISION,
        tensor_parallel_size=tp,
        pipeline_parallel_size=1,
        max_model_len=4096,
        gpu_memory_utilization=0.9,
        max_num_seqs=4,
        dtype="bfloat16",
        seed=0,
        enforce_eager=False,
        sampling=sampling,
        chunk=2,
    )


@pytest.fixture
def simulated_vllm(monkeypatch):
    """Children import the SIMULATED vllm; returns a setter for their fault script."""
    monkeypatch.setenv("PYTHONPATH", f"{FAKE_VLLM}:{REPO}")
    monkeypatch.delenv("VLLM_BATCH_INVARIANT", raising=False)

    def script(faults: dict[str, dict]) -> None:
        monkeypatch.setenv("FAKE_VLLM_SCRIPT", json.dumps(faults))

    script({})
    return script


@pytest.fixture
def model_dir(tmp_path) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    return folder


def requests_of(count: int) -> list[GenerationRequest]:
    return [
        GenerationRequest(("p", i, 0, 64), (1, 5, i % 7, i), 64, 1000 + 17 * i)
        for i in range(count)
    ]


def generate(model_dir, workdir, gpus, *, tp=1, **kwargs) -> tuple[VllmEngine, dict]:
    engine = VllmEngine(
        vllm_spec(model_dir, tp=tp), workdir=workdir, gpus=gpus, poll_s=0.05, **kwargs
    )
    with engine:
        results = list(engine.generate(requests_of(24)))
    keyed = {r.key: r for r in results}
    assert len(keyed) == len(results)  # no key doubled
    return engine, keyed


def test_one_engine_gives_each_sample_the_tokens_of_its_prompt_seed_and_sampling(
    simulated_vllm, model_dir, tmp_path
):
    _, results = generate(model_dir, tmp_path / "one", [0])
    for request in requests_of(24):
        ids, finish = completion_ids(
            list(request.prompt_ids), request.seed, 64, REGISTERED_SAMPLING_SENT
        )
        result = results[request.key]
        assert (list(result.completion_ids), result.finish_reason) == (ids, finish)
        assert result.sampling == REGISTERED_SAMPLING_SENT


@pytest.mark.slow
def test_four_engines_and_two_of_two_gpus_give_what_one_engine_gives_key_by_key(
    simulated_vllm, model_dir, tmp_path
):
    _, one = generate(model_dir, tmp_path / "one", [0])
    four, by_four = generate(model_dir, tmp_path / "four", [0, 1, 2, 3])
    two, by_two = generate(model_dir, tmp_path / "two", [4, 5, 6, 7], tp=2)
    assert by_four == one and by_two == one
    assert four.served_per_slice == [6, 6, 6, 6] and two.served_per_slice == [12, 12]
    logs = {i: (tmp_path / "two" / f"engine-{i}" / "vllm.log").read_text() for i in (0, 1)}
    assert "CUDA_VISIBLE_DEVICES=4,5 " in logs[0] and "CUDA_VISIBLE_DEVICES=6,7 " in logs[1]


@pytest.mark.slow
def test_an_engine_killed_mid_batch_has_its_samples_redone_elsewhere_none_lost_or_doubled(
    simulated_vllm, model_dir, tmp_path
):
    _, one = generate(model_dir, tmp_path / "one", [0])
    simulated_vllm({"1": {"die_after": 3}})  # the engine on GPU 1 dies after 3 of its 6
    engine, results = generate(model_dir, tmp_path / "four", [0, 1, 2, 3])
    assert results == one
    assert engine.dead_slices == [1]
    assert sum(engine.served_per_slice) == 24
    (durable,) = (tmp_path / "four" / "engine-1").glob("vllm-run-*/results.jsonl")
    kept = len(durable.read_text().splitlines())
    assert engine.served_per_slice[1] == kept < 6  # what it made durable before it died


@pytest.mark.slow
def test_an_engine_that_cannot_load_its_model_leaves_its_share_to_the_others(
    simulated_vllm, model_dir, tmp_path
):
    _, one = generate(model_dir, tmp_path / "one", [0])
    simulated_vllm({"0": {"load_fails": True}})
    engine, results = generate(model_dir, tmp_path / "two", [0, 1])
    assert results == one
    assert (engine.dead_slices, engine.served_per_slice) == ([0], [0, 24])


def test_when_every_engine_dies_the_step_fails_naming_the_slices_and_the_logs(
    simulated_vllm, model_dir, tmp_path
):
    simulated_vllm({"0": {"die_after": 2}, "1": {"die_after": 1}})
    engine = VllmEngine(vllm_spec(model_dir), workdir=tmp_path, gpus=[0, 1], poll_s=0.05)
    got = []
    with pytest.raises(RuntimeError, match=r"every vLLM engine died \(\d+ of 24 .*engine-<i>"):
        got.extend(engine.generate(requests_of(24)))
    assert len(got) == len({r.key for r in got}) <= 3  # what was durable, once each
    assert sorted(engine.dead_slices) == [0, 1]
    with pytest.raises(RuntimeError, match=r"no vLLM engine left: GPU slices \[\d, \d\] failed"):
        next(engine.generate(requests_of(1)))  # a later step on the same engine


def test_an_engine_serving_another_model_folder_stops_the_step(simulated_vllm, model_dir, tmp_path):
    other = tmp_path / "baseline"
    other.mkdir()
    simulated_vllm({"1": {"serves": str(other)}})
    engine = VllmEngine(vllm_spec(model_dir), workdir=tmp_path / "w", gpus=[0, 1], poll_s=0.05)
    with pytest.raises(EngineIdentityError, match=rf"engine 1 serves {other} at revision"):
        list(engine.generate(requests_of(8)))


def test_batch_invariance_is_asked_of_every_engine_when_configured(
    simulated_vllm, model_dir, tmp_path
):
    generate(model_dir, tmp_path, [0, 1], batch_invariant=True)
    for i in (0, 1):
        assert "VLLM_BATCH_INVARIANT=1" in (tmp_path / f"engine-{i}" / "vllm.log").read_text()


@pytest.mark.parametrize(
    ("gpus", "per_engine", "slices"),
    [([0], 1, [(0,)]), ([0, 1, 2, 3], 2, [(0, 1), (2, 3)]), ([3, 1], 1, [(3,), (1,)])],
)
def test_gpus_are_cut_into_consecutive_slices_of_one_engine_each(gpus, per_engine, slices):
    assert gpu_slices(gpus, per_engine) == slices


def test_gpus_that_do_not_split_into_whole_engines_are_refused():
    with pytest.raises(ValueError, match=r"3 GPUs \[0, 1, 2\] do not split into engines of 2"):
        gpu_slices([0, 1, 2], 2)


def test_two_steps_on_two_models_each_get_engines_serving_their_own_model_then_stopped(
    simulated_vllm, tiny_model_dir, tmp_path
):
    """The baseline, then the candidate, as one launch runs them: no replica to restart."""
    import psutil
    from transformers import AutoTokenizer

    from prover_assets.config import EngineSettings
    from prover_assets.generation.factory import open_engine
    from prover_assets.generation.runner import round0_specs
    from prover_assets.generation.stages import GENERATIONS_FILE, Samples, materialize_generations
    from prover_assets.records import Generation, read_records
    from prover_assets_tests.factories import make_problem

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    settings = EngineSettings(engine="vllm", gpus=[0, 1])
    specs = round0_specs([make_problem("p1"), make_problem("p2")], 3, 16)
    for system, revision in (("baseline", "b" * 40), ("candidate", "c" * 40)):
        model = tmp_path / "models" / system
        model.mkdir(parents=True)
        folder = tmp_path / system

        materialize_generations(
            folder,
            Samples(specs, {}, samples_per_problem=3),
            opening=make_opening(
                model_path=model, model_rev=revision, sampling=SAMPLING, seed=0, workdir=folder
            ),
            open_engine=lambda opening: open_engine(settings, opening),
            load_tokenizer=lambda _: tokenizer,
        )
        rows = read_records(folder / GENERATIONS_FILE, Generation)
        assert {(r.model_path, r.model_rev) for r in rows} == {(str(model), revision)}
        assert len(rows) == 6
        readies = [json.loads(p.read_text()) for p in folder.glob("engine-*/vllm-run-*/ready.json")]
        assert readies == [{"model_path": str(model), "model_rev": revision}] * 2
    children = psutil.Process().children(recursive=True)
    left = [p for p in children if "prover_assets.generation.vllm_child" in p.cmdline()]
    assert left == []


def test_an_engine_that_fails_its_first_start_is_started_once_more_on_its_slice(
    simulated_vllm, model_dir, tmp_path, monkeypatch
):
    monkeypatch.setenv("VLLM_CACHE_ROOT", str(tmp_path / "cache"))
    _, one = generate(model_dir, tmp_path / "one", [0])
    simulated_vllm({"0": {"load_fails_once": True}})
    engine, results = generate(model_dir, tmp_path / "two", [0, 1])
    assert results == one
    assert (engine.dead_slices, engine.start_retries) == ([], [1, 0])
    assert sum(engine.served_per_slice) == 24


def test_each_slice_has_its_own_compile_cache_under_the_users_and_its_startup_measured(
    simulated_vllm, model_dir, tmp_path, monkeypatch
):
    monkeypatch.setenv("VLLM_CACHE_ROOT", str(tmp_path / "cache"))
    engine, _ = generate(model_dir, tmp_path / "two", [0, 1])
    for index in (0, 1):
        log = (tmp_path / "two" / f"engine-{index}" / "vllm.log").read_text()
        assert f"VLLM_CACHE_ROOT={tmp_path / 'cache'}/prover-assets-slice-{index}\n" in log
    described = engine.describe()
    assert all(s is not None and s >= 0 for s in described["startup_s_per_slice"])
    assert described["start_retries"] == [0, 0]


def test_without_vllm_cache_root_each_slice_caches_under_the_users_home(monkeypatch, tmp_path):
    monkeypatch.delenv("VLLM_CACHE_ROOT", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # what os.path.expanduser("~") reads
    assert slice_cache_root(3) == f"{tmp_path}/.cache/vllm/prover-assets-slice-3"


def test_the_engine_describes_its_spec_slices_and_what_each_slice_did(tmp_path):
    engine = VllmEngine(vllm_spec(tmp_path, tp=2), workdir=tmp_path, gpus=[4, 5, 6, 7])
    engine.served_per_slice = [10, 14]
    engine.dead_slices = [1]
    engine.start_retries = [0, 1]
    engine.startup_s_per_slice = [12.34, None]
    spec = spec_of(tmp_path, tp=2)
    del spec["chunk"]  # how the engine cuts its work, not what it samples
    assert engine.describe() == {
        "engine": "vllm",
        **spec,
        "gpu_slices": [[4, 5], [6, 7]],
        "batch_invariant": False,
        "served_per_slice": [10, 14],
        "dead_slices": [1],
        "start_retries": [0, 1],
        "startup_s_per_slice": [12.3, None],
    }


def test_by_default_one_engine_serves_gpu_0(tmp_path):
    described = VllmEngine(vllm_spec(tmp_path), workdir=tmp_path).describe()
    assert (described["gpu_slices"], described["batch_invariant"]) == ([[0]], False)


def a_child(run: Path, process) -> _Child:
    return _Child(0, [], process, run, run / "vllm.log")


def test_a_result_line_written_in_two_parts_is_read_once_whole(tmp_path):
    results = tmp_path / "results.jsonl"
    results.write_text('{"key": 1}\n{"ke')
    child = a_child(tmp_path, process=None)
    assert child.new_rows() == [{"key": 1}]
    with results.open("a") as handle:
        handle.write('y": 2}\n')
    assert child.new_rows() == [{"key": 2}]
    assert child.new_rows() == []


class PastItsGrace:
    """A child's process whose wait for its SIGTERM runs out (vLLM's engine process can ignore
    SIGTERM): the real process, its wait answering TimeoutExpired once."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.process, self.pid, self.waited = process, process.pid, False

    def wait(self, timeout: float | None = None) -> int:
        if not self.waited:
            self.waited = True
            raise subprocess.TimeoutExpired("vllm", timeout or 0)
        return self.process.wait(timeout)


def test_a_child_that_outlives_its_sigterm_is_killed_with_its_group(tmp_path):
    ignoring = subprocess.Popen(
        ["bash", "-c", "trap '' TERM; sleep 60 & echo ready; wait"],
        start_new_session=True,
        stdout=subprocess.PIPE,
    )
    assert ignoring.stdout.readline() == b"ready\n"  # SIGTERM ignored from here on
    group = ignoring.pid
    a_child(tmp_path, PastItsGrace(ignoring)).stop()
    assert ignoring.wait(timeout=10) == -signal.SIGKILL
    # the sleep too: SIGKILL reaches the whole group (a bound on its delivery, not a speed)
    deadline = time.monotonic() + 10
    while [p for p in psutil.process_iter() if live_in(p, group)]:
        assert time.monotonic() < deadline, "the child's group outlived its SIGKILL"
        time.sleep(0.05)


def live_in(process: psutil.Process, group: int) -> bool:
    try:
        return os.getpgid(process.pid) == group and process.status() != psutil.STATUS_ZOMBIE
    except (ProcessLookupError, psutil.NoSuchProcess):
        return False


def test_each_engines_start_and_model_are_logged_and_its_errors_kept_in_its_own_log(
    simulated_vllm, model_dir, tmp_path, caplog
):
    simulated_vllm({"0": {"load_fails": True}})
    with caplog.at_level(logging.INFO, logger="prover_assets.generation.vllm_engine"):
        started = time.monotonic()
        engine, _ = generate(model_dir, tmp_path, [0, 1])
        wall = time.monotonic() - started
    messages = [record.getMessage() for record in caplog.records]
    logs = [tmp_path / f"engine-{i}" / "vllm.log" for i in (0, 1)]
    assert "RuntimeError: SIMULATED: the model did not load" in logs[0].read_text()  # stderr
    assert f"vLLM engine 0 on GPUs 0: 12 requests ({logs[0]})" in messages
    assert f"vLLM engine 1 on GPUs 1: 12 requests ({logs[1]})" in messages
    serving = f"vLLM engine 1 is serving {os.path.realpath(model_dir)} ({REVISION}), "
    assert [m for m in messages if m.startswith(serving) and m.endswith(" s after it was started")]
    assert any(
        m.startswith("vLLM engine 0 exited") and m.endswith(f"see {logs[0]}") for m in messages
    )
    assert 0 <= engine.startup_s_per_slice[1] <= wall


def test_an_idle_slice_takes_the_samples_of_an_engine_that_died(
    simulated_vllm, model_dir, tmp_path
):
    simulated_vllm({"0": {"die_after": 0}})  # one request for two slices: slice 1 starts idle
    engine = VllmEngine(vllm_spec(model_dir), workdir=tmp_path, gpus=[0, 1], poll_s=0.05)
    with engine:
        [result] = engine.generate(requests_of(1))
    assert result.key == requests_of(1)[0].key
    assert (engine.dead_slices, engine.served_per_slice) == ([0], [0, 1])


def test_a_child_that_answered_everything_then_exited_non_zero_leaves_its_slice_dead(
    simulated_vllm, model_dir, tmp_path
):
    simulated_vllm({"0": {"exit_code": 11}})  # its teardown crashes after the last answer
    engine, results = generate(model_dir, tmp_path, [0, 1])
    assert len(results) == 24
    assert (engine.dead_slices, engine.served_per_slice) == ([0], [12, 12])


def test_the_engines_read_the_others_while_one_still_loads(simulated_vllm, model_dir, tmp_path):
    # slice 0 loads only once every answer of slice 1 has come back: one read of the engines
    # that waited on slice 0 before reading slice 1 would wait for ever (to the load timeout)
    loaded = tmp_path / "slice-1-answered"
    simulated_vllm({"0": {"load_until": str(loaded)}})
    engine = VllmEngine(
        vllm_spec(model_dir), workdir=tmp_path, gpus=[0, 1], poll_s=0.05, load_timeout_s=60
    )
    served = []
    with engine:
        for _ in engine.generate(requests_of(24)):
            served.append(tuple(engine.served_per_slice))
            if engine.served_per_slice[1] == 12:
                loaded.touch()
    assert served[11:13] == [(0, 12), (1, 12)]
    assert (engine.dead_slices, served[-1]) == ([], (12, 12))


@pytest.mark.slow  # more than 1.8 s on the 2-core machine
def test_an_engine_still_loading_past_the_load_timeout_is_stopped_and_its_share_served_elsewhere(
    simulated_vllm, model_dir, tmp_path, caplog
):
    _, one = generate(model_dir, tmp_path / "one", [0])
    simulated_vllm({"0": {"load_s": 60}})
    with caplog.at_level(logging.WARNING, logger="prover_assets.generation.vllm_engine"):
        engine, results = generate(model_dir, tmp_path / "two", [0, 1], load_timeout_s=2.0)
    assert results == one
    assert (engine.dead_slices, engine.served_per_slice) == ([0], [0, 24])
    messages = [record.getMessage() for record in caplog.records]
    assert "vLLM engine 0 did not load its model in 2 s; stopping it" in messages
