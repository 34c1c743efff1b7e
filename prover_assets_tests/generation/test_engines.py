"""`generation/engines.py`: the sampling settings a request carries, and the engine a config
names, built with every setting it gives (on CPU: building an engine starts nothing); then the
vLLM engine for real (marker `gpu`): the result contract, the cap, per-request seeds, and the
same model in vLLM and transformers agreeing on first-token logprobs."""

from __future__ import annotations

from pathlib import Path

import pytest

from prover_assets.config import EngineSettings
from prover_assets.generation.engines import GenerationRequest, TransformersEngine
from prover_assets.generation.factory import open_engine
from prover_assets.generation.openai_engine import OpenAICompletionsEngine
from prover_assets.generation.revision import model_revision
from prover_assets.generation.vllm_child import VllmSpec
from prover_assets.generation.vllm_engine import VllmEngine
from prover_assets.records import SamplingSettings
from prover_assets_tests.factories import make_opening
from prover_assets_tests.support import gpu_missing

MISSING = gpu_missing()
needs_gpu = pytest.mark.skipif(MISSING is not None, reason=MISSING or "")

SAMPLING = SamplingSettings(temperature=1.0, top_p=0.95, top_k=0)


def opened(settings: dict, model_path: Path, workdir: Path):
    opening = make_opening(
        model_path=model_path,
        model_rev="rev-abc",
        sampling=SAMPLING,
        max_model_len=2048,
        seed=11,
        workdir=workdir,
        commit_every=32,
    )
    return open_engine(EngineSettings(**settings), opening)


def test_open_engine_builds_the_transformers_engine_on_the_named_device_and_dtype(
    tiny_model_dir, tmp_path
):
    import torch

    before = torch.get_num_threads()
    settings = {"engine": "transformers", "device": "cpu", "dtype": "float16"}
    with opened(settings, tiny_model_dir, tmp_path) as engine:
        assert isinstance(engine, TransformersEngine)
        assert (engine.model_path, engine.sampling) == (tiny_model_dir, SAMPLING)
        assert (engine.device, engine.dtype) == ("cpu", "float16")
        assert engine.model.dtype == torch.float16
        assert torch.get_num_threads() == 1
        assert engine.describe() == {
            "engine": "transformers",
            "device": "cpu",
            "dtype": "float16",
            "cpu_threads": 1,
        }
    assert torch.get_num_threads() == before


def test_open_engine_sends_the_transformers_model_to_the_named_gpu(
    tiny_model_dir, tmp_path, monkeypatch
):
    from transformers import AutoModelForCausalLM

    load = AutoModelForCausalLM.from_pretrained
    sent: list = []

    def from_pretrained(*args, **kwargs):  # records the move a GPU machine would make
        model = load(*args, **kwargs)
        model.to = lambda device: sent.append(device) or model
        return model

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", from_pretrained)
    with opened({"engine": "transformers", "device": "cuda"}, tiny_model_dir, tmp_path) as engine:
        assert (engine.device, sent) == ("cuda", ["cuda"])


def test_open_engine_builds_the_openai_engine_on_the_named_replicas(tmp_path):
    settings = {
        "engine": "openai",
        "urls": ["http://a:8000/", "http://b:8000"],
        "served_model": "prover",
        "requests_per_replica": 5,
        "http_retries": 2,
    }
    engine = opened(settings, Path("/models/p"), tmp_path)
    assert isinstance(engine, OpenAICompletionsEngine)
    assert [r.url for r in engine.replicas] == ["http://a:8000", "http://b:8000"]
    assert (engine.served_model, engine.model_root) == ("prover", "/models/p")
    assert (engine.sampling, engine.requests_per_replica, engine.retries) == (SAMPLING, 5, 2)


def test_open_engine_builds_the_vllm_engine_with_every_setting_it_names(tmp_path):
    settings = {
        "engine": "vllm",
        "tensor_parallel_size": 2,
        "pipeline_parallel_size": 1,
        "gpu_memory_utilization": 0.7,
        "max_num_seqs": 64,
        "dtype": "float16",
        "enforce_eager": True,
        "gpus": [4, 5, 6, 7],
        "batch_invariant": True,
    }
    engine = opened(settings, Path("/models/p"), tmp_path)
    assert isinstance(engine, VllmEngine)
    assert engine.spec == VllmSpec(
        model_path="/models/p",
        model_rev="rev-abc",
        tensor_parallel_size=2,
        pipeline_parallel_size=1,
        max_model_len=2048,
        gpu_memory_utilization=0.7,
        max_num_seqs=64,
        dtype="float16",
        seed=11,
        enforce_eager=True,
        sampling=SAMPLING,
        chunk=32,
    )
    assert (engine.workdir, engine.batch_invariant) == (tmp_path, True)
    assert [list(s) for s in engine.slices] == [[4, 5], [6, 7]]


def engine(model_dir, workdir, *, dtype: str = "float32") -> VllmEngine:
    return VllmEngine(
        VllmSpec(
            model_path=str(model_dir),
            model_rev=model_revision(model_dir),
            tensor_parallel_size=1,
            pipeline_parallel_size=1,
            max_model_len=1024,
            gpu_memory_utilization=0.3,
            max_num_seqs=16,
            dtype=dtype,
            seed=0,
            enforce_eager=True,
            sampling=SAMPLING,
            chunk=4,
        ),
        workdir=workdir,
    )


def prompts(model_dir) -> list[tuple[int, ...]]:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    texts = ["theorem t (x : ℕ) : x + 0 = x := by", "theorem u (a b : ℝ) : a * b = b * a := by"]
    return [
        tuple(
            tokenizer.apply_chat_template(
                [{"role": "user", "content": t}], add_generation_prompt=True
            )
        )
        for t in texts
    ]


@pytest.mark.gpu
@needs_gpu
def test_vllm_returns_one_result_per_request_within_the_cap(tiny_model_dir, tmp_path):
    requests = [
        GenerationRequest(key=(i, s), prompt_ids=p, max_tokens=32, seed=1000 * i + s)
        for i, p in enumerate(prompts(tiny_model_dir))
        for s in range(4)
    ]
    from transformers import AutoTokenizer

    eos = AutoTokenizer.from_pretrained(tiny_model_dir).eos_token_id
    with engine(tiny_model_dir, tmp_path) as vllm:
        results = list(vllm.generate(requests))
    assert sorted(r.key for r in results) == sorted(r.key for r in requests)
    for result in results:
        assert 0 < len(result.completion_ids) <= 32
        if result.finish_reason == "length":
            assert len(result.completion_ids) == 32
        else:
            assert result.finish_reason == "stop" and result.completion_ids[-1] == eos


@pytest.mark.gpu
@needs_gpu
def test_vllm_seed_reproduces_a_sample_across_processes(tiny_model_dir, tmp_path):
    request = GenerationRequest(
        key=("a",), prompt_ids=prompts(tiny_model_dir)[0], max_tokens=48, seed=7
    )
    with engine(tiny_model_dir, tmp_path / "one") as first:
        (one,) = first.generate([request])
    with engine(tiny_model_dir, tmp_path / "two") as second:
        (two,) = second.generate([request])
    assert one.completion_ids == two.completion_ids


@pytest.mark.gpu
@needs_gpu
def test_vllm_and_transformers_agree_on_first_token_logprobs(tiny_model_dir):
    import torch
    from vllm import LLM, SamplingParams

    prompt = list(prompts(tiny_model_dir)[0])
    llm = LLM(
        model=str(tiny_model_dir),
        dtype="float32",
        enforce_eager=True,
        gpu_memory_utilization=0.3,
        seed=0,
    )
    (output,) = llm.generate(
        [{"prompt_token_ids": prompt}], SamplingParams(max_tokens=1, temperature=0, logprobs=5)
    )
    vllm_logprobs = {token: entry.logprob for token, entry in output.outputs[0].logprobs[0].items()}
    del llm
    reference = TransformersEngine(tiny_model_dir, SAMPLING, device="cuda", dtype="float32")
    with torch.no_grad():
        logits = reference.model(torch.tensor([prompt], device="cuda")).logits[0, -1].float()
    expected = torch.log_softmax(logits, -1)
    for token, logprob in vllm_logprobs.items():
        assert logprob == pytest.approx(float(expected[token]), abs=1e-3), token


@pytest.mark.gpu
@needs_gpu
def test_two_engines_on_two_gpus_give_what_one_gives_key_by_key(tiny_model_dir, tmp_path):
    import torch

    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs: one engine child on each")
    requests = [
        GenerationRequest(key=(i, s), prompt_ids=p, max_tokens=32, seed=1000 * i + s)
        for i, p in enumerate(prompts(tiny_model_dir))
        for s in range(8)
    ]

    def sample(gpus: list[int], folder: str) -> dict:
        spec = engine(tiny_model_dir, tmp_path / folder).spec
        with VllmEngine(spec, workdir=tmp_path / folder, gpus=gpus, batch_invariant=True) as vllm:
            return {r.key: r for r in vllm.generate(requests)}

    assert sample([0, 1], "two") == sample([0], "one")
