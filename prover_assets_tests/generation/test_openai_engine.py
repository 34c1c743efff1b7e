"""The OpenAI-compatible completions engine against HTTP doubles of `vllm serve` on 127.0.0.1:
token ids both ways, per-sample seeds, retries with backoff, least-loaded replicas, the served
model checked, and the same resumable runner and records as the in-process engines."""

import contextlib
import socket
import threading

import pytest

from prover_assets.generation.engines import GenerationRequest
from prover_assets.generation.openai_engine import OpenAICompletionsEngine, ReplicaError
from prover_assets.generation.runner import generate_samples, round0_specs
from prover_assets.records import Appender, Generation, SamplingSettings, read_records
from prover_assets_tests.doubles.completions_server import (
    CompletionsDouble,
    completion_ids,
    serving,
)
from prover_assets_tests.factories import REGISTERED_SAMPLING_SENT, make_opening, make_problem
from prover_assets_tests.support import gpu_missing

SAMPLING = SamplingSettings(temperature=1.0, top_p=0.95, top_k=0)


# What the runner is told in the tests that write records through this engine
OPENING = make_opening(sampling=SAMPLING, seed=7)


def requests_of(count: int, max_tokens: int = 64) -> list[GenerationRequest]:
    return [GenerationRequest(("p", i), (1, 5, 7, i), max_tokens, 1000 + i) for i in range(count)]


def engine(urls, **kwargs) -> OpenAICompletionsEngine:
    settings = {"backoff_s": 0.01, "requests_per_replica": 4, "retries": 3, **kwargs}
    return OpenAICompletionsEngine(urls, "prover", SAMPLING, **settings)


@contextlib.contextmanager
def replicas(*doubles: CompletionsDouble):
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(serving(d)) for d in doubles]


def test_token_ids_go_in_and_come_out_with_each_samples_seed_and_budget():
    double = CompletionsDouble()
    with replicas(double) as urls, engine(urls) as completions:
        results = {r.key: r for r in completions.generate(requests_of(5, max_tokens=4))}
    for request in requests_of(5, max_tokens=4):
        ids, finish = completion_ids(
            list(request.prompt_ids), request.seed, 4, REGISTERED_SAMPLING_SENT
        )
        assert (results[request.key].completion_ids, results[request.key].finish_reason) == (
            tuple(ids),
            finish,
        )
    sent = {tuple(b["prompt"]): b for b in double.bodies}
    body = sent[(1, 5, 7, 2)]
    assert (body["seed"], body["max_tokens"], body["n"], body["return_token_ids"]) == (
        1002,
        4,
        1,
        True,
    )
    assert body["model"] == "prover"
    assert {name: body[name] for name in REGISTERED_SAMPLING_SENT} == REGISTERED_SAMPLING_SENT
    assert (body["stop"], body["logprobs"]) == ([], None)
    assert (
        double.effective == [REGISTERED_SAMPLING_SENT] * 5
    )  # no field took generation_config's value


def test_a_replica_that_fails_is_retried_and_the_sample_still_arrives():
    double = CompletionsDouble(faults=[503, 503])
    with replicas(double) as urls, engine(urls, retries=2) as completions:
        (result,) = completions.generate(requests_of(1))
    assert result.key == ("p", 0)
    assert len(double.bodies) == 3


def test_after_the_last_retry_the_error_names_every_attempt():
    double = CompletionsDouble(faults=[503, 502, 500])
    with (
        replicas(double) as urls,
        engine(urls, retries=2) as completions,
        pytest.raises(
            ReplicaError, match=r"3 attempts \(http://\S+: HTTP 503; http://\S+: HTTP 502; http"
        ),
    ):
        list(completions.generate(requests_of(1)))


def test_a_request_the_server_refuses_is_not_retried():
    double = CompletionsDouble(faults=[400])
    with (
        replicas(double) as urls,
        engine(urls, retries=3) as completions,
        pytest.raises(ReplicaError, match="refused sample"),
    ):
        list(completions.generate(requests_of(1)))
    assert len(double.bodies) == 1


def dead_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"  # closed once the block ends


def test_a_dead_replica_sends_its_requests_to_the_live_one():
    live = CompletionsDouble()
    with replicas(live) as urls:
        completions = engine([dead_url(), *urls], retries=1)
        completions._checked = True  # the replica died after the check: its requests move on
        results = list(completions.generate(requests_of(6)))
    assert len(results) == 6 and len(live.bodies) == 6


def test_requests_spread_over_the_replicas():
    doubles = [CompletionsDouble(delay_s=0.05), CompletionsDouble(delay_s=0.05)]
    with replicas(*doubles) as urls, engine(urls) as completions:
        results = list(completions.generate(requests_of(16)))
    assert len(results) == 16
    loads = [len(d.bodies) for d in doubles]
    assert sum(loads) == 16 and abs(loads[0] - loads[1]) <= 2, loads  # least loaded first


def test_a_replica_serving_another_model_is_refused_before_any_sample():
    doubles = [CompletionsDouble(), CompletionsDouble(served_model="other")]
    with (
        replicas(*doubles) as urls,
        engine(urls) as completions,
        pytest.raises(
            ReplicaError,
            match=r"serves \['other'\], not 'prover': start it with --served-model-name, or fix "
            r"gpu.settings.served_model",
        ),
    ):
        list(completions.generate(requests_of(2)))
    assert [len(d.bodies) for d in doubles] == [0, 0]


def test_a_replica_loaded_from_another_folder_is_refused(tmp_path):
    double = CompletionsDouble(root=str(tmp_path / "baseline"))
    with (
        replicas(double) as urls,
        engine(urls, model_root=str(tmp_path / "exported")) as completions,
        pytest.raises(ReplicaError, match=r"from .*baseline, but this step samples"),
    ):
        list(completions.generate(requests_of(1)))


def test_the_runner_writes_valid_records_and_a_rerun_asks_for_nothing(tiny_model_dir, tmp_path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    specs = round0_specs([make_problem("p1"), make_problem("p2")], 3, 16)
    double = CompletionsDouble()
    with replicas(double) as urls, engine(urls) as completions:
        for _ in range(2):
            with Appender(tmp_path / "gen.jsonl", Generation) as appender:
                stats = generate_samples(specs, completions, tokenizer, appender, opening=OPENING)
    rows = read_records(tmp_path / "gen.jsonl", Generation)
    assert len(rows) == 6 and len(double.bodies) == 6
    assert (stats.already_present, stats.generated_now) == (6, 0)
    for row in rows:
        ids, finish = completion_ids(
            row.prompt_ids, row.sampling.seed, 16, REGISTERED_SAMPLING_SENT
        )
        assert (row.completion_ids, row.finish_reason) == (ids, finish)
        assert row.sampling.unset == ()


@pytest.mark.gpu
@pytest.mark.skipif(gpu_missing() is not None, reason=gpu_missing() or "")
def test_a_real_vllm_serve_returns_completion_token_ids_that_decode_to_its_text(
    tiny_model_dir, tmp_path
):
    import subprocess
    import sys
    import time

    import requests
    from transformers import AutoTokenizer

    port = int(dead_url().rsplit(":", 1)[1])
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model"]
    command += [str(tiny_model_dir), "--served-model-name", "prover", "--port", str(port)]
    command += ["--gpu-memory-utilization", "0.3", "--max-model-len", "1024", "--enforce-eager"]
    with open(tmp_path / "serve.log", "wb") as log:
        server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            with contextlib.suppress(requests.RequestException):
                if requests.get(f"{url}/v1/models", timeout=5).ok:
                    break
            assert server.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
            time.sleep(2)
        with engine([url]) as completions:
            results = list(completions.generate(requests_of(4, max_tokens=24)))
        tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
        for result in results:
            assert 0 < len(result.completion_ids) <= 24
            decoded = tokenizer.decode(result.completion_ids, skip_special_tokens=True)
            assert decoded == result.completion_text
    finally:
        server.terminate()
        server.wait(60)


def test_replicas_are_taken_least_loaded_first_and_in_turn_when_equally_loaded():
    completions = engine(["http://a", "http://b", "http://c"])
    first = [completions._choose(avoid=None).url for _ in range(4)]
    assert first == ["http://a", "http://b", "http://c", "http://a"]
    assert [r.in_flight for r in completions.replicas] == [2, 1, 1]
    completions._release(completions.replicas[0], failed=False)
    completions._release(completions.replicas[0], failed=False)
    assert completions._choose(avoid=None).url == "http://a"  # the only one with none in flight
    for replica in completions.replicas:
        while replica.in_flight:
            completions._release(replica, failed=False)
    in_turn = []
    for _ in range(6):
        replica = completions._choose(avoid=None)
        in_turn.append(replica.url)
        completions._release(replica, failed=False)
    assert in_turn == ["http://c", "http://a", "http://b", "http://c", "http://a", "http://b"]
    assert {completions._choose(avoid="http://a").url for _ in range(4)} == {"http://b", "http://c"}


def test_a_top_k_is_sent_when_the_config_sets_one():
    double = CompletionsDouble()
    sampling = SamplingSettings(temperature=0.6, top_p=0.9, top_k=20)
    with (
        replicas(double) as urls,
        OpenAICompletionsEngine(
            urls, "prover", sampling, requests_per_replica=1, retries=0
        ) as completions,
    ):
        list(completions.generate(requests_of(1)))
    (body,) = double.bodies
    assert (body["top_k"], body["temperature"], body["top_p"]) == (20, 0.6, 0.9)


def test_the_engine_describes_each_replicas_served_and_failed_attempts():
    double = CompletionsDouble(faults=[503])
    with replicas(double) as urls, engine(urls, retries=1) as completions:
        list(completions.generate(requests_of(3)))
        described = completions.describe()
    (url,) = urls
    assert described == {
        "engine": "openai",
        "replicas": [url],
        "served_model": "prover",
        "requests_per_replica": 4,
        "retries": 1,
        "served_per_replica": {url: 3},
        "failed_attempts_per_replica": {url: 1},
    }


def test_a_refused_request_counts_as_a_failed_attempt_not_a_served_one():
    double = CompletionsDouble(faults=[400])
    with replicas(double) as urls, engine(urls, retries=3) as completions:
        with pytest.raises(ReplicaError, match=r"with 400: .*scripted fault"):
            list(completions.generate(requests_of(1)))
        described = completions.describe()
    assert (described["served_per_replica"], described["failed_attempts_per_replica"]) == (
        {urls[0]: 0},
        {urls[0]: 1},
    )


def test_an_answer_without_token_ids_is_refused_as_a_failed_attempt_saying_what_to_check():
    double = CompletionsDouble(honours_token_ids=False)
    with replicas(double) as urls, engine(urls) as completions:
        with pytest.raises(
            ReplicaError, match=r"without choices\[0\]\.token_ids .*honours return_token_ids\?$"
        ):
            list(completions.generate(requests_of(1)))
        assert completions.describe()["failed_attempts_per_replica"] == {urls[0]: 1}


def test_an_aborted_request_is_retried_as_an_infrastructure_failure_never_recorded_as_stop():
    double = CompletionsDouble(finish_reasons=["abort"])
    with replicas(double) as urls, engine(urls) as completions:
        (result,) = completions.generate(requests_of(1))
        described = completions.describe()
    (request,) = requests_of(1)
    ids, finish = completion_ids(
        list(request.prompt_ids), request.seed, 64, REGISTERED_SAMPLING_SENT
    )
    assert (result.completion_ids, result.finish_reason) == (tuple(ids), finish)
    assert len(double.bodies) == 2
    assert described["failed_attempts_per_replica"] == {urls[0]: 1}


def test_a_request_aborted_on_every_attempt_fails_the_step_naming_the_attempts():
    double = CompletionsDouble(finish_reason="abort")
    with (
        replicas(double) as urls,
        engine(urls, retries=2) as completions,
        pytest.raises(
            ReplicaError,
            match=r"\('p', 0\): no replica answered in 3 attempts .*"
            r"finish_reason not stop or length",
        ),
    ):
        list(completions.generate(requests_of(1)))


def test_a_replica_that_answers_too_late_times_out_and_is_retried_then_named():
    double = CompletionsDouble(delay_s=1.0)
    with (
        replicas(double) as urls,
        engine(urls, retries=1, timeout_s=0.2) as completions,
        pytest.raises(ReplicaError, match=r"2 attempts .*ReadTimeout.*ReadTimeout"),
    ):
        list(completions.generate(requests_of(1)))


def test_an_engine_without_replicas_is_refused():
    with pytest.raises(ValueError, match=r"^the openai engine needs at least one replica URL$"):
        engine([])


def test_a_url_given_with_a_trailing_slash_reaches_the_api():
    double = CompletionsDouble()
    with replicas(double) as urls, engine([f"{urls[0]}/"]) as completions:
        (result,) = completions.generate(requests_of(1))
    assert result.key == ("p", 0) and completions.describe()["replicas"] == urls


def test_a_replica_that_does_not_list_its_models_is_refused_naming_it():
    url = dead_url()
    with (
        engine([url]) as completions,
        pytest.raises(ReplicaError, match=rf"replica {url} did not list its models: "),
    ):
        list(completions.generate(requests_of(1)))


def test_the_replicas_are_checked_once_not_on_every_batch():
    double = CompletionsDouble()
    with replicas(double) as urls, engine(urls) as completions:
        for _ in range(3):
            list(completions.generate(requests_of(2)))
    assert double.model_listings == 1 and len(double.bodies) == 6


@pytest.mark.parametrize(
    ("root", "model_root"),
    [("prover", "/models/exported"), (None, "/models/exported"), ("/models/any", None)],
    ids=["served_by_name", "root_unknown", "step_folder_unknown"],
)
def test_a_replica_is_refused_only_when_both_folders_are_known_and_differ(root, model_root):
    double = CompletionsDouble(root=root)
    with replicas(double) as urls, engine(urls, model_root=model_root) as completions:
        assert len(list(completions.generate(requests_of(1)))) == 1


def test_at_most_requests_per_replica_are_open_on_a_replica_at_once():
    double = CompletionsDouble(delay_s=0.1)
    with replicas(double) as urls, engine(urls, requests_per_replica=2) as completions:
        assert len(list(completions.generate(requests_of(8)))) == 8
    assert double.most_in_flight == 2


def test_each_sample_comes_as_it_finishes_not_when_the_batch_does():
    # Sample 0 is held by the server until the first result is in hand: no timing, so however
    # slowly a loaded machine sends or serves either request, sample 0 cannot finish first.
    slow = threading.Event()
    double = CompletionsDouble(held_by_seed={1000: slow})
    with replicas(double) as urls, engine(urls) as completions:
        results = completions.generate(requests_of(2))
        first = next(results)
        assert first.key == ("p", 1)
        assert len(double.effective) == 1  # answered: sample 1 only; sample 0 still held
        slow.set()
        assert [r.key for r in results] == [("p", 0)]


class _ClientLeavingOutTopK(OpenAICompletionsEngine):
    """A client as this engine was before every field was sent: no `top_k` in the body."""

    def _body(self, request: GenerationRequest) -> dict:
        return {k: v for k, v in super()._body(request).items() if k != "top_k"}


def test_design_match_catches_a_candidate_whose_requests_left_top_k_to_the_server(
    tiny_model_dir, tmp_path
):
    from transformers import AutoTokenizer

    from prover_assets.generation.validity import check_design_match

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    specs = round0_specs([make_problem("p1"), make_problem("p2")], 2, 16)
    double = CompletionsDouble()  # Qwen3's generation_config: top_k 20 for a request without
    with replicas(double) as urls:
        for name, client in (
            ("baseline", OpenAICompletionsEngine),
            ("cand", _ClientLeavingOutTopK),
        ):
            with (
                client(urls, "prover", SAMPLING, requests_per_replica=2, retries=0) as completions,
                Appender(tmp_path / f"{name}.jsonl", Generation) as appender,
            ):
                generate_samples(specs, completions, tokenizer, appender, opening=OPENING)
    assert [e["top_k"] for e in double.effective] == [0] * 4 + [20] * 4  # served differently
    check = check_design_match(tmp_path / "baseline.jsonl", tmp_path / "cand.jsonl")
    assert not check.passed
    assert check.metadata["unset_fields"] == {"candidate top_k": 4}
    assert len(check.metadata["differing"]) == 4
    assert "left to the server's default: candidate top_k on 4 samples" in check.description
    same = check_design_match(tmp_path / "baseline.jsonl", tmp_path / "baseline.jsonl")
    assert same.passed
