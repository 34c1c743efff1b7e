"""The report against hand-built truth tables, the PRIMARY guard, refusals, and the bundle."""

import json
from pathlib import Path

import pytest

from prover_assets.generation.prompts import round0_messages
from prover_assets.lean.protocol import GOEDEL_HEADER
from prover_assets.records import Message, Sampling, build_manifest, publish_records, write_manifest
from prover_assets.records.staleness import StaleVerdictError
from prover_assets.report.analysis import (
    ComparisonRefused,
    RunFiles,
    compare_runs,
    correction_lift,
    load_run,
    summarize_run,
)
from prover_assets.report.bundle import verify_bundle
from prover_assets.report.prereg import read_prereg
from prover_assets.report.stages import ReportSettings, materialize_report
from prover_assets.stats import MissingSamplesError
from prover_assets_tests.factories import (
    make_generation,
    make_pins,
    make_problem,
    make_verification,
)

PROBLEMS = ["p1", "p2", "p3", "p4"]
REVISION = "a" * 40
# accepted flags per sample_idx 0..3, by hand
BASELINE = {"p1": [1, 0, 0, 0], "p2": [0, 0, 1, 0], "p3": [0, 0, 0, 0], "p4": [1, 1, 1, 1]}
CANDIDATE = {"p1": [0, 1, 0, 0], "p2": [1, 0, 0, 0], "p3": [0, 0, 1, 1], "p4": [0, 0, 0, 0]}


def statement(problem_id: str) -> str:
    return (
        GOEDEL_HEADER
        + f"theorem {problem_id} (x : ℕ) (h₀ : 0 < x) : 0 < x + {PROBLEMS.index(problem_id)} := by sorry"
    )


def write_run(
    folder: Path,
    system: str,
    table: dict,
    *,
    cap=64,
    temperature=1.0,
    revision=REVISION,
    prompt_suffix="",
    pins=None,
    source_sha="0" * 64,
    drop=None,
) -> RunFiles:
    folder.mkdir(parents=True, exist_ok=True)
    problems = [make_problem(pid, statement(pid)) for pid in PROBLEMS]
    publish_records(folder / "problems.jsonl", problems)
    source = folder / "source.jsonl"
    source.write_text("x")
    manifest = build_manifest(
        asset="eval", inputs=[source], outputs=[], config={}, counts={}, started_at="t"
    )
    manifest["inputs"][0]["sha256"] = source_sha
    write_manifest(folder, manifest)
    generations, verdicts = [], []
    for problem in problems:
        messages = [
            Message(role="user", content=m["content"] + prompt_suffix)
            for m in round0_messages(problem.formal_statement)
        ]
        for idx, accepted in enumerate(table[problem.problem_id]):
            if drop == (problem.problem_id, idx):
                continue
            generation = make_generation(
                problem.problem_id,
                idx,
                cap_tokens=cap,
                messages=messages,
                model_rev=revision,
                sampling=Sampling(
                    temperature=temperature, top_p=0.95, top_k=None, max_tokens=cap, seed=idx
                ),
            )
            generations.append(generation)
            verdicts.append(make_verification(generation, accepted=bool(accepted), pins=pins))
    publish_records(folder / f"{system}_gen.jsonl", generations)
    publish_records(folder / f"{system}_ver.jsonl", verdicts)
    return RunFiles(
        system,
        "minif2f",
        cap,
        folder / "problems.jsonl",
        folder / f"{system}_gen.jsonl",
        folder / f"{system}_ver.jsonl",
    )


@pytest.fixture
def runs(tmp_path):
    return (
        load_run(write_run(tmp_path, "baseline", BASELINE), samples_required=4),
        load_run(
            write_run(tmp_path, "candidate", CANDIDATE, revision="sft-" + "b" * 64),
            samples_required=4,
        ),
    )


def test_system_table_truth(runs):
    baseline, _ = runs
    summary = summarize_run(baseline, ks=[1, 2, 4, 8], resamples=200, seed=1)
    # solved@1: p1, p4; solved@2: p1, p4; solved@4: p1, p2, p4
    assert {k: (v and v["solved"]) for k, v in summary["solved_at_k"].items()} == {
        1: 2,
        2: 2,
        4: 3,
        8: None,
    }
    # pass@1 = mean c/n = (1/4 + 1/4 + 0 + 4/4) / 4 = 0.375
    assert summary["pass_at_k"][1] == pytest.approx(0.375)
    # pass@2 per problem (n=4): 1-C(3,2)/C(4,2) = 0.5 for c=1; 0 for c=0; 1 for c=4 -> (0.5+0.5+0+1)/4
    assert summary["pass_at_k"][2] == pytest.approx(0.5)
    assert summary["pass_at_k"][8] is None
    assert summary["pass1_pooled_wilson"]["estimate"] == pytest.approx(6 / 16)


def test_mcnemar_cells_and_decision_truth(runs):
    baseline, candidate = runs
    comparison = compare_runs(baseline, candidate, k=2, alpha=0.05, resamples=200, seed=1)
    # solved@2: baseline {p1, p4}; candidate {p1, p2}
    assert comparison.table == {"both": 1, "baseline_only": 1, "candidate_only": 1, "neither": 1}
    assert comparison.p_value == 1.0
    assert comparison.decision == "no detectable improvement"
    comparison4 = compare_runs(baseline, candidate, k=4, alpha=0.05, resamples=200, seed=1)
    # solved@4: baseline {p1, p2, p4}; candidate {p1, p2, p3}
    assert comparison4.table == {"both": 2, "baseline_only": 1, "candidate_only": 1, "neither": 0}


def test_solved_at_k_uses_the_first_k_when_more_samples_exist(tmp_path):
    many = {
        pid: [*flags, 1, 1, 1, 1] for pid, flags in BASELINE.items()
    }  # 8 samples; later ones all accepted
    run = load_run(write_run(tmp_path, "baseline", many), samples_required=4)
    summary = summarize_run(run, ks=[4], resamples=100, seed=1)
    assert (
        summary["solved_at_k"][4]["solved"] == 3
    )  # p3 fails its first four; later samples do not count


def test_decision_rule_success_and_degradation(tmp_path):
    base = {pid: [0, 0, 0, 0] for pid in PROBLEMS}
    wins = {pid: [1, 0, 0, 0] for pid in PROBLEMS}
    baseline = load_run(write_run(tmp_path / "a", "baseline", base), samples_required=4)
    candidate = load_run(write_run(tmp_path / "a", "candidate", wins), samples_required=4)
    comparison = compare_runs(baseline, candidate, k=1, alpha=0.2, resamples=100, seed=1)
    assert comparison.table["candidate_only"] == 4
    assert comparison.p_value == pytest.approx(0.125)  # 2 * (1/2)^4
    assert comparison.decision == "success"
    reverse = compare_runs(candidate, baseline, k=1, alpha=0.2, resamples=100, seed=1)
    assert reverse.decision == "significant degradation"


def test_correction_lift_truth(tmp_path):
    round0 = [make_generation(pid, 0) for pid in ("p1", "p2", "p3")]
    round0_verdicts = [make_verification(round0[0], accepted=True)] + [
        make_verification(g, accepted=False) for g in round0[1:]
    ]
    round1 = [make_generation(pid, 0, round=1, completion_ids=[1] * 5) for pid in ("p2", "p3")]
    round1_verdicts = [
        make_verification(round1[0], accepted=True),
        make_verification(round1[1], accepted=False),
    ]
    for name, rows in (
        ("g0", round0),
        ("v0", round0_verdicts),
        ("g1", round1),
        ("v1", round1_verdicts),
    ):
        publish_records(tmp_path / f"{name}.jsonl", rows)
    lift = correction_lift(
        [
            (tmp_path / "g0.jsonl", tmp_path / "v0.jsonl"),
            (tmp_path / "g1.jsonl", tmp_path / "v1.jsonl"),
        ]
    )
    assert lift == [
        {
            "round": 0,
            "problems_entering": 3,
            "converted": 1,
            "solved_cumulative": 1,
            "samples": 3,
            "completion_tokens": 9,
        },
        {
            "round": 1,
            "problems_entering": 2,
            "converted": 1,
            "solved_cumulative": 2,
            "samples": 2,
            "completion_tokens": 10,
        },
    ]


def test_different_sampling_is_refused_unless_overridden_and_the_override_is_recorded(tmp_path):
    baseline = load_run(write_run(tmp_path, "baseline", BASELINE), samples_required=4)
    candidate = load_run(
        write_run(tmp_path, "candidate", CANDIDATE, temperature=0.7), samples_required=4
    )
    with pytest.raises(ComparisonRefused, match="sampling differs"):
        compare_runs(baseline, candidate, k=2, alpha=0.05, resamples=10, seed=1)
    comparison = compare_runs(
        baseline,
        candidate,
        k=2,
        alpha=0.05,
        resamples=10,
        seed=1,
        allow_design_mismatch="temperature ablation",
    )
    assert comparison.design_override == "temperature ablation"
    assert not comparison.primary


def test_different_prompts_are_refused(tmp_path):
    baseline = load_run(write_run(tmp_path, "baseline", BASELINE), samples_required=4)
    candidate = load_run(
        write_run(tmp_path, "candidate", CANDIDATE, prompt_suffix=" Think."), samples_required=4
    )
    with pytest.raises(ComparisonRefused, match="round-0 prompts differ"):
        compare_runs(baseline, candidate, k=2, alpha=0.05, resamples=10, seed=1)


def test_caps_are_never_pooled(tmp_path):
    baseline = load_run(write_run(tmp_path, "baseline", BASELINE), samples_required=4)
    candidate = load_run(
        write_run(tmp_path / "b", "candidate", CANDIDATE, cap=128), samples_required=4
    )
    with pytest.raises(ComparisonRefused, match="never pooled"):
        compare_runs(baseline, candidate, k=2, alpha=0.05, resamples=10, seed=1)


def test_a_sample_of_another_cap_in_a_run_is_refused(tmp_path):
    files = write_run(tmp_path, "baseline", BASELINE)
    with pytest.raises(ComparisonRefused, match="never pooled"):
        load_run(
            RunFiles("baseline", "minif2f", 128, files.problems, files.generations, files.verdicts),
            samples_required=4,
        )


def test_missing_problem_samples_raise_instead_of_counting_as_failures(tmp_path):
    files = write_run(tmp_path, "baseline", BASELINE, drop=("p3", 2))
    with pytest.raises(MissingSamplesError, match="never scored as failures"):
        load_run(files, samples_required=4)


def test_verifier_mismatch_is_refused(tmp_path):
    baseline = load_run(write_run(tmp_path, "baseline", BASELINE), samples_required=4)
    candidate = load_run(
        write_run(tmp_path, "candidate", CANDIDATE, pins=make_pins(mathlib_rev="ffffffff")),
        samples_required=4,
    )
    with pytest.raises(ComparisonRefused, match="invalid"):
        compare_runs(baseline, candidate, k=2, alpha=0.05, resamples=10, seed=1)


def test_stale_verdict_is_refused(tmp_path):
    files = write_run(tmp_path, "baseline", BASELINE)
    lines = files.generations.read_text().splitlines()
    first = json.loads(lines[0])
    first["lean_code"] = first["lean_code"] + "\n  simp"
    files.generations.write_text(
        "\n".join([json.dumps(first, ensure_ascii=False), *lines[1:]]) + "\n"
    )
    with pytest.raises(StaleVerdictError):
        load_run(files, samples_required=4)


def registered_prereg(tmp_path, **changes) -> Path:
    """A pre-registration of this tiny design, hashed, built from the real template."""
    from prover_assets.report.prereg import block_sha256

    text = (Path(__file__).parents[1] / "configs/prereg.md").read_text()
    for old, new in {
        "problem_count: 244": "problem_count: 4",
        'baseline_revision: "dfd02e6271a58375dfbf3ece0175277cf6b6a89a"': f'baseline_revision: "{REVISION}"',
        "cap_tokens: 16384": "cap_tokens: 64",
        "  k: 8": "  k: 2",
        "n_samples: 8": "n_samples: 4",
        'problems_sha256: "47ca505cd60a503a77165e84bbf34c662f9a8c650d09fc33fb4c000179eee8f3"': 'problems_sha256: "'
        + "0" * 64
        + '"',
        **changes,
    }.items():
        text = text.replace(old, new)
    block = text[text.index("<!-- PREREG:BEGIN -->") + 21 : text.index("<!-- PREREG:END -->")]
    import re

    text = re.sub(r"PREREG:SHA256 [0-9a-f]{64}", f"PREREG:SHA256 {block_sha256(block)}", text)
    path = tmp_path / "prereg.md"
    path.write_text(text)
    return path


def test_registered_design_is_primary_and_every_deviation_makes_it_secondary(tmp_path, runs):
    baseline, candidate = runs
    prereg = read_prereg(registered_prereg(tmp_path))
    assert prereg.hash_matches
    primary = compare_runs(
        baseline, candidate, k=2, alpha=0.05, resamples=10, seed=1, prereg=prereg
    )
    assert primary.primary, primary.secondary_reasons
    wrong_k = compare_runs(
        baseline, candidate, k=4, alpha=0.05, resamples=10, seed=1, prereg=prereg
    )
    assert wrong_k.secondary_reasons == ["k = 4, registered 2"]


def test_edited_prereg_block_is_a_mismatch_and_never_primary(tmp_path, runs):
    baseline, candidate = runs
    path = registered_prereg(tmp_path)
    path.write_text(path.read_text().replace("alpha 0.05.", "alpha 0.10."))
    prereg = read_prereg(path)
    assert not prereg.hash_matches
    comparison = compare_runs(
        baseline, candidate, k=2, alpha=0.05, resamples=10, seed=1, prereg=prereg
    )
    assert (
        "the pre-registration block does not match its recorded sha256"
        in comparison.secondary_reasons
    )


def test_simulated_verdicts_are_never_primary_and_the_report_says_so(tmp_path):
    baseline = load_run(
        write_run(tmp_path, "baseline", BASELINE, pins=make_pins(simulated=True)),
        samples_required=4,
    )
    candidate = load_run(
        write_run(
            tmp_path,
            "candidate",
            CANDIDATE,
            revision="sft-" + "b" * 64,
            pins=make_pins(simulated=True),
        ),
        samples_required=4,
    )
    prereg = read_prereg(registered_prereg(tmp_path))
    comparison = compare_runs(
        baseline, candidate, k=2, alpha=0.05, resamples=10, seed=1, prereg=prereg
    )
    assert comparison.secondary_reasons == ["SIMULATED verifier: not evidence"]


def settings(**overrides) -> ReportSettings:
    fields = {
        "experiment": "test",
        "k": 2,
        "ks": (1, 2, 4),
        "alpha": 0.05,
        "resamples": 100,
        "seed": 3,
        "samples_required": 4,
        "power_fractions": (0.1,),
        "power_gains_points": (4.0,),
    }
    fields.update(overrides)
    return ReportSettings(**fields)


def test_bundle_is_published_verifiable_and_never_overwritten(tmp_path):
    base = write_run(tmp_path / "runs", "baseline", BASELINE)
    cand = write_run(tmp_path / "runs", "candidate", CANDIDATE, revision="sft-" + "b" * 64)
    prereg = registered_prereg(tmp_path)

    def publish():
        return materialize_report(
            tmp_path / "report",
            [(base, cand)],
            [],
            prereg_path=prereg,
            config_files=[],
            settings=settings(),
            config={"name": "test"},
        )

    result = publish()
    folder = result.folder
    assert {p.name for p in folder.iterdir()} == {
        "report.md",
        "summary.json",
        "plots",
        "manifest.json",
    }
    assert "PRIMARY" in (folder / "report.md").read_text()
    assert verify_bundle(folder).ok
    again = publish()
    assert again.reused and again.folder == folder
    (folder / "report.md").write_text("edited")
    check = verify_bundle(folder)
    assert not check.ok
    assert check.changed == ["artifact report.md was modified (sha256 differs)"]
    with pytest.raises(RuntimeError, match="never overwritten"):
        publish()


def test_bundle_notices_a_changed_input(tmp_path):
    base = write_run(tmp_path / "runs", "baseline", BASELINE)
    cand = write_run(tmp_path / "runs", "candidate", CANDIDATE, revision="sft-" + "b" * 64)
    result = materialize_report(
        tmp_path / "report",
        [(base, cand)],
        [],
        prereg_path=None,
        config_files=[],
        settings=settings(),
        config={},
    )
    cand.verdicts.write_text(
        cand.verdicts.read_text().replace('"verify_s":0.5', '"verify_s":0.6', 1)
    )
    assert any("was modified" in change for change in verify_bundle(result.folder).changed)
