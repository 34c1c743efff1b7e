"""The report against hand-built truth tables, the PRIMARY guard, refusals, and the bundle."""

import json
import re
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from prover_assets.generation.prompts import round0_messages
from prover_assets.lean.protocol import GOEDEL_HEADER
from prover_assets.records import (
    Generation,
    Message,
    Problem,
    SampleKey,
    Stage,
    Verification,
    build_manifest,
    publish_records,
    read_records,
    write_manifest,
)
from prover_assets.records.outputs import StepResult
from prover_assets.records.staleness import StaleVerdictError
from prover_assets.report.analysis import (
    compare_runs,
    correction_lift,
    decide,
    power_table,
    summarize_run,
)
from prover_assets.report.bundle import ReportResult, verify_bundle
from prover_assets.report.prereg import read_prereg
from prover_assets.report.runs import ComparisonRefused, RunFiles, load_run, sampling_words
from prover_assets.report.stages import ReportSettings, materialize_report
from prover_assets.stats import MissingSamplesError, mcnemar_power
from prover_assets_tests.factories import (
    make_generation,
    make_pins,
    make_problem,
    make_sampling,
    make_verification,
    timeout_recheck,
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


SFT_REVISION = "sft-" + "b" * 64  # the candidate's model: an SFT export of this project


def write_run(
    folder: Path,
    system: str,
    table: dict,
    *,
    cap=64,
    temperature=1.0,
    top_k=0,
    top_p=0.95,
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
        folder=folder,
        asset="eval",
        inputs=[source],
        outputs=[],
        config={},
        counts={},
        started_at="t",
    )
    manifest["inputs"][0]["sha256"] = source_sha
    write_manifest(folder, manifest)
    generations, verdicts = [], []
    for problem in problems:
        messages = [
            Message(role="user", content=m.content + prompt_suffix)
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
                sampling=make_sampling(
                    temperature=temperature, top_k=top_k, top_p=top_p, max_tokens=cap, seed=idx
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


def compare(baseline, candidate, **options):
    """The registered comparison of the tiny design (k = 2, alpha 0.05), few resamples."""
    return compare_runs(baseline, candidate, k=2, alpha=0.05, resamples=10, seed=1, **options)


@pytest.fixture
def runs(tmp_path):
    return (
        load_run(write_run(tmp_path, "baseline", BASELINE), samples_required=4),
        load_run(
            write_run(tmp_path, "candidate", CANDIDATE, revision=SFT_REVISION),
            samples_required=4,
        ),
    )


def test_system_table_truth(runs):
    baseline, _ = runs
    summary = summarize_run(baseline, ks=[1, 2, 4, 8], resamples=200, seed=1)
    # solved@1: p1, p4; solved@2: p1, p4; solved@4: p1, p2, p4
    assert {k: (v and v.solved) for k, v in summary.solved_at_k.items()} == {
        1: 2,
        2: 2,
        4: 3,
        8: None,
    }
    # pass@1 = mean c/n = (1/4 + 1/4 + 0 + 4/4) / 4 = 0.375
    assert summary.pass_at_k[1] == pytest.approx(0.375)
    # pass@2 per problem (n=4): 1-C(3,2)/C(4,2) = 0.5 for c=1; 0 for c=0; 1 for c=4 -> (0.5+0.5+0+1)/4
    assert summary.pass_at_k[2] == pytest.approx(0.5)
    assert summary.pass_at_k[8] is None
    assert summary.pass1_pooled_wilson.estimate == pytest.approx(6 / 16)


def test_mcnemar_cells_and_decision_truth(runs):
    baseline, candidate = runs
    comparison = compare_runs(baseline, candidate, k=2, alpha=0.05, resamples=200, seed=1)
    # solved@2: baseline {p1, p4}; candidate {p1, p2}
    assert comparison.table.model_dump() == {
        "both": 1,
        "baseline_only": 1,
        "candidate_only": 1,
        "neither": 1,
    }
    assert comparison.p_value == 1.0
    assert comparison.decision == "no detectable improvement"
    assert (comparison.eval_set, comparison.cap, comparison.k, comparison.alpha) == (
        "minif2f",
        64,
        2,
        0.05,
    )
    # pass@1 per problem: baseline (1/4, 1/4, 0, 1), candidate (1/4, 1/4, 2/4, 0)
    assert comparison.pass1_difference.estimate == pytest.approx((1.0 - 1.5) / 4)
    again = compare_runs(baseline, candidate, k=2, alpha=0.05, resamples=200, seed=1)
    assert again.pass1_difference == comparison.pass1_difference
    comparison4 = compare_runs(baseline, candidate, k=4, alpha=0.05, resamples=200, seed=1)
    # solved@4: baseline {p1, p2, p4}; candidate {p1, p2, p3}
    assert comparison4.table.model_dump() == {
        "both": 2,
        "baseline_only": 1,
        "candidate_only": 1,
        "neither": 0,
    }


def test_solved_at_k_uses_the_first_k_when_more_samples_exist(tmp_path):
    many = {
        pid: [*flags, 1, 1, 1, 1] for pid, flags in BASELINE.items()
    }  # 8 samples; later ones all accepted
    run = load_run(write_run(tmp_path, "baseline", many), samples_required=4)
    summary = summarize_run(run, ks=[4], resamples=100, seed=1)
    assert summary.solved_at_k[4].solved == 3  # p3 fails its first four; later samples do not count


def test_decision_rule_success_and_degradation(tmp_path):
    base = {pid: [0, 0, 0, 0] for pid in PROBLEMS}
    wins = {pid: [1, 0, 0, 0] for pid in PROBLEMS}
    baseline = load_run(write_run(tmp_path / "a", "baseline", base), samples_required=4)
    candidate = load_run(write_run(tmp_path / "a", "candidate", wins), samples_required=4)
    comparison = compare_runs(baseline, candidate, k=1, alpha=0.2, resamples=100, seed=1)
    assert comparison.table.candidate_only == 4
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
    assert [row.model_dump() for row in lift] == [
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
        compare(baseline, candidate)
    comparison = compare(baseline, candidate, allow_design_mismatch="temperature ablation")
    assert comparison.design_override == "temperature ablation"
    assert not comparison.primary


def test_different_prompts_are_refused(tmp_path):
    baseline = load_run(write_run(tmp_path, "baseline", BASELINE), samples_required=4)
    candidate = load_run(
        write_run(tmp_path, "candidate", CANDIDATE, prompt_suffix=" Think."), samples_required=4
    )
    with pytest.raises(ComparisonRefused, match="round-0 prompts or sampling differ"):
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
    with pytest.raises(
        MissingSamplesError,
        match=r"1 problems lack samples 0\.\.3 \(e\.g\. p3\); missing problems are never scored",
    ):
        load_run(files, samples_required=4)


def test_a_gap_in_the_first_samples_is_missing_even_when_later_samples_make_up_the_count(
    tmp_path,
):
    five = {pid: [*flags, 1] for pid, flags in BASELINE.items()}
    files = write_run(tmp_path, "baseline", five, drop=("p2", 3))
    with pytest.raises(MissingSamplesError, match=r"e\.g\. p2"):
        load_run(files, samples_required=4)


def test_a_problem_with_no_sample_at_all_is_missing_not_a_failure(tmp_path):
    files = write_run(tmp_path, "baseline", {**BASELINE, "p3": []})
    with pytest.raises(
        MissingSamplesError,
        match=r"^baseline on minif2f at cap 64: 1 problems lack samples 0\.\.3 \(e\.g\. p3\)",
    ):
        load_run(files, samples_required=4)


def test_a_run_without_a_verdict_is_never_scored(tmp_path):
    files = write_run(tmp_path, "baseline", {pid: [] for pid in PROBLEMS})
    with pytest.raises(MissingSamplesError) as refused:
        load_run(files, samples_required=0)
    assert str(refused.value) == f"{files.verdicts}: no verdicts; an empty run is never scored"


def test_a_sampling_of_another_length_than_the_recorded_fields_is_refused():
    with pytest.raises(ValueError, match="zip"):
        sampling_words((1.0, 0.95, 0))


def test_a_sample_without_a_verdict_is_named(tmp_path):
    files = write_run(tmp_path, "baseline", BASELINE)
    lines = files.verdicts.read_text().splitlines(keepends=True)
    files.verdicts.write_text("".join(lines[1:]))
    with pytest.raises(
        MissingSamplesError, match=r"1 samples have no verdict \(e\.g\. \('p1', 0, 0, 64\)\)"
    ):
        load_run(files, samples_required=4)


def test_verdicts_of_two_verifiers_in_one_run_are_refused(tmp_path):
    files = write_run(tmp_path, "baseline", BASELINE)
    other = write_run(tmp_path / "other", "baseline", BASELINE, pins=make_pins(repl_rev="0ther"))
    lines = files.verdicts.read_text().splitlines(keepends=True)
    mixed = other.verdicts.read_text().splitlines(keepends=True)[:1] + lines[1:]
    files.verdicts.write_text("".join(mixed))
    with pytest.raises(ComparisonRefused, match="verdicts from 2 different verifiers"):
        load_run(files, samples_required=4)


def test_runs_on_different_problems_are_refused(tmp_path, runs):
    baseline, candidate = runs
    candidate.problems = candidate.problems[:-1]
    with pytest.raises(ComparisonRefused, match=r"^the runs are on different problems$"):
        compare_runs(baseline, candidate, k=1, alpha=0.05, resamples=10, seed=1)


def test_verifier_mismatch_is_refused(tmp_path):
    baseline = load_run(write_run(tmp_path, "baseline", BASELINE), samples_required=4)
    candidate = load_run(
        write_run(
            tmp_path,
            "candidate",
            CANDIDATE,
            pins=make_pins(mathlib_rev="ffffffff", repl_rev="eeeeeeee"),
        ),
        samples_required=4,
    )
    with pytest.raises(ComparisonRefused) as refused:
        compare_runs(baseline, candidate, k=2, alpha=0.05, resamples=10, seed=1)
    assert str(refused.value) == (
        "verifier pins, configuration or budget differ between the runs: the comparison is "
        f"invalid (baseline, candidate: mathlib_rev {make_pins().mathlib_rev}, ffffffff; "
        f"repl_rev {make_pins().repl_rev}, eeeeeeee)"
    )


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

    text = (Path(__file__).parents[2] / "configs/prereg.md").read_text()
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


def test_the_registered_design_read_past_a_failed_gate_is_never_primary(tmp_path, runs):
    baseline, candidate = runs
    prereg = read_prereg(registered_prereg(tmp_path))
    comparison = compare_runs(
        baseline,
        candidate,
        k=2,
        alpha=0.05,
        resamples=10,
        seed=1,
        prereg=prereg,
        gate_overrides=["run r1 (job report, 2026-12-05 00:00 UTC): infra share known"],
    )
    assert comparison.secondary_reasons == [
        "1 runs read outputs past a failed or missing gate (gate_override)"
    ]


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
            revision=SFT_REVISION,
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


def written_pair(folder: Path) -> tuple[RunFiles, RunFiles]:
    """BASELINE and CANDIDATE written under `folder` as a baseline's and an SFT export's runs."""
    return (
        write_run(folder, "baseline", BASELINE),
        write_run(folder, "candidate", CANDIDATE, revision=SFT_REVISION),
    )


def reported(
    tmp_path: Path, pair: tuple[RunFiles, RunFiles] | None = None, **options: Any
) -> StepResult[ReportResult]:
    """The report bundle of `pair` (by default `written_pair` under tmp_path/runs) under
    tmp_path/report, with the tests' settings and no pre-registration; `options` (prereg_path,
    settings, config, defects) replace those."""
    fields: dict[str, Any] = {
        "prereg_path": None,
        "config_files": [],
        "settings": settings(),
        "config": {},
    }
    pair = pair or written_pair(tmp_path / "runs")
    return materialize_report(tmp_path / "report", [pair], [], **(fields | options))


def test_bundle_is_published_verifiable_and_never_overwritten(tmp_path):
    pair = written_pair(tmp_path / "runs")
    prereg = registered_prereg(tmp_path)

    def publish():
        return reported(tmp_path, pair, prereg_path=prereg, config={"name": "test"})

    result = publish()
    folder = result.folder
    assert {p.name for p in folder.iterdir()} == {
        "report.md",
        "report.html",
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


@pytest.mark.slow
@pytest.mark.parametrize("absolute", [False, True])
def test_a_bundle_whose_manifest_names_an_artifact_outside_it_is_refused(tmp_path, absolute):
    folder = report_folder(tmp_path)
    outside = str(tmp_path / "elsewhere.md") if absolute else "../elsewhere.md"
    manifest = json.loads((folder / "manifest.json").read_text())
    (entry,) = [e for e in manifest["outputs"] if e["path"] == "report.md"]
    target = (folder / outside).resolve()
    target.write_bytes((folder / "report.md").read_bytes())  # the same bytes: only the place lies
    entry["path"] = outside
    (folder / "report.md").unlink()
    (folder / "manifest.json").write_text(json.dumps(manifest))
    check = verify_bundle(folder)
    assert check.changed == [f"artifact {outside} lies outside the bundle {folder}"]


def test_a_bundle_another_run_publishes_while_this_one_builds_is_reused(tmp_path, monkeypatch):
    import prover_assets.report.stages as stages

    pair = written_pair(tmp_path / "runs")

    def publish():
        return reported(tmp_path, pair, config={"name": "test"})

    real_build, others, builds = stages.build_report, [], []

    def build_while_another_run_publishes(*args):
        builds.append(args)
        built = real_build(*args)
        if len(builds) == 1:  # the other run (same job, same inputs) finishes first
            others.append(publish())
        return built

    monkeypatch.setattr(stages, "build_report", build_while_another_run_publishes)
    late = publish()
    (first,) = others
    assert (first.reused, late.reused) == (False, True)
    assert late.folder == first.folder
    # the first run's publication, read back: its finish time, not one of the late run's own
    assert late.manifest["finished_at"] == first.manifest["finished_at"]
    assert verify_bundle(late.folder).ok
    assert [p.name for p in late.folder.parent.iterdir()] == [late.folder.name]  # no staging left


RUN_PATHS = ("problems", "generations", "verdicts")


def test_a_bundle_in_a_copied_data_root_is_found_by_the_same_name_and_verifies(tmp_path):
    from prover_assets.records.manifest import mark_data_root

    def report_in(root):
        moved = [
            replace(run, **{f: root / getattr(run, f).relative_to(old) for f in RUN_PATHS})
            for run in runs
        ]
        return materialize_report(
            root / "report",
            [tuple(moved)],
            [],
            prereg_path=None,
            config_files=[],
            settings=settings(),
            config={},
        )

    old = mark_data_root(tmp_path / "old")
    runs = written_pair(old / "runs")
    made = report_in(old)
    shutil.copytree(old, tmp_path / "new")
    shutil.rmtree(old)
    again = report_in(tmp_path / "new")
    assert again.reused and again.folder.name == made.folder.name
    assert verify_bundle(again.folder).ok


def test_bundle_notices_a_changed_input(tmp_path):
    _, cand = pair = written_pair(tmp_path / "runs")
    result = reported(tmp_path, pair)
    cand.verdicts.write_text(
        cand.verdicts.read_text().replace('"verify_s":0.5', '"verify_s":0.6', 1)
    )
    assert any("was modified" in change for change in verify_bundle(result.folder).changed)


@pytest.mark.parametrize(
    ("candidate_only", "baseline_only", "p_value", "decision"),
    [
        (3, 1, 0.04, "success"),
        (1, 3, 0.04, "significant degradation"),
        (3, 1, 0.05, "no detectable improvement"),  # p equal to alpha is not below it
        (1, 3, 0.05, "no detectable improvement"),
        (2, 2, 0.01, "no detectable improvement"),  # no direction without discordance
        (3, 1, 0.20, "no detectable improvement"),
        (1, 3, 0.20, "no detectable improvement"),
    ],
)
def test_decision_rule_truth_table(candidate_only, baseline_only, p_value, decision):
    assert decide(candidate_only, baseline_only, p_value, alpha=0.05) == decision


def hand_built_run(tmp_path) -> RunFiles:
    """Two problems, two samples each, one of every kind the system table counts."""
    problems = [make_problem(pid, statement(pid)) for pid in ("p1", "p2")]
    publish_records(tmp_path / "problems.jsonl", problems)
    messages = {p.problem_id: round0_messages(p.formal_statement) for p in problems}

    def generation(pid, idx, **fields):
        return make_generation(pid, idx, messages=messages[pid], model_rev=REVISION, **fields)

    rows = [
        (
            generation("p1", 0),
            dict(accepted=True, diagnostics={"displayed_statement_faithful": False}),
        ),
        (
            generation("p1", 1, finish_reason="length", completion_ids=[1] * 64),
            dict(accepted=False, stage=Stage.TIMEOUT, reasons=["timeout"]),
        ),
        (
            generation("p2", 0, max_tokens=32),
            dict(
                accepted=False,
                stage=Stage.INFRASTRUCTURE,
                reasons=["infrastructure:header:timeout"],
            ),
        ),
        (
            generation("p2", 1),
            dict(
                accepted=False,
                stage=Stage.GATE,
                reasons=["banned:sorry", "axiom:sorryAx", "reinsertion:x", "no_code:y", "other"],
            ),
        ),
    ]
    publish_records(tmp_path / "gen.jsonl", [g for g, _ in rows])
    publish_records(tmp_path / "ver.jsonl", [make_verification(g, **v) for g, v in rows])
    write_manifest(
        tmp_path,
        build_manifest(
            folder=tmp_path,
            asset="run",
            inputs=[],
            outputs=[],
            config={},
            counts={},
            started_at="t0",
        ),
    )
    return RunFiles(
        "baseline",
        "minif2f",
        64,
        tmp_path / "problems.jsonl",
        tmp_path / "gen.jsonl",
        tmp_path / "ver.jsonl",
    )


def test_every_count_of_the_system_table_by_hand(tmp_path):
    run = load_run(hand_built_run(tmp_path), samples_required=2)
    summary = summarize_run(run, ks=[1, 2], resamples=50, seed=3)
    wilson = {k: summary.solved_at_k[k] for k in (1, 2)}
    assert {k: (v.solved, v.share) for k, v in wilson.items()} == {1: (1, 0.5), 2: (1, 0.5)}
    # Wilson 95 % for 1 of 2: centre (1 + z²/2)/(2 + z²) = 0.5, half-width z·sqrt(0.25·2 + z²/4)/(2 + z²)
    z = 1.959963984540054
    half = z * (0.5 + z * z / 4) ** 0.5 / (2 + z * z)
    assert wilson[1].wilson_low == pytest.approx(0.5 - half)
    assert wilson[1].wilson_high == pytest.approx(0.5 + half)
    assert summary.pass1_cluster.estimate == pytest.approx(0.25)  # mean of 1/2 and 0/2
    assert (summary.pass1_cluster.seed, summary.pass1_cluster.resamples) == (3, 50)
    provenance = summary.provenance
    assert provenance.generations.started_at == provenance.verdicts.started_at == "t0"
    pooled = summary.pass1_pooled_wilson
    assert (pooled.estimate, pooled.note) == (
        0.25,
        "anti-conservative: treats every sample as independent",
    )
    # the rest, by hand (the intervals and provenance are tested above and on their own)
    rest = summary.model_dump(
        exclude={
            "pass1_cluster",
            "solved_at_k",
            "pass_at_k_cluster",
            "provenance",
            "pass1_pooled_wilson",
        }
    )
    assert rest == {
        "system": "baseline",
        "eval_set": "minif2f",
        "cap": 64,
        "model_revs": [REVISION],
        "problems": 2,
        "samples": 4,
        "samples_per_problem": 2,
        "pass_at_k": {1: 0.25, 2: 0.5},
        "mean_effective_max_tokens": (64 + 64 + 32 + 64) / 4,
        "mean_completion_tokens": (3 + 64 + 3 + 3) / 4,
        "accepted_samples": 1,
        "hit_cap_share": 0.25,
        "context_clipped_share": 0.25,
        "stages": {"accepted": 1, "timeout": 1, "infrastructure": 1, "gate": 1},
        "reasons": {
            "timeout": 1,
            "infrastructure": 1,
            "banned:sorry": 1,
            "axiom": 1,
            "reinsertion": 1,
            "no_code": 1,
            "other": 1,
        },
        "timeouts": 1,
        "timeouts_before_recheck": 1,
        "verdicts_copied": 0,
        "infrastructure": 1,
        "accepted_but_rewritten": 1,
        "verifier": run.identity.model_dump(),
        "simulated": False,
        "per_problem": {"p1": {"n": 2, "c": 1}, "p2": {"n": 2, "c": 0}},
    }
    assert run.identity.pins.lean_version == "v4.9.0-rc1"


def test_timeouts_are_counted_before_and_after_their_recheck_and_copies_are_counted(runs):
    from prover_assets.records import CachedFrom

    baseline, _ = runs
    first, second, *_ = sorted(baseline.verdicts)
    rechecked = baseline.verdicts[first]
    baseline.verdicts[first] = Verification.model_validate(
        {
            **dict(rechecked),
            "diagnostics": {
                **rechecked.diagnostics.model_dump(exclude_none=True),
                **timeout_recheck(second=rechecked.stage),
            },
        }
    )
    pointer = CachedFrom(
        key="0" * 64,
        problem_id=first.problem_id,
        sample_idx=first.sample_idx,
        round=0,
        cap_tokens=first.cap_tokens,
    )
    baseline.verdicts[second] = baseline.verdicts[second].model_copy(
        update={"cached_from": pointer}
    )
    summary = summarize_run(baseline, ks=[1], resamples=10, seed=1)
    assert (summary.timeouts_before_recheck, summary.timeouts) == (1, 0)
    assert summary.verdicts_copied == 1


def test_a_run_without_timeouts_or_infrastructure_counts_zero_of_each(runs):
    baseline, _ = runs
    summary = summarize_run(baseline, ks=[1], resamples=10, seed=1)
    assert (summary.timeouts, summary.infrastructure, summary.accepted_but_rewritten) == (
        0,
        0,
        0,
    )


def test_the_power_table_holds_each_gain_in_points_for_each_fraction():
    table = power_table(100, [0.1, 0.25], [5, 10], alpha=0.05)
    assert table == {
        f"{f:.2f}": {f"+{g}": mcnemar_power(100, f, g / 100, 0.05) for g in (5, 10)}
        for f in (0.1, 0.25)
    }
    assert table["0.10"]["+5"] < table["0.10"]["+10"]
    assert power_table(100, [0.1], [10], alpha=0.01)["0.10"]["+10"] < table["0.10"]["+10"]


def secondary_reasons(tmp_path, *, prereg=True, override=None, registered=None, **changes):
    """The PRIMARY guard's reasons for the tiny registered design with `changes` to both runs
    (`baseline_revision`, `candidate_revision` to one)."""
    baseline_revision = changes.pop("baseline_revision", REVISION)
    candidate_revision = changes.pop("candidate_revision", SFT_REVISION)
    edit = changes.pop("edit", None)
    baseline = load_run(
        write_run(tmp_path, "baseline", BASELINE, revision=baseline_revision, **changes),
        samples_required=4,
    )
    candidate = load_run(
        write_run(tmp_path, "candidate", CANDIDATE, revision=candidate_revision, **changes),
        samples_required=4,
    )
    if edit is not None:
        edit(baseline, candidate)
    comparison = compare(
        baseline,
        candidate,
        prereg=read_prereg(registered_prereg(tmp_path, **(registered or {}))) if prereg else None,
        allow_design_mismatch=override,
    )
    assert comparison.primary == (not comparison.secondary_reasons)
    return comparison.secondary_reasons


def with_config(name, value):
    def edit(*runs):
        for run in runs:
            config = run.identity.config.model_copy(update={name: value})
            run.identity = run.identity.model_copy(update={"config": config})

    return edit


def on_mobench(baseline, _):
    baseline.files = replace(baseline.files, eval_set="mobench")


def test_the_registered_design_has_no_reason_to_be_secondary(tmp_path):
    assert secondary_reasons(tmp_path) == []


@pytest.mark.parametrize(
    ("changes", "reasons"),
    [
        ({"prereg": False}, ["no pre-registration given"]),
        (
            {"source_sha": "1" * 64},
            ["the problems come from another file than the registered one"],
        ),
        (
            {"baseline_revision": "c" * 40},
            [f"baseline revision {'c' * 40}, registered {REVISION}"],
        ),
        ({"candidate_revision": "d" * 40}, ["the candidate is not this project's SFT export"]),
        (
            {"temperature": 0.5},
            [
                "baseline sampling temperature 0.5, top_p 0.95, top_k none is not the registered one",
                "candidate sampling temperature 0.5, top_p 0.95, top_k none is not the registered one",
            ],
        ),
        (
            {"prompt_suffix": " "},
            [
                "baseline prompts are not the registered dpskcot round-0 prompts",
                "candidate prompts are not the registered dpskcot round-0 prompts",
            ],
        ),
        (
            {"pins": make_pins(lean_version="v4.10.0", mathlib_rev="e0", repl_rev="f1")},
            [
                "verifier lean_version v4.10.0, registered v4.9.0-rc1",
                "verifier mathlib_rev e0, registered d1d1e4b7",
                "verifier repl_rev f1, registered 7df77c0a",
            ],
        ),
        ({"edit": with_config("budget_s", 60.0)}, ["verifier budget_s 60.0, registered 180.0"]),
        (
            {"edit": with_config("statement_check", "off")},
            ["verifier statement_check off, registered reject"],
        ),
        ({"edit": with_config("gate", False)}, ["verifier gate False, registered True"]),
        (
            {"edit": with_config("axiom_check", False)},
            ["verifier axiom_check False, registered True"],
        ),
        (
            {"override": "checked by hand"},
            ["design mismatch overridden: checked by hand"],
        ),
        (
            {"registered": {"problem_count: 244": "problem_count: 5"}},
            ["4 problems, registered 5"],
        ),
        (
            {"registered": {"n_samples: 8": "n_samples: 5"}},
            [
                "baseline has fewer than 5 samples for some problem",
                "candidate has fewer than 5 samples for some problem",
            ],
        ),
        ({"registered": {"cap_tokens: 16384": "cap_tokens: 32"}}, ["cap 64, registered 32"]),
        (
            {"edit": on_mobench},
            ["problem set mobench, registered minif2f"],
        ),
    ],
)
def test_each_deviation_from_the_registered_design_is_named(tmp_path, changes, reasons):
    assert secondary_reasons(tmp_path, **changes) == reasons


def test_a_verifier_without_a_recorded_policy_is_never_primary(tmp_path):
    def forget(*runs):
        for run in runs:
            unrecorded = {name: None for name in type(run.identity.config).model_fields}
            config = run.identity.config.model_copy(update=unrecorded)
            run.identity = run.identity.model_copy(update={"config": config})

    assert secondary_reasons(tmp_path, edit=forget) == [
        "verifier budget_s None, registered 180.0",
        "verifier statement_check None, registered reject",
        "verifier gate None, registered True",
        "verifier axiom_check None, registered True",
    ]


def test_one_simulated_run_is_enough_to_be_secondary(tmp_path):
    def simulate_candidate(_, candidate):
        candidate.simulated = True

    assert secondary_reasons(tmp_path, edit=simulate_candidate) == [
        "SIMULATED verifier: not evidence"
    ]


def test_a_prompt_that_differs_on_one_sample_is_named_with_the_other_mismatch(tmp_path, runs):
    baseline, _ = runs
    candidate = load_run(
        write_run(tmp_path, "candidate", CANDIDATE, temperature=0.5), samples_required=4
    )
    # The per-sample design includes the sampling: every sample differs, the first is named.
    with pytest.raises(ComparisonRefused) as refused:
        compare_runs(baseline, candidate, k=2, alpha=0.05, resamples=10, seed=1)
    assert str(refused.value) == (
        "sampling differs: baseline temperature 1.0, top_p 0.95, top_k none, candidate "
        "temperature 0.5, top_p 0.95, top_k none; "
        f"round-0 prompts or sampling differ on {len(candidate.samples)} samples "
        f"(e.g. {min(candidate.samples)}) "
        "(pass allow_design_mismatch with a reason to compare anyway)"
    )


def test_samples_whose_requests_left_top_k_to_the_server_are_refused_naming_the_field(
    tmp_path, runs
):
    baseline, _ = runs
    candidate = load_run(
        write_run(tmp_path, "candidate", CANDIDATE, top_k=None), samples_required=4
    )
    with pytest.raises(ComparisonRefused) as refused:
        compare_runs(baseline, candidate, k=2, alpha=0.05, resamples=10, seed=1)
    assert str(refused.value).startswith(
        "sampling differs: baseline temperature 1.0, top_p 0.95, top_k none, candidate "
        "temperature 1.0, top_p 0.95, top_k unset; "
        "sampling fields left to the server's default (values unknown): top_k; "
    )


def test_every_field_left_to_the_server_is_named_in_order(tmp_path, runs):
    baseline, _ = runs
    candidate = load_run(
        write_run(tmp_path, "candidate", CANDIDATE, top_k=None, top_p=None), samples_required=4
    )
    with pytest.raises(ComparisonRefused) as refused:
        compare_runs(baseline, candidate, k=2, alpha=0.05, resamples=10, seed=1)
    assert "(values unknown): top_k, top_p; " in str(refused.value)


def test_one_sample_whose_prompt_differs_is_named(tmp_path, runs):
    baseline, _ = runs
    candidate = load_run(write_run(tmp_path, "candidate", CANDIDATE), samples_required=4)
    key = SampleKey("p2", 1, 0, 64)
    candidate.samples[key] = replace(candidate.samples[key], design=())
    with pytest.raises(ComparisonRefused) as refused:
        compare_runs(baseline, candidate, k=2, alpha=0.05, resamples=10, seed=1)
    assert str(refused.value) == (
        "round-0 prompts or sampling differ on 1 samples (e.g. ('p2', 1, 0, 64)) "
        "(pass allow_design_mismatch with a reason to compare anyway)"
    )


def test_a_candidate_with_more_samples_than_the_baseline_is_compared_on_the_shared_ones(tmp_path):
    baseline = load_run(write_run(tmp_path, "baseline", BASELINE), samples_required=4)
    more = {pid: [*flags, 1] for pid, flags in CANDIDATE.items()}
    candidate = load_run(write_run(tmp_path, "candidate", more), samples_required=4)
    comparison = compare_runs(baseline, candidate, k=4, alpha=0.05, resamples=10, seed=1)
    assert comparison.table.model_dump() == {
        "both": 2,
        "baseline_only": 1,
        "candidate_only": 1,
        "neither": 0,
    }


def test_a_generation_of_a_problem_outside_the_set_is_named(tmp_path):
    files = write_run(tmp_path, "baseline", BASELINE)
    publish_records(
        files.problems.with_name("few.jsonl"), read_records(files.problems, Problem)[1:]
    )
    with pytest.raises(
        ComparisonRefused, match=r"\('p1', 0, 0, 64\) is not a problem of .*few.jsonl"
    ):
        load_run(replace(files, problems=files.problems.with_name("few.jsonl")), samples_required=4)


def test_k_values_out_of_order_are_each_answered(tmp_path):
    run = load_run(hand_built_run(tmp_path), samples_required=2)
    summary = summarize_run(run, ks=[4, 1], resamples=20, seed=3)
    assert summary.solved_at_k[4] is None
    assert summary.solved_at_k[1].solved == 1
    assert summary.pass1_cluster == summarize_run(run, ks=[1], resamples=20, seed=3).pass1_cluster


def test_the_report_and_the_design_check_agree_on_a_prompt_tokenized_differently(tmp_path):
    from prover_assets.generation.validity import check_design_match

    baseline_files = write_run(tmp_path, "baseline", BASELINE)
    candidate_files = write_run(tmp_path, "candidate", CANDIDATE)
    rows = read_records(candidate_files.generations, Generation)
    rows[0] = rows[0].model_copy(update={"prompt_ids": [9, 9, 9]})  # same messages, other ids
    candidate_files.generations.unlink()
    publish_records(candidate_files.generations, rows)
    check = check_design_match(baseline_files.generations, candidate_files.generations)
    assert not check.passed
    with pytest.raises(ComparisonRefused, match="differ on 1 samples"):
        compare(
            load_run(baseline_files, samples_required=4),
            load_run(candidate_files, samples_required=4),
        )


def test_the_per_problem_table_holds_each_problem_s_counts_and_marks_the_discordant(runs):
    baseline, candidate = runs
    comparison = compare(baseline, candidate)
    # by hand from BASELINE / CANDIDATE, solved@2 = one of the first two samples accepted
    assert [
        (r.problem_id, r.baseline.c, r.candidate.c, r.cell) for r in comparison.per_problem
    ] == [
        ("p1", 1, 1, "both"),
        ("p2", 1, 1, "candidate_only"),
        ("p3", 0, 2, "neither"),
        ("p4", 4, 0, "baseline_only"),
    ]
    # solved@2 per problem: baseline (1, 0, 0, 1), candidate (1, 1, 0, 0): difference 0
    assert comparison.solved_difference.estimate == pytest.approx(0.0)


def test_each_side_of_a_comparison_names_its_system_model_and_runs(runs):
    baseline, candidate = runs
    comparison = compare(baseline, candidate)
    assert comparison.baseline.system == "baseline"
    assert comparison.baseline.model_revs == [REVISION]
    assert comparison.candidate.model_revs == [SFT_REVISION]
    assert (comparison.baseline.solved_at_k, comparison.candidate.solved_at_k) == (2, 2)
    made = comparison.candidate.provenance.generations
    assert made.started_at == "t" and made.finished_at


def test_pass_at_k_bands_hold_the_estimate_and_are_absent_where_samples_are_too_few(runs):
    baseline, _ = runs
    summary = summarize_run(baseline, ks=[1, 2, 8], resamples=200, seed=1)
    band = summary.pass_at_k_cluster[2]
    assert band.estimate == pytest.approx(0.5)  # the hand-computed pass@2 above
    assert band.low <= 0.5 <= band.high
    assert summary.pass_at_k_cluster[8] is None


def report_folder(tmp_path, *, run_id=None):
    """The bundle of the BASELINE / CANDIDATE runs; `run_id` recorded as the runs' maker."""
    pair = written_pair(tmp_path / "runs")
    if run_id is not None:
        manifest = json.loads((tmp_path / "runs" / "manifest.json").read_text())
        write_manifest(tmp_path / "runs", {**manifest, "run_id": run_id})
    prereg = registered_prereg(tmp_path)
    return reported(tmp_path, pair, prereg_path=prereg, config={"name": "test"}).folder


def test_report_md_shows_every_plot_under_its_section_from_the_plots_folder(tmp_path):
    folder = report_folder(tmp_path)
    text = (folder / "report.md").read_text()
    linked = re.findall(r"!\[[^\]]*\]\(plots/([^)]+)\)", text)
    assert sorted(linked) == sorted(p.name for p in (folder / "plots").iterdir())
    comparison = text.index("## Comparisons")
    per_system = text.index("## Per system")
    assert comparison < text.index("(plots/solved_minif2f_c64.png)") < per_system
    assert per_system < text.index("(plots/pass_at_k_minif2f_c64.png)")


def test_report_html_is_the_same_document_with_every_image_embedded(tmp_path):
    folder = report_folder(tmp_path)
    html = (folder / "report.html").read_text()
    images = re.findall(r'<img src="([^"]+)"', html)
    assert len(images) == len(list((folder / "plots").iterdir()))
    assert all(src.startswith("data:image/png;base64,") for src in images)
    assert "<table>" in html and "Glossary" in html
    assert verify_bundle(folder).ok  # the page is an artifact of the bundle, hashed


def test_the_reasons_table_has_an_accepted_row_and_the_total(tmp_path):
    text = (report_folder(tmp_path) / "report.md").read_text()
    # 6 of 16 baseline samples accepted (BASELINE by hand), 4 of 16 candidate ones
    assert "| **accepted** | 6 | 4 |" in text
    assert "| **samples (total)** | 16 | 16 |" in text


def test_the_report_names_units_glossary_and_the_budget_of_its_own_verifier(tmp_path):
    text = (report_folder(tmp_path) / "report.md").read_text()
    assert "gain +4 points" in text
    budget = make_verification(make_generation("p1", 0), accepted=True).verifier.config["budget_s"]
    assert f"near the {budget:g} s budget" in text
    for term in ("solved@k", "pass@k", "cap", "gate", "faithful", "registered", "discordant"):
        assert f"- **{term}**: " in text
    assert "mean completion tokens" in text and "mean effective max_tokens" in text


def test_the_report_prints_no_python_reprs(tmp_path):
    text = (report_folder(tmp_path) / "report.md").read_text()
    assert not re.search(r"\['|\[\(|\{'|None\b|True\b|False\b", text), text


def test_summary_json_fills_both_sides_of_each_comparison(tmp_path):
    summary = json.loads((report_folder(tmp_path) / "summary.json").read_text())
    (comparison,) = summary["comparisons"]
    assert comparison["baseline"]["system"] == "baseline"
    assert comparison["candidate"]["model_revs"] == [SFT_REVISION]


def test_the_report_names_the_run_that_made_each_system_s_samples(tmp_path):
    folder = report_folder(tmp_path, run_id="run-1234")
    text = (folder / "report.md").read_text()
    rows = [
        line for line in text.splitlines() if line.startswith(("| baseline | `", "| candidate | `"))
    ]
    assert len(rows) == 2 and all("run `run-1234`, t to " in row for row in rows)


def test_a_run_carries_the_simulated_rules_its_verdicts_name(tmp_path):
    folder = tmp_path / "runs"
    files = write_run(folder, "baseline", BASELINE)
    verdicts = read_records(files.verdicts, Verification)
    for index, verdict in enumerate(verdicts):
        rule = "rule b" if index % 2 else "rule a"
        config = {**verdict.verifier.config, "simulated_rule": rule}
        verdicts[index] = verdict.model_copy(
            update={"verifier": verdict.verifier.model_copy(update={"config": config})}
        )
    files.verdicts.unlink()
    publish_records(files.verdicts, verdicts)
    assert load_run(files, samples_required=4).simulated_rule == "rule a; rule b"
    assert (
        load_run(
            write_run(tmp_path / "plain", "baseline", BASELINE), samples_required=4
        ).simulated_rule
        is None
    )


def test_pass_at_k_bands_skip_only_the_k_too_large_and_use_the_given_seed(runs):
    from prover_assets.stats import cluster_bootstrap_mean

    baseline, _ = runs
    bands = summarize_run(baseline, ks=[8, 2], resamples=200, seed=5).pass_at_k_cluster
    assert bands[8] is None
    # pass@2 per problem, by hand above: 0.5, 0.5, 0, 1
    expected = cluster_bootstrap_mean([0.5, 0.5, 0.0, 1.0], resamples=200, seed=5)
    assert (bands[2].low, bands[2].high) == (expected.low, expected.high)
    assert (bands[2].seed, bands[2].resamples) == (5, 200)


@pytest.mark.parametrize(
    ("values", "words"),
    [
        ((1.0, 0.95, 0, 0.0, 1.0, 0.0, 0.0), "temperature 1.0, top_p 0.95, top_k none"),
        (
            (1.0, 0.95, 40, 0.0, 1.1, 0.0, 0.0),
            "temperature 1.0, top_p 0.95, top_k 40, repetition_penalty 1.1",
        ),
        ((1.0, 0.95, None, 0.0, 1.0, 0.0, 0.0), "temperature 1.0, top_p 0.95, top_k unset"),
        (
            (0.0, 1.0, 0, 0.05, 1.0, 0.5, 0.0),
            "temperature 0.0, top_p 1.0, top_k none, min_p 0.05, presence_penalty 0.5",
        ),
        (
            (1.0, 0.95, 0, None, 1.0, 0.0, 0.0),
            "temperature 1.0, top_p 0.95, top_k none, min_p unset",
        ),
    ],
)
def test_a_sampling_is_written_in_words_naming_a_changed_or_unset_field(values, words):
    assert sampling_words(values) == words


def test_two_baseline_revisions_are_both_named(tmp_path):
    def two_revisions(baseline, _):
        key = next(iter(baseline.samples))
        baseline.samples[key] = replace(baseline.samples[key], model_rev="d" * 40)

    reasons = secondary_reasons(tmp_path, edit=two_revisions)
    assert f"baseline revision {'a' * 40}, {'d' * 40}, registered {REVISION}" in reasons


def test_per_problem_rows_and_sides_hold_each_system_s_own_counts(runs):
    baseline, candidate = runs
    comparison = compare(baseline, candidate)
    solved = [(r.baseline.solved, r.candidate.solved) for r in comparison.per_problem]
    assert solved == [(True, True), (False, True), (False, False), (True, False)]
    assert comparison.baseline.problems == comparison.candidate.problems == 4


def test_each_comparison_says_the_endpoint_its_eval_set_is_configured_as(tmp_path):
    endpoint = "further secondary, not registered: MOBench whole"
    result = reported(
        tmp_path,
        prereg_path=registered_prereg(tmp_path),
        settings=settings(endpoints={"minif2f": endpoint}),
        config={"name": "test"},
    )
    summary = json.loads((result.folder / "summary.json").read_text())
    assert [c["endpoint"] for c in summary["comparisons"]] == [endpoint]
    assert (
        f"Endpoint (as the config names it): {endpoint}."
        in (result.folder / "report.md").read_text()
    )
