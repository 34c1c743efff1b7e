"""Export: merged weights in a plain HF folder, revision from the weights, logprob parity."""

import json

import numpy as np
import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

from prover_assets.config import TrainingSpec
from prover_assets.generation.revision import model_revision, weights_sha256
from prover_assets.sft import export
from prover_assets.sft.export import MERGE_TOLERANCE, ExportResult, export_merged
from prover_assets.sft.shards import ShardWriter
from prover_assets.sft.stages import parity_inputs
from prover_assets.sft.trainer import FINAL_ADAPTER, TrainRun, train
from prover_assets_tests.factories import make_sft_row
from prover_assets_tests.support import gpu_missing


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny_model_dir):
    """A LoRA adapter trained for a few steps on the tiny model, and its shards."""
    root = tmp_path_factory.mktemp("export")
    rng = np.random.default_rng(2)
    writer = ShardWriter(root / "shards")
    for i in range(8):
        ids = rng.integers(3, 1000, 40).tolist()
        writer.write_row(make_sft_row(ids, prompt_len=25, sample_idx=i, proof_sha="b" * 64))
    writer.close()
    spec = TrainingSpec(
        lora_r=4,
        lora_alpha=8,
        lora_dropout=0.0,
        target_modules=["q_proj", "v_proj"],
        learning_rate=5e-3,
        lr_scheduler="constant",
        warmup_ratio=0.0,
        epochs=2,
        tokens_per_micro_batch=128,
        gradient_accumulation=1,
        save_every=4,
        keep_checkpoints=2,
        seed=1,
        pad_token_id=None,
        precision="fp32",
    )
    run = TrainRun(
        shards_dir=str(root / "shards"),
        base_model_dir=str(tiny_model_dir),
        output_dir=str(root / "train"),
        training=spec.model_dump(mode="json"),
        device="cpu",
    )
    assert train(run)["status"] == "done"
    return root


def export_to(root, tiny_model_dir, name, dtype):
    folder = root / name / "model"
    return folder, export_merged(
        tiny_model_dir,
        root / "train" / FINAL_ADAPTER,
        folder,
        parity_inputs=parity_inputs(root / "shards"),
        dtype=dtype,
    )


@pytest.fixture(scope="module")
def exported(trained, tiny_model_dir):
    return export_to(trained, tiny_model_dir, "export", "float32")


@pytest.fixture(scope="module")
def exported_bf16(trained, tiny_model_dir):
    return export_to(trained, tiny_model_dir, "export-bf16", "bfloat16")


def test_the_export_tells_each_phase_as_it_begins_and_then_that_it_is_done(trained, tiny_model_dir):
    told = []
    export_merged(
        tiny_model_dir,
        trained / "train" / FINAL_ADAPTER,
        trained / "phases" / "model",
        parity_inputs=parity_inputs(trained / "shards")[:1],
        on_phase=lambda done, total, phase: told.append((done, total, phase)),
    )
    total = len(export.EXPORT_PHASES)
    assert told == [
        *((i, total, p) for i, p in enumerate(export.EXPORT_PHASES)),
        (total, total, "done"),
    ]


def test_an_export_on_the_host_says_so(exported):
    assert exported[1].merged_on == "cpu"


QWEN3_8B_PARAMETERS = 8_190_735_360  # Qwen3-8B with its untied head (its model card: 8.2B)


@pytest.mark.parametrize(
    ("gpus", "card_gib", "parameters", "device"),
    [
        ([], 80.0, QWEN3_8B_PARAMETERS, "cpu"),  # training on the host: merged there
        ([3, 4], 80.0, QWEN3_8B_PARAMETERS, "cuda:3"),  # 4 x 8.19e9 x 1.25 = 38.1 GiB fits
        ([0], 32.0, QWEN3_8B_PARAMETERS, "cpu"),  # 38.1 GiB does not fit 32
        ([0], 80.0, 70_000_000_000, "cpu"),  # 70B in fp32: 326 GiB
        ([0], 5.0, 1 << 30, "cuda:0"),  # 4 x 2^30 x 1.25 = 5 GiB: fits exactly
    ],
)
def test_the_merge_runs_on_the_first_training_gpu_when_the_fp32_model_fits(
    gpus, card_gib, parameters, device
):
    assert export.merge_device(gpus, card_gib, parameters) == device


@pytest.mark.parametrize(
    ("trains_on_gpu", "card_gib", "planned"),
    [
        (True, 80.0, (2 << 30, "cuda:0")),  # 38.1 GiB fits: one weight file on the host
        (True, 32.0, (4 * QWEN3_8B_PARAMETERS, "cpu")),  # does not fit: the fp32 merge
        (False, 80.0, (4 * QWEN3_8B_PARAMETERS, "cpu")),  # training on the host
    ],
)
def test_a_plan_s_export_is_on_a_gpu_only_where_training_is_and_the_model_fits(
    trains_on_gpu, card_gib, planned
):
    assert (
        export.planned_export(card_gib, QWEN3_8B_PARAMETERS, trains_on_gpu=trains_on_gpu) == planned
    )


def test_the_logprobs_are_each_positions_softmax_and_the_next_tokens_share_of_it(tiny_model_dir):
    import math

    import torch

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    ids = [5, 17, 3, 250, 9]
    [(full, own)] = export.logprobs(model, [ids])
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0].tolist()
    # by hand, position by position: log p(v) = logit(v) - log sum exp(logits)
    normalisers = [math.log(sum(math.exp(x) for x in row)) for row in logits]
    expected_own = [logits[i][ids[i + 1]] - normalisers[i] for i in range(len(ids) - 1)]
    assert own.tolist() == pytest.approx(expected_own, abs=1e-5)
    assert full.shape == (len(ids), len(logits[0]))
    assert full[2, 7].item() == pytest.approx(logits[2][7] - normalisers[2], abs=1e-5)


def test_the_largest_difference_of_no_inputs_is_zero_and_of_unequal_ones_refused():
    import torch

    assert export._max_diff([], [], 1) == 0.0
    one = [(torch.zeros(2), torch.zeros(2))]
    with pytest.raises(ValueError):
        export._max_diff(one, one * 2, 1)


def test_the_host_peak_of_a_merge_on_a_gpu_is_one_weight_file():
    assert export.export_host_peak_bytes(QWEN3_8B_PARAMETERS, "cuda:0") == 2 << 30
    assert export.export_host_peak_bytes(QWEN3_8B_PARAMETERS) == 4 * QWEN3_8B_PARAMETERS
    assert export.export_host_peak_bytes(1000, "cuda:0") == 4000  # smaller than a file


def test_the_export_is_written_in_files_of_at_most_the_shard_size(
    trained, tiny_model_dir, monkeypatch
):
    """What bounds the host's share of a GPU merge: the files are cut at EXPORT_SHARD_BYTES
    (here 64 KiB on the tiny model: several files, each no larger unless one tensor is)."""
    monkeypatch.setattr(export, "EXPORT_SHARD_BYTES", 64 << 10)
    folder, result = export_to(trained, tiny_model_dir, "sharded", "float32")
    files = sorted(folder.glob("*.safetensors"))
    assert len(files) > 1 and result.parity_passed
    assert model_revision(folder) == result.revision


def test_a_merge_on_a_gpu_loads_each_model_onto_it(trained, tiny_model_dir, monkeypatch):
    """Stand-in for the GPU (none here): the device each model is asked onto, and the
    log-probabilities read back to the host."""
    from transformers import AutoModelForCausalLM

    real = AutoModelForCausalLM.from_pretrained
    asked = []

    def loaded(folder, **options):
        asked.append(options.pop("device_map", "host"))
        return real(folder, **options)

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", loaded)
    folder = trained / "on-gpu" / "model"
    result = export.export_merged(
        tiny_model_dir,
        trained / "train" / FINAL_ADAPTER,
        folder,
        parity_inputs=parity_inputs(trained / "shards"),
        device="cuda:2",
    )
    assert asked == ["cuda:2"] * 3 and result.merged_on == "cuda:2"


def test_revision_is_sft_and_the_sha256_of_the_weight_shards(exported):
    folder, result = exported
    assert result.revision == f"sft-{weights_sha256(folder)}"
    assert model_revision(folder) == result.revision


def test_reloaded_export_reproduces_the_adapter_models_logprobs(exported):
    _, result = exported
    assert result.parity_passed
    assert result.merge_max_abs_diff <= 2e-5
    assert result.cast_drift <= 2e-5  # fp32 saved and reloaded: no cast
    assert result.parity_tokens > 0


def test_a_correct_merge_exported_in_bf16_passes_with_a_drift_of_the_base_models_size(
    exported_bf16,
):
    from safetensors import safe_open

    folder, result = exported_bf16
    assert result.parity_passed, result.parity_failures()
    assert result.merge_max_abs_diff <= MERGE_TOLERANCE  # merged in fp32, whatever the export
    # The cast moves log-probabilities far more than the fp32 merge does, for the base as for the
    # merge: one bound for both would be too loose for the one or too tight for the other.
    assert result.base_cast_drift > 100 * result.merge_max_abs_diff
    assert result.cast_drift > 100 * result.merge_max_abs_diff
    (weights,) = folder.glob("*.safetensors")
    with safe_open(str(weights), framework="pt") as handle:
        assert {str(handle.get_tensor(k).dtype) for k in list(handle.keys())} == {"torch.bfloat16"}
    recorded = json.loads((folder.parent / "parity.json").read_text())
    assert recorded["cast_drift"] == result.cast_drift


def perturb_one_q_proj(model):
    import torch

    weight = next(w for n, w in model.named_parameters() if n.endswith("q_proj.weight"))
    with torch.no_grad():
        weight.add_(0.05)
    return model


def test_a_merge_with_one_perturbed_tensor_fails_the_fp32_merge_parity(
    trained, tiny_model_dir, monkeypatch
):
    from peft.tuners.tuners_utils import BaseTuner

    merge = BaseTuner.merge_and_unload
    monkeypatch.setattr(
        BaseTuner, "merge_and_unload", lambda self, **kw: perturb_one_q_proj(merge(self, **kw))
    )
    _, result = export_to(trained, tiny_model_dir, "perturbed-merge", "bfloat16")
    assert not result.parity_passed
    assert result.merge_max_abs_diff > MERGE_TOLERANCE
    assert "fp32 merge differs" in result.parity_failures()[0]
    # over every token of the vocabulary, not only each input's next one: a perturbation that
    # moves every logit moves some other token's more than the one token per position
    assert result.merge_max_abs_diff_full_vocabulary > result.merge_max_abs_diff


def test_an_export_with_one_tensor_perturbed_after_the_cast_fails_on_its_drift(
    trained, tiny_model_dir, monkeypatch
):
    cast = export._cast
    monkeypatch.setattr(
        export, "_cast", lambda model, dtype: perturb_one_q_proj(cast(model, dtype))
    )
    _, result = export_to(trained, tiny_model_dir, "perturbed-cast", "bfloat16")
    assert result.merge_max_abs_diff <= MERGE_TOLERANCE
    assert result.cast_drift > result.cast_drift_allowance
    assert [f for f in result.parity_failures() if "drifts" in f]


def measured(merge: float, drift: float, base_drift: float) -> ExportResult:
    return ExportResult(
        revision="sft-x",
        dtype="bfloat16",
        merge_max_abs_diff=merge,
        merge_max_abs_diff_full_vocabulary=merge,
        merge_tolerance=1e-5,
        cast_drift=drift,
        base_cast_drift=base_drift,
        cast_drift_allowance=2 * base_drift + 1e-5,
        parity_inputs=1,
        parity_tokens=10,
    )


@pytest.mark.parametrize(
    ("merge", "drift", "base_drift", "failed"),
    [
        (1e-5, 2 * 0.01 + 1e-5, 0.01, []),  # at both bounds: passes
        (1.1e-5, 0.0, 0.01, ["merge"]),
        (0.0, 0.0200101, 0.01, ["drift"]),  # just past 2 x 0.01 + 1e-5
        (1.0, 1.0, 0.01, ["merge", "drift"]),
    ],
)
def test_the_export_fails_exactly_the_bounds_it_exceeds(merge, drift, base_drift, failed):
    failures = measured(merge, drift, base_drift).parity_failures()
    assert [("merge" if "merge differs" in f else "drift") for f in failures] == failed
    assert measured(merge, drift, base_drift).parity_passed == (not failed)


def test_export_is_a_plain_folder_with_tokenizer_and_chat_template(exported):
    folder, _ = exported
    model = AutoModelForCausalLM.from_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert not any("lora" in name for name, _ in model.named_parameters())
    assert tokenizer.chat_template
    assert json.loads((folder / "config.json").read_text())["model_type"] == "qwen3"


def test_the_adapter_changed_the_model(exported, tiny_model_dir):
    """A parity check on an unchanged model would prove nothing: the merge must differ from the base."""
    import torch

    folder, _ = exported
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir).state_dict()
    merged = AutoModelForCausalLM.from_pretrained(folder).state_dict()
    assert any(not torch.equal(base[name], merged[name]) for name in base if "q_proj" in name)


@pytest.mark.gpu
@pytest.mark.skipif(gpu_missing() is not None, reason=gpu_missing() or "")
def test_vllm_loads_the_export_and_matches_its_first_token_logprobs(exported):
    import torch
    from vllm import LLM, SamplingParams

    folder, _ = exported
    prompts = [ids[:48] for ids in parity_inputs(folder.parents[1] / "shards")]
    llm = LLM(
        model=str(folder), dtype="float32", enforce_eager=True, gpu_memory_utilization=0.3, seed=0
    )
    outputs = llm.generate(
        [{"prompt_token_ids": p} for p in prompts],
        SamplingParams(max_tokens=1, temperature=0, logprobs=5),
    )
    del llm
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).to("cuda").eval()
    for prompt, output in zip(prompts, outputs, strict=True):
        with torch.no_grad():
            logits = model(torch.tensor([prompt], device="cuda")).logits[0, -1]
        expected = torch.log_softmax(logits.float(), -1)
        for token, entry in output.outputs[0].logprobs[0].items():
            assert entry.logprob == pytest.approx(float(expected[token]), abs=1e-3)


@pytest.mark.slow
def test_each_model_of_the_export_is_freed_before_the_next_is_loaded(
    trained, tiny_model_dir, monkeypatch
):
    import gc
    import weakref

    load = export._load
    loaded: list[weakref.ref] = []

    def watched(folder, dtype, device):
        gc.collect()
        alive = [ref for ref in loaded if ref() is not None]
        assert alive == [], f"{len(alive)} model(s) still alive when the next is loaded"
        model = load(folder, dtype, device)
        loaded.append(weakref.ref(model))
        return model

    monkeypatch.setattr(export, "_load", watched)
    export_to(trained, tiny_model_dir, "freed", "bfloat16")
    gc.collect()
    assert len(loaded) == 3 and all(ref() is None for ref in loaded)


PEAK_SCRIPT = """
import json, re, sys, threading, time
from pathlib import Path
sys.path.insert(0, {root!r})
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM
from prover_assets.demo.tiny_model import build_tiny_model
from prover_assets.sft.export import export_merged

def anonymous():
    text = Path("/proc/self/smaps_rollup").read_text()
    return int(re.search(r"^Anonymous:\\s+(\\d+) kB$", text, re.M)[1]) << 10

work = Path({work!r})
import torch
build_tiny_model(work / "base", hidden_size=512, layers=8, vocab_size=1024, seed=3)
# in bf16 on disk, as the registered base is: the fp32 merge converts it into its own memory
AutoModelForCausalLM.from_pretrained(work / "base").to(torch.bfloat16).save_pretrained(work / "base")
base = AutoModelForCausalLM.from_pretrained(work / "base")
parameters = sum(p.numel() for p in base.parameters())
lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])
get_peft_model(base, lora).save_pretrained(work / "adapter")
del base
import gc; gc.collect()
baseline, peak, done = anonymous(), [0], threading.Event()
def sample():
    while not done.is_set():
        peak[0] = max(peak[0], anonymous())
        time.sleep(0.002)
sampler = threading.Thread(target=sample); sampler.start()
export_merged(work / "base", work / "adapter", work / "out" / "model",
              parity_inputs=[[5, 6, 7, 8]], dtype="bfloat16")
done.set(); sampler.join()
print(json.dumps({{"parameters": parameters, "peak": peak[0] - baseline}}))
"""


@pytest.mark.slow
def test_the_exports_host_peak_is_the_fp32_merge_as_its_model_says(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    from prover_assets.sft.export import export_host_peak_bytes

    script = PEAK_SCRIPT.format(root=str(Path(__file__).parents[2]), work=str(tmp_path))
    # A fixed mmap threshold: glibc's dynamic one would keep this small model's freed tensors
    # (a few MB each) in its heap; the registered model's (hundreds of MB) are mapped and
    # returned whatever the threshold.
    environment = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
        env=environment,
    )
    measured = json.loads(done.stdout.splitlines()[-1])
    modelled = export_host_peak_bytes(measured["parameters"])
    # The process's own (anonymous) memory above its start, sampled every 2 ms, against the
    # model: the fp32 merge, 4 bytes a parameter (the bf16 base is read from its mapped file).
    assert 0.9 * modelled <= measured["peak"] <= 1.2 * modelled, measured


def test_the_export_merges_on_the_threads_it_is_given_and_puts_them_back(tmp_path, monkeypatch):
    import torch

    from prover_assets.sft import stages
    from prover_assets_tests.records.test_consumers import completed

    class Merged(Exception):
        """Raised by the stand-in for the merge: the threads it ran on."""

    def merge(*args, **kwargs):
        raise Merged(torch.get_num_threads())

    monkeypatch.setattr(export, "export_merged", merge)
    monkeypatch.setattr(stages, "parity_inputs", lambda shards: [])
    before = torch.get_num_threads()
    given = 3 if before != 3 else 2
    checkpoint = completed(tmp_path / "checkpoint", {"adapter_model.safetensors": b"\x02" * 64})
    with pytest.raises(Merged) as merged:
        stages.materialize_export(
            tmp_path / "export",
            checkpoint_dir=checkpoint,
            base_model_dir=tmp_path,
            shards_dir=tmp_path,
            dtype="float32",
            cpu_threads=given,
        )
    assert merged.value.args == (given,)
    assert torch.get_num_threads() == before
