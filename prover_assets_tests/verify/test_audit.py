"""The statement audit (`verify/audit.py`): each check's command, built by hand from the
statement; a hand-built eval set with planted defects judged through the real client and worker
against the REPL double scripted with Lean's answers, the flags expected by hand; resumption;
and the finding rules on hand-built runs."""

from __future__ import annotations

from prover_assets.lean.protocol import GOEDEL_HEADER
from prover_assets.problems.defects import DefectKind
from prover_assets.verify.audit import (
    TRIVIAL_TACTICS,
    VACUITY_TACTICS,
    AuditRun,
    AuditStatus,
    audit_jobs,
    audit_statements,
    audit_variants,
    findings_of,
)
from prover_assets_tests.factories import PREAMBLE, PREAMBLE_STATEMENT, make_problem
from prover_assets_tests.lean_double import double_backend, error_reply, repl_log

TRIVIAL = GOEDEL_HEADER + "theorem triv (x : ℕ) (h₀ : 0 < x) : 0 < x + 1 := by sorry"
VACUOUS = GOEDEL_HEADER + "theorem vac (x : ℕ) (h₀ : x < 0) : x = 5 := by sorry"
PHANTOM = GOEDEL_HEADER + "theorem ph (h : 0 < n) : 0 < n + 2 := by sorry"
CLEAN = GOEDEL_HEADER + "theorem clean (x : ℕ) (h₀ : 0 < x) : 0 < x + 7 := by sorry"
SORRY_AXIOM = GOEDEL_HEADER + "theorem sax (x : ℕ) (h₀ : 0 < x) : 0 < x + 9 := by sorry"
NO_BINDERS = GOEDEL_HEADER + "theorem nb : (2 : ℕ) + 2 = 4 := by sorry"
FAILED = error_reply("unsolved goals", line=2, column=2)


def test_each_check_is_the_statement_renamed_with_one_tactic_or_its_binders_proving_false():
    variants = audit_variants(make_problem("triv", TRIVIAL))
    signature = "(x : ℕ) (h₀ : 0 < x) : 0 < x + 1"
    assert variants["elaboration"] == GOEDEL_HEADER + f"theorem _audit {signature} := by sorry"
    for tactic in TRIVIAL_TACTICS:
        assert variants[f"trivial:{tactic}"] == (
            GOEDEL_HEADER + f"theorem _audit {signature} := by\n  {tactic}"
        )
    for tactic in VACUITY_TACTICS:
        assert variants[f"vacuous:{tactic}"] == (
            GOEDEL_HEADER + f"theorem _audit (x : ℕ) (h₀ : 0 < x) : False := by\n  {tactic}"
        )
    assert len(variants) == 2 + len(TRIVIAL_TACTICS) + len(VACUITY_TACTICS)


def test_a_statement_without_binders_gets_no_vacuity_check():
    variants = audit_variants(make_problem("nb", NO_BINDERS))
    assert not [check for check in variants if check.startswith("vacuous:")]
    assert variants["trivial:decide"].endswith("theorem _audit : (2 : ℕ) + 2 = 4 := by\n  decide")


def test_a_preamble_problem_keeps_its_preamble_and_the_strict_option_reaches_lean():
    problem = make_problem("p", PREAMBLE_STATEMENT)
    jobs = {job.key[1]: job for job in audit_jobs(problem, budget_s=5.0)}
    strict = jobs["strict_elaboration"].body
    assert "noncomputable abbrev solution : ℝ := 9 * Real.sqrt 2 / 32" in strict
    # the compile view drops `set_option` lines: the option is placed after it, on its own line
    assert strict.endswith(
        "namespace Geo\n\nset_option autoImplicit false in\n"
        "theorem _audit (x : ℝ) (hx : f x = solution) : 0 < f x := by sorry"
    )
    assert "set_option" not in jobs["elaboration"].body
    assert jobs["vacuous:omega"].body.endswith(
        PREAMBLE.split("\n")[-1]
        + "theorem _audit (x : ℝ) (hx : f x = solution) : False := by\n  omega"
    )
    assert jobs["trivial:simp"].theorem_name == "_audit"
    assert jobs["elaboration"].theorem_name is None


# Lean's answers, scripted: first match wins; every tactic proof not named fails.
RULES = [
    {"match": {"substring": "0 < x + 1 := by\n  norm_num"}, "reply": {}},
    {"match": {"substring": "(h₀ : x < 0) : False := by\n  omega"}, "reply": {}},
    {
        "match": {"substring": "autoImplicit false in\ntheorem _audit (h : 0 < n)"},
        "reply": error_reply("unknown identifier 'n'", line=1, column=20),
    },
    {"match": {"substring": "0 < x + 7 := by\n  simp"}, "action": "hang"},
    # compiles, but on sorryAx: not a proof
    {"match": {"substring": "0 < x + 9 := by\n  decide"}, "reply": {}, "axioms": ["sorryAx"]},
    {"match": {"substring": "selftest_bad"}, "reply": FAILED},
    {"match": {"regex": ":= by\n  [a-z]"}, "reply": FAILED},
]
PLANTED = {
    "triv": TRIVIAL,
    "vac": VACUOUS,
    "ph": PHANTOM,
    "clean": CLEAN,
    "sax": SORRY_AXIOM,
}


def audited(tmp_path, budget_s: float = 1.0) -> list[AuditRun]:
    problems = [make_problem(pid, text) for pid, text in PLANTED.items()]
    with double_backend(tmp_path / "repl", RULES, workers=2) as backend:
        return audit_statements(
            problems, backend, budget_s=budget_s, results_path=tmp_path / "audit.jsonl"
        )


def test_planted_defects_are_found_with_the_tactic_and_lean_s_answer(tmp_path):
    runs = audited(tmp_path, budget_s=1.0)
    found = {(f.problem_id, f.kind, f.tactic) for f in findings_of(runs)}
    assert found == {
        ("triv", DefectKind.TRIVIAL, "norm_num"),
        ("vac", DefectKind.VACUOUS_HYPOTHESES, "omega"),
        ("ph", DefectKind.PHANTOM_VARIABLE, None),
    }
    (phantom,) = [f for f in findings_of(runs) if f.kind is DefectKind.PHANTOM_VARIABLE]
    assert phantom.check == "strict_elaboration"
    assert phantom.messages[0]["data"] == "unknown identifier 'n'"
    (trivial,) = [f for f in findings_of(runs) if f.kind is DefectKind.TRIVIAL]
    assert (trivial.check, trivial.messages) == ("trivial:norm_num", ())  # Lean said nothing more
    assert "unknown identifier 'n'" in phantom.description
    by_key = {run.key: run for run in runs}
    # 5 problems x (2 elaborations + 6 tactics + 4 vacuity checks), in problem then check order
    assert len(runs) == 5 * 12
    assert [run.problem_id for run in runs[:12]] == ["triv"] * 12
    assert by_key[("clean", "trivial:simp")].status is AuditStatus.TIMEOUT  # not judged
    assert by_key[("clean", "trivial:simp")].messages == [{"data": "timeout", "detail": None}]
    assert by_key[("sax", "trivial:decide")].status is AuditStatus.FAILS  # sorryAx: no proof
    assert by_key[("sax", "trivial:decide")].axioms == ["sorryAx"]
    assert by_key[("triv", "trivial:norm_num")].axioms == [
        "propext",
        "Classical.choice",
        "Quot.sound",
    ]
    assert by_key[("triv", "trivial:rfl")].messages[0]["data"] == "unsolved goals"
    assert by_key[("ph", "elaboration")].status is AuditStatus.HOLDS


def test_progress_counts_every_check_of_the_audit_and_a_resume_starts_from_those_done(tmp_path):
    problems = [make_problem(pid, text) for pid, text in PLANTED.items()]
    told: list[tuple[int, int]] = []
    with double_backend(tmp_path / "repl", RULES, workers=2) as backend:
        audit_statements(problems[:2], backend, budget_s=1.0, results_path=tmp_path / "audit.jsonl")
        audit_statements(
            problems,
            backend,
            budget_s=1.0,
            results_path=tmp_path / "audit.jsonl",
            progress=lambda done, total: told.append((done, total)),
        )
    # 2 of 5 problems (24 of 60 checks) done before; then one call per check sent
    assert told == [(done, 60) for done in range(25, 61)]


def test_a_rerun_sends_nothing_already_recorded_and_gives_the_same_runs(tmp_path):
    first = audited(tmp_path)
    sent = len(repl_log(tmp_path / "repl"))
    again = audited(tmp_path)
    assert again == first
    # the second backend's self-check of nothing: only the workers' start, no proof
    proofs = [e for e in repl_log(tmp_path / "repl")[sent:] if "_audit" in str(e["request"])]
    assert proofs == []


def run(problem_id: str, check: str, status: AuditStatus, data: str = "") -> AuditRun:
    return AuditRun(
        problem_id=problem_id,
        check=check,
        command="",
        status=status,
        messages=[{"data": data}] if data else [],
        axioms=None,
        verify_s=0.1,
    )


def test_a_statement_that_fails_even_as_it_is_is_not_phantom_and_unjudged_checks_find_nothing():
    runs = [
        run("broken", "elaboration", AuditStatus.FAILS, "unknown constant"),
        run("broken", "strict_elaboration", AuditStatus.FAILS, "unknown identifier"),
        run("slow", "elaboration", AuditStatus.HOLDS),
        run("slow", "strict_elaboration", AuditStatus.TIMEOUT),
        run("slow", "trivial:simp", AuditStatus.TIMEOUT),
        run("slow", "vacuous:omega", AuditStatus.INFRASTRUCTURE),
    ]
    assert findings_of(runs) == []


def test_the_first_tactic_in_the_list_order_that_proves_it_is_the_one_recorded():
    runs = [
        run("t", "trivial:rfl", AuditStatus.FAILS),
        run("t", "trivial:decide", AuditStatus.HOLDS),
        run("t", "trivial:simp", AuditStatus.HOLDS),
        run("t", "vacuous:simp at *", AuditStatus.HOLDS),
        run("t", "vacuous:omega", AuditStatus.HOLDS),
    ]
    found = [(f.kind, f.tactic, f.source) for f in findings_of(runs)]
    assert found == [
        (DefectKind.TRIVIAL, "decide", "statement_audit (trivial:decide)"),
        (DefectKind.VACUOUS_HYPOTHESES, "simp at *", "statement_audit (vacuous:simp at *)"),
    ]
