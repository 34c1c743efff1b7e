"""Packing and LoRA training with the tiny model: loss parity, schedule, stop/kill and resume."""

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from prover_assets.config import TrainingSpec
from prover_assets.sft.micro_batches import PackedDataset, collate
from prover_assets.sft.packing import first_fit_decreasing, training_schedule
from prover_assets.sft.shards import SftDataset, ShardWriter, pack
from prover_assets.sft.trainer import (
    BUSY_EXIT_CODE,
    CHECKPOINTS,
    DATA_ORDER_FILE,
    FINAL_ADAPTER,
    METRICS_FILE,
    PROGRESS_FILE,
    STOPPED_EXIT_CODE,
    TrainRun,
    run_mean_loss,
)
from prover_assets.sft.validity import check_data_order
from prover_assets_tests.factories import make_sft_row


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("shards")
    rng = np.random.default_rng(0)
    writer = ShardWriter(folder)
    for i in range(20):
        prompt, completion = int(rng.integers(10, 40)), int(rng.integers(4, 30))
        ids = rng.integers(3, 1000, prompt + completion).tolist()
        writer.write_row(make_sft_row(ids, prompt_len=prompt, sample_idx=i))
    writer.close()
    return folder


def trainer_loss(model, dataset, rows):
    """The loss the Trainer computes for a micro-batch of `rows`, through its dataset and collate."""
    import torch

    from prover_assets.sft.packing import Schedule

    schedule = Schedule((tuple(rows),), capacity=10_000, epochs=1, real_tokens=0)
    batch = collate([PackedDataset(dataset, schedule)[0]])
    batch.pop("micro_step")
    with torch.no_grad():
        loss = model(**batch).loss
    # the model shifts labels by one: the first label of a row is never predicted
    return float(loss), int((batch["labels"][0, 1:] != -100).sum())


def test_packed_loss_equals_the_token_weighted_mean_of_rows_computed_alone(tiny_model_dir, shards):
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    dataset = SftDataset(shards)
    rows = [0, 1, 2, 3]
    packed_loss, _ = trainer_loss(model, dataset, rows)
    alone = [trainer_loss(model, dataset, [row]) for row in rows]
    expected = sum(loss * tokens for loss, tokens in alone) / sum(tokens for _, tokens in alone)
    assert packed_loss == pytest.approx(expected, abs=1e-5)


def test_with_a_kv_cache_rows_would_attend_across_the_boundary(tiny_model_dir, shards):
    """The control: with a cache, transformers ignores the position resets, and the loss moves."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    dataset = SftDataset(shards)
    packed_loss, _ = trainer_loss(model, dataset, [0, 1, 2, 3])
    batch = pack(dataset, [0, 1, 2, 3])
    with torch.no_grad():
        leaking = model(
            input_ids=torch.from_numpy(batch.input_ids)[None],
            labels=torch.from_numpy(batch.labels)[None],
            position_ids=torch.from_numpy(batch.position_ids)[None],
            use_cache=True,
        ).loss
    assert abs(float(leaking) - packed_loss) > 1e-4


def test_first_fit_decreasing_respects_capacity_and_places_every_row_once():
    lengths = [50, 40, 30, 30, 20, 10, 10, 5]
    bins = first_fit_decreasing(lengths, 60, range(len(lengths)))
    assert sorted(r for b in bins for r in b) == list(range(len(lengths)))
    assert all(sum(lengths[r] for r in b) <= 60 for b in bins)
    assert len(bins) == 4  # 195 tokens need at least ceil(195/60) = 4 bins


def test_schedule_sees_every_row_exactly_epochs_times_in_a_seeded_order():
    lengths = [int(n) for n in np.random.default_rng(1).integers(5, 60, 30)]
    one = training_schedule(lengths, 128, epochs=3, seed=7)
    two = training_schedule(lengths, 128, epochs=3, seed=7)
    other = training_schedule(lengths, 128, epochs=3, seed=8)
    seen = np.bincount([r for batch in one.micro_batches for r in batch], minlength=30)
    assert seen.tolist() == [3] * 30
    assert one == two and one.micro_batches != other.micro_batches
    assert 0 < one.packing_efficiency <= 1


def training(**overrides) -> TrainingSpec:
    fields = {
        "lora_r": 4,
        "lora_alpha": 8,
        "lora_dropout": 0.1,
        "target_modules": ["q_proj", "v_proj"],
        "learning_rate": 1e-3,
        "lr_scheduler": "cosine",
        "warmup_ratio": 0.0,
        "epochs": 3,
        "tokens_per_micro_batch": 96,
        "gradient_accumulation": 2,
        "save_every": 2,
        "keep_checkpoints": 2,
        "seed": 3,
        "pad_token_id": None,
        "precision": "fp32",
    }
    fields.update(overrides)
    return TrainingSpec(**fields)


def run_file(tmp_path, name, tiny_model_dir, shards) -> Path:
    run = TrainRun(
        shards_dir=str(shards),
        base_model_dir=str(tiny_model_dir),
        output_dir=str(tmp_path / name),
        training=training().model_dump(mode="json"),
        device="cpu",
        cpu_threads=1,  # every run alike: the references are compared bit for bit
    )
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(asdict(run)))
    return path


def start(path: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "prover_assets.sft.trainer", str(path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def wait_for(predicate, timeout=180):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise TimeoutError


def losses(folder: Path) -> list[tuple[int, float]]:
    return [
        (m["step"], m["loss"])
        for m in map(json.loads, (folder / METRICS_FILE).read_text().splitlines())
        if "loss" in m
    ]


def final_train_loss(folder: Path) -> float:
    (final,) = [
        m["train_loss"]
        for m in map(json.loads, (folder / METRICS_FILE).read_text().splitlines())
        if "train_loss" in m
    ]
    return final


def test_the_runs_mean_loss_is_every_steps_own_once_the_last_logged_kept(tmp_path):
    metrics = tmp_path / METRICS_FILE
    lines = [
        {"step": 1, "loss": 0.5, "learning_rate": 1e-4},
        {"step": 2, "loss": 0.25},
        {"step": 2, "loss": 0.75},  # a step logged again after a resume: the later line counts
        {"step": 3, "eval": 1.0},  # a line without a loss is not a step's
        {"step": 4, "loss": 1.0},
    ]
    metrics.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert run_mean_loss(metrics) == pytest.approx((0.5 + 0.75 + 1.0) / 3)
    assert run_mean_loss(tmp_path / "absent.jsonl") is None


# CPU float reductions are not bit-reproducible from one process to another (CI measured
# 1-ulp loss differences after a resume), so a resumed run is held to the reference's steps
# exactly and to its values within 1e-5; a repeated or skipped micro-step moves a loss by 1e-3.
RESUME_RTOL = 1e-5


def assert_same_losses(folder: Path, reference: Path) -> None:
    resumed, expected = losses(folder), losses(reference)
    assert [step for step, _ in resumed] == [step for step, _ in expected]
    assert [loss for _, loss in resumed] == pytest.approx(
        [loss for _, loss in expected], rel=RESUME_RTOL
    )


def assert_each_row_epochs_times(folder: Path, summary: dict) -> None:
    """The order log holds every micro-step once and each of the 20 rows 3 times."""
    assert check_data_order(
        folder / DATA_ORDER_FILE, micro_steps=summary["micro_steps"], rows=20, epochs=3
    ).passed


def assert_same_adapter(folder: Path, reference: Path) -> None:
    resumed, expected = (
        load_file(str(f / FINAL_ADAPTER / "adapter_model.safetensors")) for f in (folder, reference)
    )
    assert resumed.keys() == expected.keys()
    for name, tensor in expected.items():
        assert torch.allclose(resumed[name], tensor, rtol=RESUME_RTOL, atol=1e-7), name


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny_model_dir, shards) -> dict:
    """One whole run, as the SFT step runs it (`_run_trainer`), with the progress it told: the
    reference the interrupted runs are held to, and the progress test's run."""
    from prover_assets.sft.stages import _run_trainer

    tmp = tmp_path_factory.mktemp("reference")
    path = run_file(tmp, "out", tiny_model_dir, shards)
    received: list = []
    run = TrainRun(**json.loads(path.read_text()))
    code = _run_trainer(
        path, run, "", tmp / "train.log", tmp / "out" / PROGRESS_FILE, received.append
    )
    return {"code": code, "out": tmp / "out", "received": received}


@pytest.fixture(scope="module")
def uninterrupted(trained) -> Path:
    assert trained["code"] == 0
    return trained["out"]


@pytest.mark.slow
def test_sigterm_saves_and_exits_143_then_resume_matches_an_uninterrupted_run(
    tmp_path, tiny_model_dir, shards, uninterrupted
):
    path = run_file(tmp_path, "out", tiny_model_dir, shards)
    out = tmp_path / "out"
    process = start(path)
    wait_for(lambda: (out / METRICS_FILE).exists() and len(losses(out)) >= 3)
    os.killpg(process.pid, signal.SIGTERM)
    assert process.wait() == STOPPED_EXIT_CODE
    stopped_at = json.loads((out / "summary.json").read_text())["global_step"]
    assert 3 <= stopped_at < json.loads((uninterrupted / "summary.json").read_text())["max_steps"]
    assert not (out / FINAL_ADAPTER).exists()
    assert start(path).wait() == 0
    assert_same_losses(out, uninterrupted)
    assert_same_adapter(out, uninterrupted)
    summary = json.loads((out / "summary.json").read_text())
    assert_each_row_epochs_times(out, summary)


@pytest.mark.slow
def test_kill_9_then_resume_from_the_last_complete_checkpoint_matches(
    tmp_path, tiny_model_dir, shards, uninterrupted
):
    path = run_file(tmp_path, "out", tiny_model_dir, shards)
    out = tmp_path / "out"
    process = start(path)
    wait_for(
        lambda: (
            any((p / ".complete").exists() for p in (out / CHECKPOINTS).glob("checkpoint-*"))
            and len(losses(out)) >= 4
        )
    )
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    partial = out / CHECKPOINTS / "checkpoint-999"
    partial.mkdir()  # a save the kill interrupted: no completion marker
    assert start(path).wait() == 0
    summary = json.loads((out / "summary.json").read_text())
    assert "checkpoint-999" in summary["removed_partial_checkpoints"]
    assert summary["resumed_from_step"] >= 1
    assert_same_losses(out, uninterrupted)
    assert_same_adapter(out, uninterrupted)
    assert_each_row_epochs_times(out, summary)
    assert final_train_loss(out) == pytest.approx(final_train_loss(uninterrupted), rel=RESUME_RTOL)
    # by hand: the mean of the uninterrupted run's per-step losses
    per_step = [loss for _, loss in losses(uninterrupted)]
    assert final_train_loss(uninterrupted) == pytest.approx(sum(per_step) / len(per_step))


@pytest.mark.slow
def test_the_trainer_runs_on_the_threads_it_is_asked_for(uninterrupted):
    """Asked for 1 (`run_file`): torch's default would take every core of the host."""
    assert json.loads((uninterrupted / "summary.json").read_text())["cpu_threads"] == 1


@pytest.mark.slow
def test_last_two_checkpoints_are_kept(uninterrupted):
    kept = sorted(p.name for p in (uninterrupted / CHECKPOINTS).iterdir())
    assert len(kept) == 2


def test_data_order_check_fails_on_a_repeated_micro_step(tmp_path):
    log = tmp_path / DATA_ORDER_FILE
    log.write_text("".join(json.dumps({"micro_step": s, "rows": [s]}) + "\n" for s in [0, 1, 1, 2]))
    outcome = check_data_order(log, micro_steps=3, rows=3, epochs=1)
    assert not outcome.passed
    assert outcome.metadata["repeated"] == [1]


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2] != "Z"


RUN_STEP = (
    "import json, sys; from pathlib import Path; from prover_assets.sft.stages import _run_trainer; "
    "from prover_assets.sft.trainer import TrainRun; p = Path(sys.argv[1]); "
    "_run_trainer(p, TrainRun(**json.loads(p.read_text())), '', Path(sys.argv[2]), "
    "Path(sys.argv[3]), lambda at: None)"
)


@pytest.mark.slow
def test_kill_9_of_the_runs_process_group_leaves_no_trainer_and_resume_repeats_no_micro_step(
    tmp_path, tiny_model_dir, shards, uninterrupted, monkeypatch
):
    """The run (a process that starts the trainer as the SFT step does) is killed with its
    whole process group; the trainer, in its own session, must die with it."""
    path = run_file(tmp_path, "out", tiny_model_dir, shards)
    out = tmp_path / "out"
    monkeypatch.setenv("PROVER_ASSETS_CHILDREN_DIR", str(tmp_path / "children"))
    step = subprocess.Popen(
        [
            sys.executable,
            "-c",
            RUN_STEP,
            str(path),
            str(tmp_path / "train.log"),
            str(tmp_path / "progress.jsonl"),
        ],
        start_new_session=True,
    )
    wait_for(lambda: (out / METRICS_FILE).exists() and len(losses(out)) >= 3)
    trainer = int((out / ".lock").read_text())
    assert os.getpgid(trainer) != step.pid  # its own session: the group kill cannot reach it
    os.killpg(step.pid, signal.SIGKILL)
    step.wait()
    wait_for(lambda: not pid_alive(trainer), timeout=5)
    assert start(path).wait() == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["resumed_from_step"] >= 1
    assert_each_row_epochs_times(out, summary)
    assert_same_losses(out, uninterrupted)


@pytest.mark.slow
def test_a_second_trainer_on_the_same_folder_refuses_naming_the_holder(
    tmp_path, tiny_model_dir, shards
):
    path = run_file(tmp_path, "out", tiny_model_dir, shards)
    out = tmp_path / "out"
    first = start(path)
    wait_for(lambda: (out / ".lock").exists() and (out / ".lock").read_text().strip())
    second_run = json.loads(path.read_text()) | {"lock_wait_s": 0.5}
    second_path = tmp_path / "second.json"
    second_path.write_text(json.dumps(second_run))
    second = subprocess.run(
        [sys.executable, "-m", "prover_assets.sft.trainer", str(second_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    assert second.returncode == BUSY_EXIT_CODE
    assert f"pid {first.pid}" in second.stdout


@pytest.mark.slow
def test_the_step_is_told_the_trainers_progress_as_it_trains(trained):
    assert trained["code"] == 0
    received = trained["received"]
    summary = json.loads((trained["out"] / "summary.json").read_text())
    steps = [at.step for at in received]
    # one line per logged optimizer step (the last twice: the step's log and the run's summary)
    assert sorted(set(steps)) == list(range(1, summary["max_steps"] + 1))
    assert all(at.steps == summary["max_steps"] and at.first_step == 0 for at in received)
    assert [at.tokens for at in received] == sorted(at.tokens for at in received)
    assert received[-1].tokens > 0 and received[0].loss is not None


def two_rank_run_file(tmp_path, tiny_model_dir, shards) -> Path:
    path = run_file(tmp_path, "out", tiny_model_dir, shards)
    path.write_text(json.dumps(json.loads(path.read_text()) | {"ranks": 2}))
    return path


def start_ranks(path: Path, log: Path) -> subprocess.Popen:
    from prover_assets.sft.ranks import trainer_command

    with open(log, "ab") as handle:
        return subprocess.Popen(
            trainer_command(str(path), 2),
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
        )


def order_of(folder: Path) -> list[tuple[int, list[int]]]:
    lines = (folder / DATA_ORDER_FILE).read_text().splitlines()
    return [(e["micro_step"], e["rows"]) for e in map(json.loads, lines)]


@pytest.mark.slow
def test_two_gloo_ranks_train_the_one_process_micro_steps_each_row_epochs_times(
    tmp_path, tiny_model_dir, shards, uninterrupted
):
    path = two_rank_run_file(tmp_path, tiny_model_dir, shards)
    out = tmp_path / "out"
    process = start_ranks(path, tmp_path / "train.log")
    assert process.wait() == 0, (tmp_path / "train.log").read_text()[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ranks"] == 2
    assert order_of(out) == order_of(uninterrupted)  # rank 0 wrote both ranks' micro-steps
    assert_each_row_epochs_times(out, summary)
    assert [s for s, _ in losses(out)] == [s for s, _ in losses(uninterrupted)]
    assert (out / FINAL_ADAPTER / "adapter_model.safetensors").exists()
    assert not list((out / CHECKPOINTS).glob("checkpoint-*/rng_state.pth"))  # one per rank
    assert all(
        {"rng_state_0.pth", "rng_state_1.pth"} <= {p.name for p in c.iterdir()}
        for c in (out / CHECKPOINTS).glob("checkpoint-*")
    )


def rank_processes(path: Path) -> list[int]:
    """The trainer ranks (not torchrun) of the run file `path`."""
    import psutil

    found = []
    for process in psutil.process_iter(["pid", "cmdline", "environ"]):
        cmdline = process.info["cmdline"] or []
        environ = process.info["environ"] or {}
        if str(path) in cmdline and "LOCAL_RANK" in environ:
            found.append(process.info["pid"])
    return found


def interrupted_two_rank_run(tmp_path, tiny_model_dir, shards, signum):
    """Two ranks started, `signum` sent to their launcher's session after 3 logged steps; the
    run file, the output folder and the ranks' pids."""
    path = two_rank_run_file(tmp_path, tiny_model_dir, shards)
    out = tmp_path / "out"
    launcher = start_ranks(path, tmp_path / "train.log")
    wait_for(lambda: (out / METRICS_FILE).exists() and len(losses(out)) >= 3)
    ranks = rank_processes(path)
    assert len(ranks) == 2
    os.killpg(launcher.pid, signum)
    launcher.wait()
    return path, out, ranks


def resumed_two_rank_run(path: Path, tmp_path: Path) -> dict:
    """The run started again to its end; its summary."""
    resumed = start_ranks(path, tmp_path / "train.log")
    assert resumed.wait() == 0, (tmp_path / "train.log").read_text()[-3000:]
    return json.loads((tmp_path / "out" / "summary.json").read_text())


@pytest.mark.slow
def test_kill_9_of_two_ranks_and_their_launcher_then_resume_repeats_no_micro_step(
    tmp_path, tiny_model_dir, shards, uninterrupted
):
    # The launcher's session only: torchrun starts each rank in a session of its own, and
    # they must die with it all the same.
    path, out, ranks = interrupted_two_rank_run(tmp_path, tiny_model_dir, shards, signal.SIGKILL)
    wait_for(lambda: not any(pid_alive(pid) for pid in ranks), timeout=10)
    summary = resumed_two_rank_run(path, tmp_path)
    assert summary["resumed_from_step"] >= 1
    assert order_of(out) == order_of(uninterrupted)
    assert_each_row_epochs_times(out, summary)


@pytest.mark.slow
def test_sigterm_to_two_ranks_stops_both_at_one_step_saved_and_resume_repeats_nothing(
    tmp_path, tiny_model_dir, shards, uninterrupted
):
    # SIGTERM: what the SFT step passes on when it is stopped.
    path, out, _ = interrupted_two_rank_run(tmp_path, tiny_model_dir, shards, signal.SIGTERM)
    stopped = json.loads((out / "summary.json").read_text())
    assert stopped["status"] == "stopped"  # torchrun's exit code says only that a rank ended
    assert (out / CHECKPOINTS / f"checkpoint-{stopped['global_step']}" / ".complete").exists()
    summary = resumed_two_rank_run(path, tmp_path)
    assert summary["resumed_from_step"] == stopped["global_step"]
    assert order_of(out) == order_of(uninterrupted)


def test_the_lora_model_checkpoints_its_layers_without_reentrance_by_the_current_name(
    tiny_model_dir,
):
    import warnings

    from prover_assets.sft.trainer import _lora_model

    run = TrainRun("shards", str(tiny_model_dir), "out", {}, "cpu")
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        model = _lora_model(run, training(gradient_checkpointing=True), bf16=False)
    # peft itself still asks the old property (its warning is peft's to fix), never this call
    assert not [w for w in said if "gradient_checkpointing_enable" in str(w.message)]
    layers = [m for m in model.modules() if getattr(m, "gradient_checkpointing", False)]
    assert layers, "no layer checkpoints its activations"
    assert all(m._gradient_checkpointing_func.keywords == {"use_reentrant": False} for m in layers)
