"""Each run's cost by hand-built numbers: what the generation and verdict steps used (their
manifests), the samples, tokens and waste (their streams), and the seconds per solved problem."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from prover_assets.generation.runner import GenerationBatchResult, SamplePlan
from prover_assets.records import CachedFrom
from prover_assets.records.store import publish_records
from prover_assets.report.cost import cost_rows, run_cost
from prover_assets.report.cost_section import cost_section
from prover_assets.report.runs import RunFiles
from prover_assets.report.summary import EtaBesideMeasured, EtaRow, StepCost
from prover_assets.sft.builder import SftCounts
from prover_assets.sft.stages import SftShardsResult
from prover_assets.verify.runner import VerificationResult
from prover_assets_tests.factories import (
    finish_step_folder,
    make_generation,
    make_training_result,
    make_verification,
    timeout_recheck,
)

GENERATED = GenerationBatchResult(
    total=12,
    already_present=5,  # a resumed step: the completing attempt generated 7 of the 12
    generated_now=7,
    no_room=0,
    context_clipped=0,
    hit_cap=5,
    hit_cap_share=5 / 12,
    no_code=1,
    reinsertion_errors=0,
    torn_dropped=0,
    completion_tokens={"p50": 200, "p90": 256, "p99": 256, "max": 256},
    mean_completion_tokens=99.0,
    tokens_per_s=40.0,
    rows=12,
    plan=SamplePlan(problems=3, samples_per_problem=4, samples=12),
)
VERIFIED = VerificationResult(
    total=12,
    already_verified=7,  # resumed: the completing attempt judged 5 of the 12
    verified_now=5,
    accepted_now=4,
    code_bearing_now=11,
    wall_s=50.0,
    stale_reverified=0,
    infrastructure_reverified=1,
    torn_dropped=0,
    cached_now=0,
    timeouts_rechecked=1,
    stages={"accepted": 4, "lean_error": 8},
    reasons={},
    verify_s={"median": 1.0, "p90": 2.0, "max": 3.0},
)


# The streams of the run, every attempt's samples each once: 12 samples at a cap of 128
# tokens, the first 5 cut at it (5 x 128 = 640 tokens), the others ending after 60, 70, ...
# 120 (630): 1,270 tokens in all; of their verdicts, 0 and 1 copied from the cache, 2 to 4
# timeouts run again, 5 both (a copy of a rechecked verdict: not run again here).
GENERATIONS = [
    make_generation(
        f"p{i // 4}",
        i % 4,
        cap_tokens=128,
        completion_ids=list(range(128 if i < 5 else 10 * (i + 1))),
        finish_reason="length" if i < 5 else "stop",
    )
    for i in range(12)
]


def verdict(i: int):
    generation = GENERATIONS[i]
    copied = CachedFrom(
        key="a" * 64, problem_id="p9", sample_idx=i, round=0, cap_tokens=generation.cap_tokens
    )
    return make_verification(
        generation,
        cached_from=copied if i in (0, 1, 5) else None,
        diagnostics=timeout_recheck() if i in (2, 3, 4, 5) else {},
    )


VERDICTS = [verdict(i) for i in range(12)]


def step(folder: Path, name: str, counts: dict, usage: dict | None, records=()) -> Path:
    """A step's folder; `usage`: its manifest's usage, or (with a "usage" key) its usage and
    earlier attempts."""
    folder.mkdir(parents=True)
    publish_records(folder / name, records)
    extra = usage if usage and "usage" in usage else usage and {"usage": usage}
    return finish_step_folder(folder, name, counts=counts, extra=extra)


def run(root: Path, *, generation_usage=None, verdict_usage=None, verdict_counts=None) -> RunFiles:
    return RunFiles(
        "baseline",
        "minif2f",
        256,
        root / "problems.jsonl",
        step(
            root / "g",
            "generations.jsonl",
            GENERATED.model_dump(mode="json"),
            generation_usage,
            GENERATIONS,
        ),
        step(
            root / "v",
            "verdicts.jsonl",
            verdict_counts or VERIFIED.model_dump(mode="json"),
            verdict_usage,
            VERDICTS,
        ),
    )


def test_a_runs_cost_is_what_its_two_manifests_record(tmp_path):
    cost = run_cost(
        run(
            tmp_path,
            generation_usage={"wall_s": 90.0, "cpu_s": 170.0, "children_cpu_s": 0.0},
            verdict_usage={"wall_s": 50.0, "cpu_s": 4.0, "children_cpu_s": 45.0},
        )
    )
    # the streams' work, every attempt's, not the completing attempt's 7 samples and 5 verdicts
    assert (cost.generated, cost.tokens_generated, cost.hit_cap) == (12, 1270, 5)
    assert (cost.verified, cost.cached, cost.timeouts_rechecked) == (12, 3, 3)
    assert cost.infrastructure_reverified == 1
    assert cost.generation.wall_s == 90.0 and cost.verification.children_cpu_s == 45.0
    (row,) = cost_rows([cost], {("baseline", "minif2f", 256): 3})
    assert (row.generation_wall_s_per_solved, row.lean_cpu_s_per_solved) == (30.0, 15.0)
    (none_solved,) = cost_rows([cost], {("baseline", "minif2f", 256): 0})
    assert none_solved.lean_cpu_s_per_solved is None


# The work and waste the streams hold, whatever the manifests record: 12 samples of 3 prompt
# tokens each (make_generation's), 1,270 completion tokens, 5 cut at the cap; 12 verdicts, all
# accepted (make_verification's), 3 from the cache, 3 timeouts run again, 1 verdict of an
# infrastructure failure verified again by the completing attempt (its manifest's count): 9
# verdicts Lean judged, 3 run again, 1 verified again, 13 Lean runs.
WORK_ROW = "| baseline minif2f c256 | 12 | 36 | 1270 | 5 | 12 | 3 | 13 | 3 | 1 |"


@pytest.mark.parametrize(
    ("generation_usage", "verdict_usage", "solved", "machine", "per_result"),
    [
        # from before usage was recorded
        (
            None,
            None,
            3,
            "not recorded | not recorded | not recorded | not recorded | not recorded | none",
            "3 | 12 | not recorded | not recorded | not recorded | not recorded | not recorded",
        ),
        # durations as clock times; 3725 s over 2 solved is 0:31:02; 119.6 s of Lean CPU over
        # 2 solved is 0:01:00, over 12 accepted proofs 0:00:10
        (
            {"wall_s": 3725.0, "cpu_s": 7200.4, "children_cpu_s": 0.0},
            {"wall_s": 61.0, "cpu_s": 4.0, "children_cpu_s": 119.6},
            2,
            "1:02:05 | not recorded | 2:00:00 | 0:01:01 | 0:02:00 | none",
            "2 | 12 | 0:31:02 | not recorded | 0:01:00 | not recorded | 0:00:10",
        ),
    ],
)
def test_the_cost_tables_rows_of_a_run(
    tmp_path, generation_usage, verdict_usage, solved, machine, per_result
):
    files = run(tmp_path, generation_usage=generation_usage, verdict_usage=verdict_usage)
    rows = cost_rows([run_cost(files)], {("baseline", "minif2f", 256): solved})
    section = "\n".join(cost_section(rows))
    assert f"| baseline minif2f c256 | {machine} |" in section
    assert WORK_ROW in section
    assert f"| baseline minif2f c256 | {per_result} |" in section


def test_a_verdict_manifest_that_is_not_a_verdict_steps_is_refused_by_name(tmp_path):
    files = run(tmp_path, verdict_counts={"rows": 3})
    with pytest.raises(
        ValueError, match=r"v/manifest.json: its counts are not a VerificationResult"
    ):
        run_cost(files)


def test_a_generation_manifest_that_is_not_a_generation_steps_is_refused_by_name(tmp_path):
    files = run(tmp_path)
    manifest_path = files.generations.parent / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["counts"] = {"rows": 3}
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(
        ValueError, match=r"g/manifest.json: its counts are not a GenerationBatchResult"
    ):
        run_cost(files)


def usage(wall_s: float) -> dict:
    return {"wall_s": wall_s, "cpu_s": wall_s / 2, "children_cpu_s": 0.0}


def test_the_rounds_steps_come_in_the_order_a_round_runs_them_each_with_its_usage(tmp_path):
    from prover_assets.report.cost import round_costs
    from prover_assets.report.validity import TrainingFiles

    def pair_run(system: str, wall: float) -> RunFiles:
        files = run(tmp_path / system, generation_usage=usage(wall), verdict_usage=usage(wall + 1))
        return RunFiles(system, "minif2f", 256, files.problems, files.generations, files.verdicts)

    pool = (
        step(tmp_path / "pg", "generations.jsonl", {}, usage(30.0)),
        step(tmp_path / "pv", "verdicts.jsonl", {}, None),  # from before usage was recorded
    )
    correction = (
        step(tmp_path / "cg", "generations.jsonl", {}, usage(20.0)),
        step(tmp_path / "cv", "verdicts.jsonl", {}, usage(2.0)),
    )
    # 15 rows of 5,972 tokens trained 3 epochs on a GPU whose peak torch measured
    shards_counts = SftShardsResult(
        counts=SftCounts(
            candidates=20,
            written=15,
            drops={"not_accepted": 5},
            problems_with_rows=15,
            tokens=5972,
            kinds={"first": 15},
        ),
        read_back="15 of 15 rows read back exactly",
        shards=1,
    )
    trained = make_training_result(epochs=3, peak_memory_gib=37.52)
    training = TrainingFiles(
        shards=step(
            tmp_path / "s", "shards.jsonl", shards_counts.model_dump(mode="json"), usage(5.0)
        ).parent,
        pool_generations=(),
        pool=tmp_path / "pool.jsonl",
        decontamination_sets=tmp_path / "sets.json",
        checkpoint=step(
            tmp_path / "c", "adapter.bin", trained.model_dump(mode="json"), usage(600.0)
        ).parent,
        # the export's GPU as nvidia-smi read it while the merge ran: 20,480 MiB
        export=step(
            tmp_path / "e", "model.bin", {}, {**usage(60.0), "peak_gpu_mib": 20480.0}
        ).parent,
    )
    steps = round_costs(
        [(pair_run("baseline", 10.0), pair_run("candidate", 20.0))], [pool, correction], training
    )
    assert [(s.step, s.side, s.usage.wall_s if s.usage else None) for s in steps] == [
        ("baseline minif2f c256: generate", "GPU", 10.0),
        ("baseline minif2f c256: verify", "Lean", 11.0),
        ("pool round 0: generate", "GPU", 30.0),
        ("pool round 0: verify", "Lean", None),
        ("pool correction round 1: generate", "GPU", 20.0),
        ("pool correction round 1: verify", "Lean", 2.0),
        ("SFT shards", "host", 5.0),
        ("SFT training", "GPU", 600.0),
        ("export", "GPU", 60.0),
        ("candidate minif2f c256: generate", "GPU", 20.0),
        ("candidate minif2f c256: verify", "Lean", 21.0),
    ]
    assert cost_section([], steps) == []  # no run costed (a bundle from before): no section
    costed = cost_rows([run_cost(pair_run("x", 1.0))], {("x", "minif2f", 256): 1})
    section = "\n".join(cost_section(costed, steps))
    assert (
        "| pool round 0: verify | Lean | not recorded | none (host) | not recorded | "
        "not recorded | not recorded | none |" in section
    )
    assert (
        "| SFT training | GPU | 0:10:00 | not recorded | 0:05:00 | 0:00:00 | "
        "not recorded; GPU 37.5 GiB | none |" in section
    )
    assert "SFT training: 17,916 tokens trained" in section  # 5,972 x 3
    assert "not recorded; GPU 20.0 GiB" in section.split("| export |")[1].splitlines()[0]
    assert "round_time.png" in section


def test_the_time_plot_draws_a_bar_per_step_coloured_by_what_it_waits_on(monkeypatch):
    from prover_assets.report import plots

    drawn = []
    monkeypatch.setattr(plots, "_png", lambda plt, figure: drawn.append(figure) or b"")
    plots.time_plot(
        [
            ("generate", "GPU", 120.0, 0.0),
            ("verify", "Lean", 60.0, 0.0),
            ("train", "GPU", 30.0, 0.0),
        ],
        title="t",
    )
    (axes,) = drawn[0].axes
    widths = [bar.get_width() for bar in axes.patches]
    assert widths == [2.0, 1.0, 0.5]  # minutes
    colours = [bar.get_facecolor() for bar in axes.patches]
    assert colours[0] == colours[2] != colours[1]
    assert [t.get_text() for t in axes.get_legend().get_texts()] == ["GPU", "Lean"]


def test_the_time_plot_stacks_the_earlier_attempts_wall_after_the_completing_ones(monkeypatch):
    from prover_assets.report import plots

    drawn = []
    monkeypatch.setattr(plots, "_png", lambda plt, figure: drawn.append(figure) or b"")
    plots.time_plot([("generate", "GPU", 120.0, 30.0), ("verify", "Lean", 60.0, 0.0)], title="t")
    (axes,) = drawn[0].axes
    spans = [(bar.get_x(), bar.get_width(), bar.get_hatch()) for bar in axes.patches]
    assert spans == [(0.0, 2.0, None), (2.0, 0.5, "//"), (0.0, 1.0, None)]
    legend = [t.get_text() for t in axes.get_legend().get_texts()]
    assert legend == ["GPU", "earlier attempts (killed or failed)", "Lean"]


def attempt(ended: str | None, wall_s: float, cpu_s: float, children_cpu_s: float) -> dict:
    return {
        "attempt": f"{wall_s}-1",
        "ended": ended,
        "recorded_at": 1.0,
        "usage": {"wall_s": wall_s, "cpu_s": cpu_s, "children_cpu_s": children_cpu_s},
    }


def test_a_resumed_runs_earlier_attempts_are_costed_apart_from_the_completing_one(tmp_path):
    # the generation killed once (30 s wall, 25 s CPU at its last record) and failed once
    # (10 s, 4 s), then completed; its verdicts killed once with 20 s of Lean CPU
    killed, failed = attempt(None, 30.0, 25.0, 0.0), attempt("failed", 10.0, 4.0, 0.0)
    files = run(
        tmp_path,
        generation_usage={
            "usage": {"wall_s": 90.0, "cpu_s": 170.0, "children_cpu_s": 0.0},
            "earlier_attempts": [killed, failed],
        },
        verdict_usage={
            "usage": {"wall_s": 50.0, "cpu_s": 4.0, "children_cpu_s": 45.0},
            "earlier_attempts": [attempt(None, 22.0, 1.0, 20.0)],
        },
    )
    cost = run_cost(files)
    assert [a.ended for a in cost.generation_earlier] == [None, "failed"]
    assert cost.generation.wall_s == 90.0  # the completing attempt's alone
    (row,) = cost_rows([cost], {("baseline", "minif2f", 256): 3})
    section = "\n".join(cost_section([row]))
    # 3 earlier attempts: 62 s of wall, 25 + 4 + 1 + 20 = 50 s of CPU
    assert "| 1 failed, 2 killed: wall 0:01:02, CPU 0:00:50 |" in section


@pytest.mark.parametrize(
    ("manifest", "gpus"),
    [
        ({"engine": {"engine": "vllm", "gpu_slices": [[0, 1], [2, 3]]}}, 4),
        ({"engine": {"engine": "vllm", "gpu_slices": [[0]]}}, 1),
        ({"engine": {"engine": "transformers", "device": "cuda:3"}}, 1),
        ({"engine": {"engine": "transformers", "device": "cpu"}}, 0),
        ({"engine": {"engine": "openai", "base_url": "http://h:8000/v1"}}, None),
        ({"config": {"device": "cuda", "training": {"gpus": [0, 1, 2]}}}, 3),
        ({"config": {"device": "cuda", "gpus": [4, 5], "training": {"gpus": "all"}}}, 2),
        ({"config": {"device": "cuda", "training": {"gpus": "all"}}}, None),
        ({"config": {"device": "cpu", "training": {"gpus": [0]}}}, 0),
        ({"counts": {"merged_on": "cuda:0"}}, 1),
        ({"counts": {"merged_on": "cpu"}}, 0),
        ({}, None),
    ],
)
def test_the_gpus_a_step_held_are_read_from_what_its_manifest_records(manifest, gpus):
    from prover_assets.report.cost import gpus_held

    assert gpus_held(manifest) == gpus


USED = {"wall_s": 60.0, "cpu_s": 1.0, "children_cpu_s": 0.0}


@pytest.mark.parametrize(
    ("usage", "counts", "gib"),
    [
        # the device reading wins over torch's count: every process of the step is in it
        ({**USED, "peak_gpu_mib": 61440.0}, {"peak_memory_gib": 37.5}, 60.0),
        ({**USED, "peak_gpu_mib": 512.0}, {}, 0.5),
        ({**USED, "peak_gpu_mib": None}, {"peak_memory_gib": 37.5}, 37.5),  # read before it was
        (None, {"peak_memory_gib": 37.5}, 37.5),  # a manifest older than usage
        ({**USED}, {}, None),  # no GPU
    ],
)
def test_a_steps_peak_gpu_memory_is_its_device_reading_else_torchs_count(usage, counts, gib):
    from prover_assets.records.usage import StepUsage
    from prover_assets.report.cost import peak_gpu_gib

    recorded = None if usage is None else StepUsage.model_validate(usage)
    assert peak_gpu_gib(recorded, counts) == gib


def test_a_runs_gpu_time_per_solved_problem_is_its_wall_times_the_gpus_held(tmp_path):
    files = run(tmp_path, generation_usage={"wall_s": 3600.0, "cpu_s": 10.0, "children_cpu_s": 0.0})
    manifest_path = files.generations.parent / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["engine"] = {"engine": "vllm", "gpu_slices": [[0], [1]]}
    manifest_path.write_text(json.dumps(manifest))
    (row,) = cost_rows([run_cost(files)], {("baseline", "minif2f", 256): 4})
    assert (row.generation_gpus, row.gpu_s_per_solved) == (2, 1800.0)  # 2 GPU-h / 4
    assert row.gpu_s_per_accepted == 600.0  # 2 GPU-h / 12 accepted proofs
    assert row.generation_gpu_s == 7200.0  # 1 h on 2 GPUs


def test_the_eta_of_each_measured_step_is_set_beside_its_wall_and_their_ratio():
    from prover_assets.operations.eta import EtaEstimate
    from prover_assets.report.cost import eta_beside_measured

    def measured(name: str, wall: float, *earlier: float) -> StepCost:
        attempts = [attempt(None, w, 0.0, 0.0) for w in earlier]
        return StepCost.model_validate(
            {"step": name, "side": "GPU", "usage": usage(wall), "earlier": attempts}
        )

    estimate = EtaEstimate(
        "2026-12-06T05:00:00+00:00",
        {"measured": 9, "prior": 7},
        {
            "a: generate": (0.5, 1.0, 2.0),
            "SFT training": (0.1, 0.25, 0.5),
            "export": (0, 0.1, 0.2),
            "SFT shards": (0.0, 0.0, 0.0),  # nothing to estimate: no ratio
        },
        (1.0, 2.0, 4.0),
    )
    steps = [
        measured("not in the eta", 99.0),
        measured("a: generate", 3000.0, 600.0),  # 1 h estimated; 50 + 10 min measured
        StepCost(step="export", side="GPU", usage=None, earlier=[]),  # never measured
        measured("SFT shards", 12.0),
        measured("SFT training", 1800.0),  # 15 min estimated, 30 measured
    ]
    compared = eta_beside_measured(estimate, steps)
    assert [(r.step, r.eta_s[1], r.measured_s, r.ratio) for r in compared.rows] == [
        ("a: generate", 3600.0, 3600.0, 1.0),
        ("SFT shards", 0.0, 12.0, None),
        ("SFT training", 900.0, 1800.0, 2.0),
    ]
    assert (compared.eta_s, compared.measured_s, compared.ratio) == (
        4500.0,
        5412.0,
        5412 / 4500,
    )
    assert compared.round_total_s == (3600.0, 7200.0, 14400.0)
    assert (compared.materialized_at, compared.sources) == (
        "2026-12-06T05:00:00+00:00",
        {"measured": 9, "prior": 7},
    )
    nothing = eta_beside_measured(estimate, [measured("SFT shards", 12.0)])
    assert (nothing.eta_s, nothing.ratio) == (0.0, None)


def test_the_cost_section_prints_the_eta_beside_what_was_measured(tmp_path):
    costed = cost_rows([run_cost(run(tmp_path))], {("baseline", "minif2f", 256): 1})
    steps = [StepCost(step="SFT training", side="GPU", usage=usage(1800.0), earlier=[])]
    compared = EtaBesideMeasured(
        materialized_at="2026-12-06T05:00:00+00:00",
        sources={"measured": 9, "preflight": 2, "prior": 5},
        round_total_s=(3600.0, 7200.0, 14400.0),
        rows=[
            EtaRow(step="SFT training", eta_s=(360.0, 900.0, 1800.0), measured_s=1800.0, ratio=2.0)
        ],
        eta_s=900.0,
        measured_s=1800.0,
        ratio=2.0,
    )
    section = "\n".join(cost_section(costed, steps, eta=compared))
    assert "| SFT training | 0:15:00 (0:06:00 to 0:30:00) | 0:30:00 | 2.00 |" in section
    assert "| these steps | 0:15:00 | 0:30:00 | 2.00 |" in section
    assert (
        "Its whole round, the steps the report does not read included: 2:00:00 (1:00:00 to"
        in section
    )
    without = "\n".join(cost_section(costed, steps, eta=None))
    assert "No `eta` was materialized for this data root" in without
    assert (
        "materialized at 2026-12-06T05:00:00+00:00 (its inputs: 9 measured by full steps, 2 from "
        "the preflight's smoke round, 5 priors;" in section
    )
