"""Problem groups and correction selection against hand-built truth tables."""

from prover_assets.generation.corrections import (
    check_correction_children,
    correction_specs,
    plan_corrections,
)
from prover_assets.generation.groups import ProblemGroup, problem_groups
from prover_assets.lean.feedback import format_error_block
from prover_assets.records import Stage
from prover_assets_tests.factories import make_generation, make_problem, make_verification

ERRORS = [
    {
        "severity": "error",
        "pos": {"line": 2, "column": 2},
        "endPos": {"line": 2, "column": 7},
        "data": "omega failed",
    }
]
CODE = "theorem t (x : ℕ) (h₀ : 0 < x) : 0 < x + 1 := by\n  omega"


def table(rows):
    """rows: (problem, sample_idx, outcome) with outcome accepted|errors|gate|infra."""
    generations, verdicts = {}, {}
    for problem_id, sample_idx, outcome in rows:
        generation = make_generation(problem_id, sample_idx)
        generations[generation.key] = generation
        if outcome == "missing":
            continue
        if outcome == "accepted":
            verdict = make_verification(generation)
        elif outcome == "errors":
            verdict = make_verification(
                generation, accepted=False, repl_errors=ERRORS, repl_code=CODE
            )
        elif outcome == "gate":
            verdict = make_verification(
                generation, accepted=False, stage=Stage.GATE, reasons=["banned:sorry"]
            )
        else:
            verdict = make_verification(
                generation,
                accepted=False,
                stage=Stage.INFRASTRUCTURE,
                reasons=["infrastructure:crash"],
            )
        verdicts[verdict.key] = verdict
    return generations, verdicts


ROWS = [
    ("solved_all", 0, "accepted"),
    ("solved_all", 1, "accepted"),
    ("mixed", 0, "accepted"),
    ("mixed", 1, "errors"),
    ("wrong", 0, "errors"),
    ("wrong", 1, "gate"),
    ("short", 0, "errors"),
    ("broken", 0, "errors"),
    ("broken", 1, "infra"),
    ("unjudged", 0, "errors"),
    ("unjudged", 1, "missing"),
]


def test_groups_truth_table():
    generations, verdicts = table(ROWS)
    groups = {
        p: o.group
        for p, o in problem_groups(generations.keys(), verdicts, samples_per_problem=2).items()
    }
    assert groups == {
        "solved_all": ProblemGroup.ALL_CORRECT,
        "mixed": ProblemGroup.MIXED,
        "wrong": ProblemGroup.ALL_WRONG,
        "short": ProblemGroup.INVALID,
        "broken": ProblemGroup.INVALID,
        "unjudged": ProblemGroup.INVALID,
    }


def test_only_the_first_n_samples_count():
    generations, verdicts = table([("p", 0, "accepted"), ("p", 1, "accepted"), ("p", 2, "errors")])
    assert (
        problem_groups(generations.keys(), verdicts, samples_per_problem=2)["p"].group
        is ProblemGroup.ALL_CORRECT
    )


def test_correction_parents_are_failed_samples_with_errors_of_unsolved_problems():
    generations, verdicts = table(ROWS)
    plan = plan_corrections(generations, verdicts, round=1, samples_per_problem=2)
    assert plan.solved_problems == ["mixed", "solved_all"]
    assert plan.unsolved_problems == ["broken", "short", "unjudged", "wrong"]
    assert sorted(g.key[:2] for g, _ in plan.parents) == [
        ("broken", 0),
        ("short", 0),
        ("unjudged", 0),
        ("wrong", 0),
    ]
    assert plan.no_repl_errors == 2  # wrong/1 (gate) and broken/1 (infrastructure)


def test_children_carry_the_conversation_and_reference_their_parent():
    generations, verdicts = table([("wrong", 0, "errors"), ("wrong", 1, "errors")])
    plan = plan_corrections(generations, verdicts, round=1, samples_per_problem=2)
    specs = correction_specs(plan, {"wrong": make_problem("wrong")}, samples_per_parent=2)
    assert [(s.sample_idx, s.round, s.parent.sample_idx) for s in specs] == [
        (0, 1, 0),
        (1, 1, 0),
        (2, 1, 1),
        (3, 1, 1),
    ]
    parent = generations[("wrong", 0, 0, 64)]
    assert [m.role for m in specs[0].messages] == ["user", "assistant", "user"]
    assert specs[0].messages[1].content == parent.completion_text
    assert format_error_block(CODE, ERRORS) in specs[0].messages[2].content


def test_child_check_flags_children_of_solved_or_unknown_parents():
    generations, verdicts = table(
        [
            ("wrong", 0, "errors"),
            ("wrong", 1, "errors"),
            ("solved", 0, "accepted"),
            ("solved", 1, "errors"),
        ]
    )
    from prover_assets.records import ParentRef

    good = make_generation(
        "wrong",
        0,
        round=1,
        parent=ParentRef(problem_id="wrong", sample_idx=0, round=0, cap_tokens=64),
    )
    of_solved = make_generation(
        "solved",
        1,
        round=1,
        parent=ParentRef(problem_id="solved", sample_idx=1, round=0, cap_tokens=64),
    )
    outcome = check_correction_children(
        [good, of_solved], generations, verdicts, samples_per_problem=2
    )
    assert not outcome.passed
    assert outcome.metadata["invalid_children"] == [["solved", 1, 1, 64]]
