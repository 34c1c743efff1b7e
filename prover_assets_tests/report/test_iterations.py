"""The report past the registered design: every other comparison exploratory (never PRIMARY),
the training-seed spread and the expert-iteration curve, against hand-built truth tables."""

from __future__ import annotations

import statistics

import pytest

from prover_assets.records import publish_records
from prover_assets.report.iterations import (
    CandidateRuns,
    IterationInputs,
    exploratory_comparisons,
    iteration_curve,
    seed_spread,
)
from prover_assets.report.runs import load_run
from prover_assets.report.stages import materialize_report
from prover_assets.report.summary import Comparison, ExploratoryComparison, read_summary
from prover_assets_tests.factories import (
    make_comparison,
    make_generation,
    make_side,
    make_verification,
)
from prover_assets_tests.report.test_analysis import BASELINE, CANDIDATE, settings, write_run

SFT = "sft-" + "b" * 64
REGISTERED, OTHER = 11, 22
# accepted flags per sample 0..3, by hand; solved@2 reads samples 0 and 1
ALL_SOLVED = {p: [1, 1, 0, 0] for p in ("p1", "p2", "p3", "p4")}  # solved@2: 4
THREE = {"p1": [1, 0, 0, 0], "p2": [0, 1, 0, 0], "p3": [1, 1, 1, 1], "p4": [0, 0, 1, 1]}  # 3
ONLY_P4 = {"p1": [0, 0, 1, 1], "p2": [0, 0, 0, 0], "p3": [0, 0, 0, 0], "p4": [1, 0, 0, 0]}  # 1
# BASELINE solves p1, p4 at 2; CANDIDATE (iteration 1, registered seed) p1, p2.
TABLES = {
    (1, REGISTERED): CANDIDATE,
    (1, OTHER): ALL_SOLVED,
    (2, REGISTERED): THREE,
    (2, OTHER): ONLY_P4,
}


def pool_round(folder, name, accepted_by_problem, tokens):
    """One pool round's files: a sample per problem, accepted as given, `tokens` each."""
    generations = [
        make_generation(pid, 0, completion_ids=[1] * tokens) for pid in accepted_by_problem
    ]
    verdicts = [
        make_verification(g, accepted=accepted_by_problem[g.problem_id]) for g in generations
    ]
    publish_records(folder / f"{name}_gen.jsonl", generations)
    publish_records(folder / f"{name}_ver.jsonl", verdicts)
    return folder / f"{name}_gen.jsonl", folder / f"{name}_ver.jsonl"


@pytest.fixture
def iterations(tmp_path):
    baseline = write_run(tmp_path / "baseline", "baseline", BASELINE)
    candidates = [
        CandidateRuns(
            i,
            seed,
            {
                ("minif2f", 64): write_run(
                    tmp_path / f"i{i}s{seed}", f"candidate i{i} s{seed}", table, revision=SFT
                )
            },
        )
        for (i, seed), table in TABLES.items()
    ]
    rounds = [
        [pool_round(tmp_path, "i1r0", {"q1": True, "q2": False, "q3": False}, 3)],
        [pool_round(tmp_path, "i2r0", {"q2": True, "q3": False}, 5)],
    ]
    return baseline, IterationInputs(REGISTERED, candidates, rounds, ("minif2f", 64))


def explored(iterations):
    baseline, inputs = iterations
    return exploratory_comparisons(
        {("minif2f", 64): load_run(baseline, samples_required=4)},
        inputs,
        lambda files: load_run(files, samples_required=4),
        k=2,
        alpha=0.05,
        resamples=10,
        seed=1,
    )


def test_every_comparison_but_the_registered_one_is_exploratory_and_never_primary(iterations):
    comparisons = explored(iterations)
    assert [(c.iteration, c.seed, c.against) for c in comparisons] == [
        (1, OTHER, "baseline"),
        (2, REGISTERED, "baseline"),
        (2, REGISTERED, "iteration 1"),
        (2, OTHER, "baseline"),
    ]
    assert [c.what for c in comparisons] == [
        f"iteration 1, seed {OTHER} against the baseline",
        f"iteration 2, seed {REGISTERED} against the baseline",
        f"iteration 2 against iteration 1, seed {REGISTERED}",
        f"iteration 2, seed {OTHER} against the baseline",
    ]
    assert {c.pass1_difference.seed for c in comparisons} == {1}  # the report's seed
    assert not any(c.primary for c in comparisons)
    assert all(c.exploratory for c in comparisons)
    assert all(c.secondary_reasons[0].startswith("exploratory: ") for c in comparisons)


def test_an_iteration_is_compared_with_the_one_before_problem_by_problem(iterations):
    against_before = explored(iterations)[2]
    # iteration 1 (registered) solves p1, p2 at 2; iteration 2 solves p1, p2, p3
    assert against_before.table.model_dump() == {
        "both": 2,
        "baseline_only": 0,
        "candidate_only": 1,
        "neither": 1,
    }
    assert (
        against_before.baseline.solved_at_k,
        against_before.candidate.solved_at_k,
    ) == (2, 3)
    assert against_before.p_value == 1.0  # one discordant problem: exact two-sided p = 1


def registered_comparison(solved: int, decision: str, **more) -> Comparison:
    return make_comparison(
        decision=decision,
        baseline=make_side("baseline", 2, wilson=(0.1, 0.9)),
        candidate=make_side("candidate", solved, wilson=(0.2, 0.8)),
        **more,
    )


def against_baseline(
    iteration, seed, solved, decision, eval_set="minif2f", against="baseline"
) -> ExploratoryComparison:
    return registered_comparison(
        solved,
        decision,
        eval_set=eval_set,
        iteration=iteration,
        seed=seed,
        against=against,
        what=f"iteration {iteration}, seed {seed} against {against}",
    )


def spread_inputs(seeds):
    candidates = [CandidateRuns(i, s, {}) for i in (1, 2) for s in seeds]
    return IterationInputs(seeds[0], candidates, [[], []], ("minif2f", 64))


def test_the_seed_spread_gives_each_seeds_solved_its_range_and_sd_and_whether_decisions_agree():
    exploratory = [
        against_baseline(1, 22, 4, "no detectable change"),
        against_baseline(1, 33, 3, "no detectable change"),
        against_baseline(2, 11, 5, "improvement"),
        against_baseline(2, 22, 1, "no detectable change"),
        against_baseline(2, 33, 3, "degradation"),
        against_baseline(2, 22, 0, "degradation", eval_set="mobench"),  # another set: not read
        against_baseline(2, 11, 9, "x", against="iteration 1"),  # not against the baseline
    ]
    rows = seed_spread(
        registered_comparison(2, "no detectable change"), exploratory, spread_inputs([11, 22, 33])
    )
    first, second = rows
    assert [(s.seed, s.solved_at_k, s.decision) for s in first.seeds] == [
        (11, 2, "no detectable change"),
        (22, 4, "no detectable change"),
        (33, 3, "no detectable change"),
    ]
    assert (first.min, first.max, first.agree) == (2, 4, True)
    assert (first.problems, first.baseline_solved_at_k) == (4, 2)
    assert first.sd == pytest.approx(1.0)  # sd of 2, 4, 3 with n - 1: 1
    assert first.sentence == (
        "Iteration 1: every one of the 3 training seeds agrees with the registered seed's (11) "
        "decision: no detectable change."
    )
    assert [s.solved_at_k for s in second.seeds] == [5, 1, 3]
    assert second.sd == pytest.approx(statistics.stdev([5, 1, 3]))
    assert not second.agree
    assert second.sentence == (
        "Iteration 2: 2 of 3 training seeds (seed 22, 33) disagree with the registered seed's "
        "(11) decision (improvement): training variance alone could change the answer."
    )
    assert [s.registered for s in first.seeds + second.seeds] == [True] + [False] * 5


def test_two_training_seeds_have_a_standard_deviation():
    rows = seed_spread(
        registered_comparison(2, "no detectable change"),
        [
            against_baseline(1, 22, 4, "no detectable change"),
            against_baseline(2, 11, 5, "no detectable change"),
            against_baseline(2, 22, 2, "no detectable change"),
        ],
        spread_inputs([11, 22]),
    )
    # 2 and 4: sd sqrt(2); 5 and 2: sd 3 / sqrt(2) (n - 1)
    assert [row.sd for row in rows] == [pytest.approx(2**0.5), pytest.approx(3 / 2**0.5)]


def test_one_training_seed_has_no_spread_and_says_so():
    rows = seed_spread(
        registered_comparison(2, "no detectable change"),
        [against_baseline(2, 11, 3, "no detectable change")],
        spread_inputs([11]),
    )
    assert rows[0].sd is None
    assert rows[0].sentence == "Iteration 1: one training seed, so no spread is measured."


def test_the_curve_counts_pool_problems_solved_so_far_and_the_work_of_each_iteration(iterations):
    _, inputs = iterations
    curve = iteration_curve(
        registered_comparison(2, "x"),
        [against_baseline(2, REGISTERED, 3, "x"), against_baseline(2, OTHER, 1, "x")],
        inputs,
    )
    assert [
        (
            r.iteration,
            r.pool_solved_cumulative,
            r.pool_samples,
            r.pool_completion_tokens,
            r.solved_at_k,
        )
        for r in curve
    ] == [
        (0, 0, 0, 0, 2),  # the baseline
        (1, 1, 3, 9, 2),  # q1 solved; 3 samples of 3 tokens
        (2, 2, 2, 10, 3),  # q2 solved too; 2 samples of 5 tokens; the registered seed's 3
    ]


@pytest.mark.slow
def test_the_report_adds_iterations_without_changing_the_registered_comparison(
    tmp_path, iterations
):
    baseline, inputs = iterations
    registered = inputs.of(1, REGISTERED).runs[("minif2f", 64)]

    def report(name, with_iterations):
        result = materialize_report(
            tmp_path / name,
            [(baseline, registered)],
            [],
            prereg_path=None,
            config_files=[],
            settings=settings(),
            config={"name": "test"},
            iterations=inputs if with_iterations else None,
        )
        return result.folder, read_summary(result.folder / "summary.json")

    plain_folder, plain = report("plain", False)
    folder, summary = report("iterations", True)
    assert summary.comparisons == plain.comparisons
    assert plain.exploratory is None and len(summary.exploratory) == 4
    text = (folder / "report.md").read_text()
    assert "## Expert iterations and training seeds" in text
    assert text.count("**exploratory**") == 4
    assert {"iteration_curve.png", "seed_spread.png"} <= {
        p.name for p in (folder / "plots").iterdir()
    }
    assert "measured over 2 training seeds" in text
    assert "one SFT run is compared" in (plain_folder / "report.md").read_text()
