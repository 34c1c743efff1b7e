"""TransformersEngine's hand-written sampling loop against HF `generate`, token for token.

The oracle is `model.generate` called exactly as the engine called it before the loop replaced
it (one call per sample, the global generator seeded with the sample's seed); the loop must give
the same completion ids, finish reason and text for every sampling setting the engine passes,
whether a sample is sampled alone or beside others of its prompt.
"""

from __future__ import annotations

import pytest

from prover_assets.generation.engines import (
    GenerationRequest,
    GenerationResult,
    TransformersEngine,
    _same_prompt_runs,
)
from prover_assets.records import SamplingSettings

SETTINGS = {
    "greedy": SamplingSettings(temperature=0.0, top_p=1.0, top_k=0),
    "greedy-repetition": SamplingSettings(
        temperature=0.0, top_p=1.0, top_k=0, repetition_penalty=2.0
    ),
    "top-p": SamplingSettings(temperature=0.6, top_p=0.95, top_k=0),
    "top-k": SamplingSettings(temperature=1.0, top_p=1.0, top_k=5),
    "min-p": SamplingSettings(temperature=1.0, top_p=1.0, top_k=0, min_p=0.1),
    "repetition": SamplingSettings(temperature=0.7, top_p=1.0, top_k=0, repetition_penalty=1.3),
    "all": SamplingSettings(
        temperature=0.8, top_p=0.9, top_k=20, min_p=0.05, repetition_penalty=1.1
    ),
    # cuts that keep a single token, where `generate`'s min_tokens_to_keep=1 binds
    "top-p-narrow": SamplingSettings(temperature=1.0, top_p=1e-6, top_k=0),
    "top-1": SamplingSettings(temperature=1.0, top_p=1.0, top_k=1),
    "min-p-high": SamplingSettings(temperature=1.0, top_p=1.0, top_k=0, min_p=0.99),
    "hot": SamplingSettings(temperature=2.0, top_p=1.0, top_k=0, repetition_penalty=2.0),
}
# (setting, seed): greedy ignores the seed; seed 3 ends by EOS on the session's tiny model
# (min-p, repetition), the others by length; 2**64 - 5 checks the seed's reduction mod 2**63
CASES = (
    ("greedy", 0),
    ("greedy-repetition", 0),
    ("top-p", 0),
    ("top-p", 2**64 - 5),
    ("top-k", 0),
    ("top-k", 1),
    ("min-p", 3),
    ("min-p", 1),
    ("repetition", 3),
    ("repetition", 0),
    ("all", 2),
    ("top-p-narrow", 4),
    ("top-1", 4),
    ("min-p-high", 4),
    ("hot", 5),
)
MAX_TOKENS = 24
PROMPT = "theorem foo (a b : Nat) : a + b = b + a := by"


def generate_reference(engine: TransformersEngine, request: GenerationRequest) -> GenerationResult:
    """The engine's `_one` as it was: one HF `generate` call per sample."""
    import torch

    torch.manual_seed(request.seed % (2**63))
    prompt = torch.tensor([list(request.prompt_ids)])
    settings = engine.sampling
    sampling: dict = {
        "do_sample": settings.temperature > 0,
        "repetition_penalty": settings.repetition_penalty,
    }
    if settings.temperature > 0:
        sampling.update(
            temperature=settings.temperature,
            top_p=settings.top_p,
            top_k=settings.top_k,
            min_p=settings.min_p,
        )
    with torch.no_grad():
        output = engine.model.generate(
            prompt,
            attention_mask=torch.ones_like(prompt),
            max_new_tokens=request.max_tokens,
            eos_token_id=sorted(engine.eos_ids),
            pad_token_id=engine.pad_id,
            **sampling,
        )
    completion = output[0, prompt.shape[1] :].tolist()
    stopped = next((i for i, t in enumerate(completion) if t in engine.eos_ids), None)
    if stopped is not None:
        completion = completion[: stopped + 1]
    text = engine.tokenizer.decode(completion, skip_special_tokens=True)
    finish = "stop" if stopped is not None else "length"
    return GenerationResult(request.key, tuple(completion), text, finish, settings.carried())


@pytest.mark.parametrize("dtype", ["float32", pytest.param("bfloat16", marks=pytest.mark.slow)])
def test_loop_matches_generate_token_for_token(tiny_model_dir, dtype):
    finishes = set()
    engines: dict[str, TransformersEngine] = {}
    for name, seed in CASES:
        if name not in engines:
            engines[name] = TransformersEngine(tiny_model_dir, SETTINGS[name], dtype=dtype)
        engine = engines[name]
        assert engine.uses_loop, "the tiny model must sample through the loop, not generate"
        prompt = tuple(engine.tokenizer(PROMPT)["input_ids"])
        request = GenerationRequest((name, seed), prompt, MAX_TOKENS, seed)
        (got,) = engine.generate([request])
        assert got == generate_reference(engine, request), (name, seed)
        finishes.add(got.finish_reason)
    # both ends are exercised: a change of the tiny model may need another EOS seed
    assert finishes == {"stop", "length"}


def test_one_token_budget_matches_generate(tiny_model_dir):
    engine = TransformersEngine(tiny_model_dir, SETTINGS["top-p"])
    request = GenerationRequest(("one",), tuple(engine.tokenizer(PROMPT)["input_ids"]), 1, 7)
    (got,) = engine.generate([request])
    assert len(got.completion_ids) == 1
    assert got == generate_reference(engine, request)


@pytest.mark.parametrize(
    ("field", "value"),
    [("no_repeat_ngram_size", 3), ("suppress_tokens", [5]), ("renormalize_logits", True)],
)
def test_generation_config_the_loop_does_not_reproduce_falls_back_to_generate(
    tiny_model_dir, field, value
):
    engine = TransformersEngine(tiny_model_dir, SETTINGS["top-p"])
    setattr(engine.model.generation_config, field, value)
    assert not engine._loop_reproduces_generate()


# 1,000 checks the seed's reduction mod 2**63 on this path too (a wrong one, 2 * 63, reduces it)
@pytest.mark.parametrize(("name", "seed"), [("repetition", 1000), ("all", 2), ("greedy", 0)])
def test_fallback_is_generate(tiny_model_dir, name, seed):
    engine = TransformersEngine(tiny_model_dir, SETTINGS[name])
    engine.model.generation_config.no_repeat_ngram_size = 2
    engine.uses_loop = engine._loop_reproduces_generate()
    assert not engine.uses_loop
    prompt = tuple(engine.tokenizer(PROMPT)["input_ids"])
    request = GenerationRequest(("ngram", seed), prompt, 12, seed)
    assert list(engine.generate([request])) == [generate_reference(engine, request)]


@pytest.mark.parametrize("name", ["min-p", "repetition", "greedy"])
def test_each_sample_of_a_batch_is_the_sample_it_is_alone(tiny_model_dir, name):
    engine = TransformersEngine(tiny_model_dir, SETTINGS[name])
    prompt = tuple(engine.tokenizer(PROMPT)["input_ids"])
    requests = [GenerationRequest((name, seed), prompt, MAX_TOKENS, seed) for seed in range(6)]
    batched = list(engine.generate(requests))
    assert batched == [generate_reference(engine, request) for request in requests]
    if name != "greedy":  # rows that stop early (seed 3) beside rows that run to the budget
        assert {r.finish_reason for r in batched} == {"stop", "length"}


def test_a_sample_is_the_same_whichever_samples_share_its_batch(tiny_model_dir):
    engine = TransformersEngine(tiny_model_dir, SETTINGS["all"])
    prompt = tuple(engine.tokenizer(PROMPT)["input_ids"])
    requests = [GenerationRequest(("s", seed), prompt, MAX_TOKENS, seed) for seed in range(5)]
    whole = list(engine.generate(requests))
    resumed = list(engine.generate(requests[3:]))  # as a rerun after a kill asks for the rest
    assert resumed == whole[3:]


def request(key: str, prompt: tuple[int, ...], max_tokens: int = 4) -> GenerationRequest:
    return GenerationRequest((key,), prompt, max_tokens, 0)


def test_adjacent_requests_of_one_prompt_and_budget_share_a_batch_up_to_the_limit():
    a, b = (1, 2), (3,)
    requests = [
        request("a1", a),
        request("a2", a),
        request("a3", a),
        request("b1", b),
        request("a4", a),  # same prompt, not adjacent: a batch of its own
        request("a5", a, max_tokens=5),  # another budget
    ]
    runs = [[r.key[0] for r in run] for run in _same_prompt_runs(requests, limit=2)]
    assert runs == [["a1", "a2"], ["a3"], ["b1"], ["a4"], ["a5"]]


def test_no_requests_make_no_batch():
    assert list(_same_prompt_runs([], limit=8)) == []


def test_the_engine_samples_on_the_threads_it_is_given_and_puts_them_back_when_closed(
    tiny_model_dir,
):
    import torch

    before = torch.get_num_threads()
    given = 3 if before != 3 else 2
    with TransformersEngine(tiny_model_dir, SETTINGS["top-p"], cpu_threads=given) as engine:
        assert torch.get_num_threads() == given
        assert engine.describe()["cpu_threads"] == given
    assert torch.get_num_threads() == before


def test_the_loop_stops_once_every_row_has_ended(tiny_model_dir):
    """A row that has ended is not sampled for: once every row has, no further step runs."""
    engine = TransformersEngine(tiny_model_dir, SETTINGS["min-p"])
    prompt = tuple(engine.tokenizer(PROMPT)["input_ids"])
    request = GenerationRequest(("stops", 3), prompt, MAX_TOKENS, 3)  # ends by EOS (CASES)
    calls = []
    hook = engine.model.register_forward_hook(lambda *_: calls.append(1))
    try:
        (got,) = engine.generate([request])
    finally:
        hook.remove()
    assert got.finish_reason == "stop" and len(got.completion_ids) < MAX_TOKENS
    # the prompt's step gives the first token, each later token one step more
    assert len(calls) == len(got.completion_ids)


@pytest.mark.parametrize(
    ("field", "value"), [("presence_penalty", 0.2), ("frequency_penalty", 0.3)]
)
def test_a_penalty_transformers_does_not_have_is_refused_saying_what_to_do(
    tiny_model_dir, field, value
):
    settings = SamplingSettings(temperature=1.0, top_p=1.0, top_k=0, **{field: value})
    with pytest.raises(ValueError) as refused:
        TransformersEngine(tiny_model_dir, settings)
    assert str(refused.value) == (
        "transformers has no presence or frequency penalty: sample with the vllm engine, "
        "or set them to 0"
    )


@pytest.mark.parametrize("overridden", ["generate", "_sample"])
def test_a_model_class_with_its_own_sampling_samples_through_generate(tiny_model_dir, overridden):
    engine = TransformersEngine(tiny_model_dir, SETTINGS["top-p"])
    own = type("OwnSampling", (type(engine.model),), {overridden: lambda self, *a, **k: None})
    engine.model.__class__ = own
    assert not engine._loop_reproduces_generate()


def test_an_encoder_decoder_samples_through_generate(tiny_model_dir):
    engine = TransformersEngine(tiny_model_dir, SETTINGS["top-p"])
    engine.model.config.is_encoder_decoder = True
    assert not engine._loop_reproduces_generate()


def test_every_eos_of_the_generation_config_and_tokenizer_stops_and_pads_without_a_pad_token(
    tiny_model_dir, tmp_path
):
    import json
    import shutil

    model = shutil.copytree(tiny_model_dir, tmp_path / "model")
    generation = json.loads((model / "generation_config.json").read_text())
    generation["eos_token_id"] = [7, 2]  # a list, as Qwen3's own config gives
    (model / "generation_config.json").write_text(json.dumps(generation))
    tokenizer = json.loads((model / "tokenizer_config.json").read_text())
    tokenizer["pad_token"] = None
    (model / "tokenizer_config.json").write_text(json.dumps(tokenizer))
    engine = TransformersEngine(model, SETTINGS["greedy"])
    assert engine.tokenizer.eos_token_id == 2 and engine.tokenizer.pad_token_id is None
    assert engine.eos_ids == {2, 7}
    assert engine.pad_id == 2  # the smallest EOS id stands in for the missing pad


def test_the_fallback_asks_generate_for_every_setting_of_the_engine(tiny_model_dir):
    engine = TransformersEngine(tiny_model_dir, SETTINGS["all"])
    engine.uses_loop = False
    asked: dict = {}
    own_generate = engine.model.generate

    def spy(*args, **kwargs):
        asked.update(kwargs)
        return own_generate(*args, **kwargs)

    engine.model.generate = spy
    prompt = tuple(engine.tokenizer(PROMPT)["input_ids"])
    list(engine.generate([GenerationRequest(("x",), prompt, 4, 1)]))
    assert asked["attention_mask"].tolist() == [[1] * len(prompt)]
    assert {k: v for k, v in asked.items() if k != "attention_mask"} == {
        "do_sample": True,
        "temperature": 0.8,
        "top_p": 0.9,
        "top_k": 20,
        "min_p": 0.05,
        "repetition_penalty": 1.1,
        "max_new_tokens": 4,
        "eos_token_id": [2],
        "pad_token_id": 0,
    }


def test_greedy_through_generate_asks_for_no_sampling_setting(tiny_model_dir):
    engine = TransformersEngine(tiny_model_dir, SETTINGS["greedy"])
    engine.uses_loop = False
    asked: dict = {}
    own_generate = engine.model.generate
    engine.model.generate = lambda *a, **k: asked.update(k) or own_generate(*a, **k)
    prompt = tuple(engine.tokenizer(PROMPT)["input_ids"])
    list(engine.generate([GenerationRequest(("x",), prompt, 2, 1)]))
    assert not {"temperature", "top_p", "top_k", "min_p"} & set(asked)
    assert asked["do_sample"] is False


def test_requests_after_one_sampled_through_generate_are_sampled_too(tiny_model_dir):
    engine = TransformersEngine(tiny_model_dir, SETTINGS["top-p"])
    engine.uses_loop = False
    prompt = tuple(engine.tokenizer(PROMPT)["input_ids"])
    requests = [
        GenerationRequest(("a",), prompt, 3, 1),
        GenerationRequest(("b",), prompt[:-1], 3, 2),
    ]
    assert [r.key for r in engine.generate(requests)] == [("a",), ("b",)]


def test_a_request_with_an_empty_prompt_is_refused_by_its_key(tiny_model_dir):
    engine = TransformersEngine(tiny_model_dir, SETTINGS["top-p"])
    with pytest.raises(ValueError, match=r"request \('p', 3\) has an empty prompt"):
        list(engine.generate([GenerationRequest(("p", 3), (), 4, 0)]))


class StandInDevice:
    """torch as the engine calls it, on a device this machine lacks: each tensor or generator
    the engine makes records the device and dtype it asked for, and is made on the CPU."""

    MAKERS = ("empty", "ones", "tensor", "Generator")

    def __init__(self, torch, device: str):
        self._torch, self.device, self.asked = torch, device, []

    def __getattr__(self, name: str):
        made = getattr(self._torch, name)
        if name not in self.MAKERS:
            return made

        def make(*args, **kwargs):
            self.asked.append((name, kwargs.get("device"), kwargs.get("dtype")))
            if kwargs.get("device") == self.device:
                kwargs["device"] = "cpu"
            return made(*args, **kwargs)

        return make


def loaded_with(monkeypatch, change) -> None:
    """Models the engine loads are changed by `change` first (a stand-in for what only another
    machine or another transformers would load)."""
    from transformers import AutoModelForCausalLM

    load = AutoModelForCausalLM.from_pretrained

    def from_pretrained(*args, **kwargs):
        model = load(*args, **kwargs)
        change(model)
        return model

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", from_pretrained)


def test_the_loop_makes_its_tensors_and_generators_on_the_engines_device(tiny_model_dir):
    import torch

    engine = TransformersEngine(tiny_model_dir, SETTINGS["top-p"])
    engine.device = "cuda"
    engine._torch = stand_in = StandInDevice(torch, "cuda")
    prompt = tuple(engine.tokenizer(PROMPT)["input_ids"])
    list(engine.generate([GenerationRequest(("a", s), prompt, 3, s) for s in (1, 2)]))
    made = {name: (device, dtype) for name, device, dtype in stand_in.asked}
    # the ids and the mask on the device as int64; the prompt's ids copied in from the host
    assert made == {
        "empty": ("cuda", torch.long),
        "tensor": (None, torch.long),
        "ones": ("cuda", torch.long),
        "Generator": ("cuda", None),
    }
    assert [name for name, *_ in stand_in.asked].count("Generator") == 2  # one a row


def test_a_sample_through_generate_sends_its_prompt_to_the_engines_device(tiny_model_dir):
    import torch

    engine = TransformersEngine(tiny_model_dir, SETTINGS["top-p"])
    engine.uses_loop = False
    engine.device = "cuda"
    engine._torch = stand_in = StandInDevice(torch, "cuda")
    prompt = tuple(engine.tokenizer(PROMPT)["input_ids"])
    list(engine.generate([GenerationRequest(("a",), prompt, 2, 1)]))
    assert stand_in.asked == [("tensor", "cuda", torch.long)]


def test_the_model_is_sent_to_the_engines_device(tiny_model_dir, monkeypatch):
    sent: list = []

    def record_moves(model):
        model.to = lambda device: sent.append(device) or model

    loaded_with(monkeypatch, record_moves)
    TransformersEngine(tiny_model_dir, SETTINGS["top-p"], device="cuda")
    assert sent == ["cuda"]


def test_the_processors_read_float32_scores_from_a_bfloat16_model(tiny_model_dir):
    import torch

    engine = TransformersEngine(tiny_model_dir, SETTINGS["top-p"], dtype="bfloat16")
    scored = []
    processors = engine._processors
    engine._processors = lambda ids, scores: scored.append(scores.dtype) or processors(ids, scores)
    prompt = tuple(engine.tokenizer(PROMPT)["input_ids"])
    list(engine.generate([GenerationRequest(("a",), prompt, 3, 1)]))
    assert scored == [torch.float32] * 3


# `generate` switches a MoE model's `grouped_mm` experts to `batched_mm` for decoding except on
# the CPU (transformers' `GenerationMixin._optimize_model_for_decode`), a kernel the loop would
# not switch: (device, experts kernel, whether the loop reproduces `generate`)
MOE_CASES = [("cuda", "grouped_mm", False), ("cuda", "eager", True), ("cpu", "grouped_mm", True)]


@pytest.mark.parametrize(("device", "experts", "loop"), MOE_CASES)
def test_a_moe_model_whose_generate_switches_kernels_samples_through_generate(
    tiny_model_dir, monkeypatch, device, experts, loop
):
    import torch

    engine = TransformersEngine(tiny_model_dir, SETTINGS["top-p"])
    engine.model.config._experts_implementation = experts
    monkeypatch.setattr(type(engine.model), "device", property(lambda _: torch.device(device)))
    assert engine._loop_reproduces_generate() is loop


def test_a_model_of_a_transformers_without_experts_kernels_samples_through_the_loop_on_a_gpu(
    tiny_model_dir, monkeypatch
):
    import torch
    from transformers import PreTrainedModel

    engine = TransformersEngine(tiny_model_dir, SETTINGS["top-p"])
    monkeypatch.delattr(PreTrainedModel, "get_experts_implementation")
    monkeypatch.setattr(type(engine.model), "device", property(lambda _: torch.device("cuda")))
    assert engine._loop_reproduces_generate() is True


def test_sampling_passes_the_cache_by_the_forwards_own_name_with_no_deprecation_warning(
    tiny_model_dir,
):
    import warnings

    engine = TransformersEngine(tiny_model_dir, SETTINGS["top-p"])
    prompt = tuple(engine.tokenizer(PROMPT)["input_ids"])
    with warnings.catch_warnings():
        # transformers warns on every call that names the cache by its deprecated name
        warnings.simplefilter("error", FutureWarning)
        (got,) = engine.generate([GenerationRequest(("a",), prompt, 4, 1)])
    assert len(got.completion_ids) == 4


def test_a_forward_that_names_the_cache_past_key_values_gets_it_by_that_name(
    tiny_model_dir, monkeypatch
):
    """transformers before the rename to `cache`: the same samples, the cache by the old name."""

    def with_older_forward(model):
        current = type(model)

        def forward(self, input_ids=None, attention_mask=None, past_key_values=None, **flags):
            return current.forward(
                self, input_ids=input_ids, attention_mask=attention_mask, cache=past_key_values,
                **flags,
            )  # fmt: skip

        model.__class__ = type("OlderForward", (current,), {"forward": forward})

    engine = TransformersEngine(tiny_model_dir, SETTINGS["top-p"])
    prompt = tuple(engine.tokenizer(PROMPT)["input_ids"])
    requests = [GenerationRequest(("a", s), prompt, 6, s) for s in (1, 2)]
    expected = list(engine.generate(requests))
    loaded_with(monkeypatch, with_older_forward)
    older = TransformersEngine(tiny_model_dir, SETTINGS["top-p"])
    assert type(older.model).__name__ == "OlderForward" and older.uses_loop
    assert list(older.generate(requests)) == expected


def test_a_model_sampled_through_generate_is_logged_once_by_its_path(
    tiny_model_dir, tmp_path, caplog
):
    import json
    import logging
    import shutil

    model = shutil.copytree(tiny_model_dir, tmp_path / "model")
    generation = json.loads((model / "generation_config.json").read_text())
    generation["no_repeat_ngram_size"] = 3
    (model / "generation_config.json").write_text(json.dumps(generation))
    with caplog.at_level(logging.INFO, logger="prover_assets.generation.engines"):
        engine = TransformersEngine(model, SETTINGS["top-p"])
    assert not engine.uses_loop
    assert [r.getMessage() for r in caplog.records] == [
        f"{model}: sampling through HF generate (its generation config asks more)"
    ]


def test_a_model_sampled_through_the_loop_logs_nothing(tiny_model_dir, caplog):
    import logging

    with caplog.at_level(logging.INFO, logger="prover_assets.generation.engines"):
        engine = TransformersEngine(tiny_model_dir, SETTINGS["top-p"])
    assert engine.uses_loop and caplog.records == []


def test_no_more_than_rows_per_batch_samples_are_sampled_at_once(tiny_model_dir):
    from prover_assets.generation.engines import ROWS_PER_BATCH

    engine = TransformersEngine(tiny_model_dir, SETTINGS["top-p"])
    sizes: list[int] = []
    rows = engine._sample_rows
    engine._sample_rows = lambda group: sizes.append(len(group)) or rows(group)
    prompt = tuple(engine.tokenizer(PROMPT)["input_ids"])
    requests = [GenerationRequest(("r", i), prompt, 2, i) for i in range(ROWS_PER_BATCH + 1)]
    assert [r.key for r in engine.generate(requests)] == [r.key for r in requests]
    assert sizes == [ROWS_PER_BATCH, 1]
