"""The strict verifier end to end against the scripted REPL double."""

import pytest

from prover_assets.lean.extract import compile_view, reinsert_statement
from prover_assets.lean.protocol import GOEDEL_HEADER
from prover_assets.records import Stage, code_sha256
from prover_assets.records.hashing import sha256_text
from prover_assets.verify import worker as worker_module
from prover_assets.verify.history import CostHistory, LeanCost, read_costs
from prover_assets.verify.verifier import StrictVerifier, VerifierPolicy
from prover_assets_tests.factories import (
    PREAMBLE_STATEMENT,
    STATEMENT,
    make_generation,
    make_problem,
    preamble_code,
)
from prover_assets_tests.lean_double import double_backend, error_reply, repl_log

SIGNATURE = "theorem t (x : ℕ) (h₀ : 0 < x) : 0 < x + 1 := by"


def completion(proof: str, signature: str = SIGNATURE) -> str:
    return f"Plan: use omega.\n\n```lean4\n{signature}\n{proof}\n```"


def verify(tmp_path, proof=None, rules=None, *args, policy=None, generation=None, **backend_kwargs):
    problem = make_problem()
    generation = generation or make_generation(completion_text=completion(proof))
    policy = policy or VerifierPolicy(budget_s=5.0, feedback=True)
    with double_backend(tmp_path, rules, *args, **backend_kwargs) as backend:
        return StrictVerifier(backend, policy).verify(problem, generation)


def is_proof(request: dict) -> bool:
    """A proof command: sent in an env, not `#print axioms`, the statement check or the
    canary (`#check canary_<nonce>`)."""
    checks = ("#print", "example", "#check")
    return request.get("env") is not None and not request["cmd"].startswith(checks)


def proof_commands(tmp_path):
    return [e for e in repl_log(tmp_path) if is_proof(e["request"])]


def test_clean_proof_is_accepted_with_pins_budget_and_code_hash(tmp_path):
    verdict = verify(tmp_path, "  omega")
    assert verdict.accepted
    generation = make_generation(completion_text=completion("  omega"))
    assert verdict.code_sha256 == code_sha256(generation.lean_code) != code_sha256(None)
    assert verdict.stage is Stage.ACCEPTED
    assert verdict.budget_s == 5.0
    assert verdict.verifier.pins.lean_version == "v4.9.0-rc1"
    assert verdict.verifier.config["statement_check"] == "reject"
    assert verdict.diagnostics.axioms == ["propext", "Classical.choice", "Quot.sound"]


def test_header_is_sent_once_and_proofs_use_its_env(tmp_path):
    problem = make_problem()
    generations = [
        make_generation(sample_idx=i, completion_text=completion(f"  omega -- {i}"))
        for i in range(4)
    ]
    # No warm spare: it would import the header in a REPL of its own.
    with double_backend(tmp_path, workers=1, warm_spare=False) as backend:
        StrictVerifier(backend, VerifierPolicy(budget_s=5.0, feedback=False)).verify_many(
            [(problem, g) for g in generations]
        )
        imports = backend.header_imports()
    requests = [e["request"] for e in repl_log(tmp_path)]
    headers = [r for r in requests if "env" not in r]
    assert headers == [{"cmd": problem.header}]
    assert imports == {"worker-0": 1}  # and no spare's count
    proofs = [r for r in requests if is_proof(r)]
    assert len(proofs) == 4 and all(r["env"] == 0 for r in proofs)
    expected_body = compile_view(
        reinsert_statement(STATEMENT, GOEDEL_HEADER + SIGNATURE + "\n  omega -- 0")
    )
    assert proofs[0]["cmd"] == expected_body or any(r["cmd"] == expected_body for r in proofs)


def test_axiom_check_runs_in_the_proofs_env(tmp_path):
    verify(tmp_path, "  omega")
    requests = [e["request"] for e in repl_log(tmp_path)]
    proof_answer = next(e["answer"] for e in repl_log(tmp_path) if is_proof(e["request"]))
    printed = next(r for r in requests if r["cmd"].startswith("#print axioms"))
    assert printed == {"cmd": "#print axioms _root_.t", "env": proof_answer["env"]}


def test_no_code_needs_no_lean(tmp_path):
    generation = make_generation(completion_text="I cannot do this.")
    verdict = verify(tmp_path, generation=generation)
    assert (verdict.stage, verdict.reasons) == (Stage.NO_CODE, ["no_code"])
    assert repl_log(tmp_path) == []


def test_length_capped_sample_is_never_accepted(tmp_path):
    generation = make_generation(
        completion_text=completion("  omega"),
        completion_ids=[1] * 8,
        finish_reason="length",
        cap_tokens=8,
    )
    verdict = verify(tmp_path, generation=generation)
    assert (verdict.stage, verdict.reasons, verdict.accepted) == (
        Stage.NO_CODE,
        ["no_code:length"],
        False,
    )


def test_gate_rejects_without_starting_lean(tmp_path):
    verdict = verify(tmp_path, "  native_decide")
    assert (verdict.stage, verdict.reasons) == (Stage.GATE, ["banned:native_decide"])
    assert proof_commands(tmp_path) == []


def test_sorry_is_banned_by_the_gate(tmp_path):
    assert verify(tmp_path, "  sorry").reasons == ["banned:sorry"]


def test_displayed_other_statement_is_rejected_strictly_and_only_recorded_otherwise(tmp_path):
    weaker = completion("  omega", signature="theorem t (x : ℕ) (h₀ : 0 < x) : 0 ≤ x + 1 := by")
    generation = make_generation(completion_text=weaker)
    strict = verify(tmp_path, generation=generation)
    assert (strict.stage, strict.reasons) == (Stage.GATE, ["statement_mismatch"])
    lenient = verify(
        tmp_path / "b",
        generation=generation,
        policy=VerifierPolicy(budget_s=5.0, feedback=False, statement_check="record"),
    )
    assert lenient.accepted
    assert lenient.diagnostics.displayed_statement_faithful is False


def test_the_displayed_theorem_is_read_once_per_sample_and_the_gate_uses_that_reading(
    tmp_path, monkeypatch
):
    from prover_assets.lean import extract
    from prover_assets.verify import verifier as verifier_module

    reads = []

    def counted(code):
        reads.append(code)
        return extract.displayed_theorem(code)

    monkeypatch.setattr(verifier_module, "displayed_theorem", counted)
    monkeypatch.setattr("prover_assets.lean.gate.displayed_theorem", counted)
    verdict = verify(tmp_path, "  omega")
    assert verdict.accepted and verdict.diagnostics.displayed_statement_faithful is True
    assert reads == [make_generation(completion_text=completion("  omega")).lean_code]


def test_compile_error_carries_feedback_whose_positions_index_repl_code(tmp_path):
    rules = [
        {
            "match": {"substring": "nlinarith [h₀]"},
            "messages_at": [
                {"severity": "error", "at": "nlinarith [h₀]", "data": "linarith failed"}
            ],
        }
    ]
    verdict = verify(tmp_path, "  nlinarith [h₀]", rules)
    assert (verdict.stage, verdict.reasons) == (Stage.COMPILE_ERROR, ["compile_error"])
    error = verdict.repl_errors[0]
    line = verdict.repl_code.split("\n")[error["pos"]["line"] - 1]
    assert line[error["pos"]["column"] : error["endPos"]["column"]] == "nlinarith [h₀]"


def test_repl_level_sorry_warning_is_incomplete(tmp_path):
    rules = [
        {
            "match": {"substring": "simp_all"},
            "reply": {
                "messages": [
                    {
                        "severity": "warning",
                        "pos": {"line": 1, "column": 8},
                        "endPos": {"line": 1, "column": 9},
                        "data": "declaration uses 'sorry'",
                    }
                ]
            },
        }
    ]
    verdict = verify(tmp_path, "  simp_all", rules)
    assert (verdict.stage, verdict.reasons) == (Stage.INCOMPLETE, ["incomplete:sorry_warning"])


def test_foreign_axiom_rejects(tmp_path):
    rules = [
        {
            "match": {"substring": "positivity"},
            "reply": {},
            "axioms": ["propext", "Lean.ofReduceBool"],
        }
    ]
    verdict = verify(tmp_path, "  positivity", rules)
    assert (verdict.stage, verdict.reasons) == (Stage.AXIOM, ["axiom:Lean.ofReduceBool"])


def test_hang_becomes_timeout_and_the_next_proof_still_runs(tmp_path):
    rules = [{"match": {"substring": "aesop"}, "action": "hang"}]
    problem = make_problem()
    hanging = make_generation(sample_idx=0, completion_text=completion("  aesop"))
    fine = make_generation(sample_idx=1, completion_text=completion("  omega"))
    with double_backend(tmp_path, rules, workers=1) as backend:
        verdicts = StrictVerifier(
            backend, VerifierPolicy(budget_s=1.0, feedback=False, recheck_timeouts=False)
        ).verify_many([(problem, hanging), (problem, fine)])
        restarts = backend.restarts()
    by_index = {v.sample_idx: v for v in verdicts}
    assert (by_index[0].stage, by_index[0].reasons) == (Stage.TIMEOUT, ["timeout"])
    assert by_index[1].accepted
    assert restarts == 1


def test_a_timeout_is_run_once_more_after_the_batch_and_the_verdict_records_both_attempts(
    tmp_path,
):
    # The first attempt hangs (a loaded host); the re-check, after the batch, answers.
    rules = [{"match": {"substring": "aesop"}, "action": "hang", "times": 1}]
    problem = make_problem()
    slow = make_generation(sample_idx=0, completion_text=completion("  aesop"))
    fine = make_generation(sample_idx=1, completion_text=completion("  omega"))
    with double_backend(tmp_path, rules, workers=2) as backend:
        verifier = StrictVerifier(backend, VerifierPolicy(budget_s=1.0, feedback=False))
        verdicts = list(verifier.verify_stream([(problem, slow), (problem, fine)]))
    assert [v.sample_idx for v in verdicts] == [1, 0]  # the re-check comes after the batch
    rechecked = verdicts[1]
    assert rechecked.accepted
    attempts = rechecked.diagnostics.timeout_recheck
    assert (attempts.first.stage, attempts.second.stage) == (Stage.TIMEOUT, Stage.ACCEPTED)
    assert attempts.first.verify_s >= 1.0
    assert attempts.second.verify_s == rechecked.verify_s < 1.0
    assert verifier.timeouts_rechecked == 1


@pytest.mark.slow
def test_a_timeout_again_on_its_recheck_stays_a_timeout_with_both_attempts(tmp_path):
    rules = [{"match": {"substring": "aesop"}, "action": "hang"}]
    problem = make_problem()
    with double_backend(tmp_path, rules, workers=1) as backend:
        verifier = StrictVerifier(backend, VerifierPolicy(budget_s=1.0, feedback=False))
        (verdict,) = verifier.verify_many(
            [(problem, make_generation(completion_text=completion("  aesop")))]
        )
        restarts = backend.restarts()
    assert (verdict.stage, verdict.reasons) == (Stage.TIMEOUT, ["timeout"])
    assert verdict.diagnostics.timeout_recheck.second.stage is Stage.TIMEOUT
    assert restarts == 2


def test_persistent_fault_is_infrastructure_never_a_rejection(tmp_path):
    rules = [{"match": {"substring": "decide"}, "action": "crash"}]
    verdict = verify(tmp_path, "  decide", rules, retries=2, workers=1)
    assert verdict.stage is Stage.INFRASTRUCTURE
    assert verdict.reasons == ["infrastructure:proof:crash"]
    assert verdict.diagnostics.attempts == 3


def test_an_empty_answer_to_the_proof_is_not_leans_and_is_forged_output(tmp_path):
    # The pinned REPL answers `IO.println` of a JSON object: a blank line in its place was
    # printed by the proof's code. A rejection, not retried.
    rules = [{"match": {"substring": "decide"}, "action": "empty"}]
    verdict = verify(tmp_path, "  decide", rules, retries=2, workers=1)
    assert (verdict.stage, verdict.reasons) == (Stage.FORGED_OUTPUT, ["forged_output"])
    assert verdict.diagnostics.attempts == 1


def test_transient_death_is_retried_on_a_fresh_repl(tmp_path):
    problem = make_problem()
    generations = [
        make_generation(sample_idx=i, completion_text=completion(f"  omega -- {i}"))
        for i in range(5)
    ]
    # A REPL that dies at its 6th command: header + one whole job (proof, axioms, statement
    # check, canary), then the next.
    with double_backend(tmp_path, None, "--die-after", "5", workers=1, retries=2) as backend:
        verdicts = StrictVerifier(
            backend, VerifierPolicy(budget_s=5.0, feedback=False)
        ).verify_many([(problem, g) for g in generations])
    assert all(v.accepted for v in verdicts)
    assert max(v.diagnostics.attempts for v in verdicts) == 2


def test_oom_under_the_memory_cap_is_infrastructure(tmp_path):
    # (`positivity`: the gate now refuses `polyrith`, which runs a process at elaboration.)
    rules = [{"match": {"substring": "positivity"}, "action": "oom"}]
    verdict = verify(tmp_path, "  positivity", rules, retries=0, workers=1, memory_cap_mb=400)
    assert verdict.stage is Stage.INFRASTRUCTURE


def test_worker_is_recycled_after_n_commands(tmp_path):
    problem = make_problem()
    generations = [
        make_generation(sample_idx=i, completion_text=completion(f"  omega -- {i}"))
        for i in range(3)
    ]
    with double_backend(tmp_path, workers=1, recycle_after=5, warm_spare=False) as backend:
        StrictVerifier(backend, VerifierPolicy(budget_s=5.0, feedback=False)).verify_many(
            [(problem, g) for g in generations]
        )
        recycles = backend.pool.recycles()
    # Each job takes exactly 5 commands (header, proof, #print axioms, statement check, the
    # canary): recycled at the 5th, one REPL per job (recycled only past it, the second job
    # would share the first's REPL).
    headers = [e for e in repl_log(tmp_path) if "env" not in e["request"]]
    assert (len(headers), recycles) == (3, 3)


def recycles_over_a_1_mb_ceiling(tmp_path, proofs: int = 3) -> int:
    """Verify `proofs` proofs on one worker whose REPL is always above a 1 MB ceiling."""
    problem = make_problem()
    generations = [
        make_generation(sample_idx=i, completion_text=completion(f"  omega -- {i}"))
        for i in range(proofs)
    ]
    with double_backend(tmp_path, workers=1, memory_ceiling_mb=1.0) as backend:
        StrictVerifier(backend, VerifierPolicy(budget_s=5.0, feedback=False)).verify_many(
            [(problem, g) for g in generations]
        )
        return backend.pool.recycles()


def test_worker_is_recycled_above_the_memory_ceiling(tmp_path, monkeypatch):
    monkeypatch.setattr(worker_module, "MEMORY_CHECK_INTERVAL_S", 0.0)
    assert recycles_over_a_1_mb_ceiling(tmp_path) == 3


@pytest.mark.parametrize(("mapped", "recycles"), [(True, 0), (False, 2)])
def test_the_memory_ceiling_counts_a_repls_own_memory_not_the_oleans_it_shares(
    tmp_path, monkeypatch, mapped, recycles
):
    # A 96 MiB import under a 60 MiB ceiling: mapped from the shared .olean file it is not the
    # worker's own memory (about 20 MiB of the double is); read into its heap it is.
    monkeypatch.setattr(worker_module, "MEMORY_CHECK_INTERVAL_S", 0.0)
    olean = ["--olean-file", str(tmp_path / "mathlib.olean")] if mapped else []
    generations = [
        make_generation(sample_idx=i, completion_text=completion(f"  omega -- {i}"))
        for i in range(2)
    ]
    with double_backend(
        tmp_path, None, "--import-memory-mb", "96", *olean, workers=1, memory_ceiling_mb=60.0
    ) as backend:
        StrictVerifier(backend, VerifierPolicy(budget_s=5.0, feedback=False)).verify_many(
            [(make_problem(), g) for g in generations]
        )
        assert backend.pool.recycles() == recycles


def test_memory_is_measured_at_most_once_per_interval(tmp_path, monkeypatch):
    # An interval longer than the test and shorter than the clock's reading since boot.
    monkeypatch.setattr(worker_module, "MEMORY_CHECK_INTERVAL_S", 60.0)
    assert recycles_over_a_1_mb_ceiling(tmp_path) == 0  # above the ceiling, not measured yet


def outcome(*, errors=(), sorries=(), warnings=(), passed=None, complete=None):
    from prover_assets.lean.repl import ReplOutcome

    passed = not errors if passed is None else passed
    # Goedel's completeness, by hand: no sorry, no warning that mentions `sorry` or `failed`.
    flagged = [w for w in warnings if "sorry" in w["data"] or "failed" in w["data"]]
    complete = passed and not sorries and not flagged if complete is None else complete
    return ReplOutcome(passed, complete, tuple(errors), tuple(sorries), tuple(warnings), (), 1)


WARNING = {"severity": "warning", "data": "unused variable `h`"}
ERROR = {"severity": "error", "pos": {"line": 1, "column": 0}, "data": "unknown tactic"}


@pytest.mark.parametrize(
    ("fields", "stage", "reasons", "diagnostics"),
    [
        ({"failure": "timeout"}, Stage.TIMEOUT, ["timeout"], {}),
        ({}, Stage.INFRASTRUCTURE, ["infrastructure:no_answer"], {}),
        (
            {"failure": "infrastructure:header:crash"},
            Stage.INFRASTRUCTURE,
            ["infrastructure:header:crash"],
            {},
        ),
        (
            {"outcome": outcome(errors=[ERROR], warnings=[WARNING])},
            Stage.COMPILE_ERROR,
            ["compile_error"],
            {"warnings": 1},
        ),
        (
            {"outcome": outcome(sorries=[{"pos": {"line": 2, "column": 2}}])},
            Stage.INCOMPLETE,
            ["incomplete:sorry"],
            {"warnings": 0},
        ),
        (
            {
                "outcome": outcome(
                    warnings=[{"severity": "warning", "data": "declaration uses 'sorry'"}]
                )
            },
            Stage.INCOMPLETE,
            ["incomplete:sorry_warning"],
            {"warnings": 1},
        ),
        (
            {"outcome": outcome(warnings=[{"severity": "warning", "data": "linarith failed"}])},
            Stage.INCOMPLETE,
            ["incomplete:warning_failed"],
            {"warnings": 1},
        ),
        (
            {"outcome": outcome(warnings=[WARNING], complete=False)},
            Stage.INCOMPLETE,
            ["incomplete"],
            {"warnings": 1},
        ),
        (
            {"outcome": outcome()},
            Stage.INFRASTRUCTURE,
            ["infrastructure:axioms:missing"],
            {"warnings": 0},
        ),
        (
            {"outcome": outcome(), "axioms": ("propext", "sorryAx")},
            Stage.AXIOM,
            ["axiom:sorryAx"],
            {"warnings": 0, "axioms": ["propext", "sorryAx"]},
        ),
        (
            {"outcome": outcome(warnings=[WARNING]), "axioms": ("propext",)},
            Stage.INFRASTRUCTURE,
            ["infrastructure:statement:missing"],
            {"warnings": 1, "axioms": ["propext"]},
        ),
        (
            {
                "outcome": outcome(),
                "axioms": ("propext",),
                "statement_errors": ({"data": "type mismatch"},),
            },
            Stage.STATEMENT_CHANGED,
            ["statement_changed"],
            {
                "warnings": 0,
                "axioms": ["propext"],
                "statement_errors": ["type mismatch"],
                "statement_check": "STATEMENT_CHECK",
            },
        ),
        (
            {
                "outcome": outcome(warnings=[WARNING]),
                "axioms": ("propext",),
                "statement_errors": (),
            },
            Stage.ACCEPTED,
            [],
            {"warnings": 1, "axioms": ["propext"]},
        ),
    ],
    ids=[
        "timeout",
        "no_answer",
        "failure",
        "compile_error",
        "sorry",
        "sorry_warning",
        "failed_warning",
        "incomplete",
        "axioms_missing",
        "foreign_axiom",
        "statement_check_missing",
        "statement_changed",
        "accepted",
    ],
)
def test_each_answer_of_the_backend_is_judged_by_the_truth_table(
    tmp_path, fields, stage, reasons, diagnostics
):
    from prover_assets.verify.worker import LeanResult

    problem = make_problem()
    generation = make_generation(completion_text=completion("  omega"))
    policy = VerifierPolicy(budget_s=5.0, feedback=True)
    with double_backend(tmp_path) as backend:
        verifier = StrictVerifier(backend, policy)
        job = verifier.prepare(problem, generation)
        result = LeanResult(
            **{"outcome": None, "axioms": None, "failure": None, **fields},
            key=job.key,
            elapsed_s=2.5,
            attempts=2,
            worker=3,
        )
        verdict = verifier.judge(generation, job, result)
    assert (verdict.stage, verdict.reasons, verdict.verify_s) == (stage, reasons, 2.5)
    code = generation.lean_code
    expected = {"displayed_statement_faithful": True, "code_chars": len(code), "attempts": 2}
    expected |= {"worker": 3, **diagnostics}
    if "statement_check" in expected:
        expected["statement_check"] = job.statement_check
    assert verdict.diagnostics.model_dump(exclude_none=True) == expected
    answered = stage in (
        Stage.COMPILE_ERROR,
        Stage.INCOMPLETE,
        Stage.AXIOM,
        Stage.STATEMENT_CHANGED,
        Stage.ACCEPTED,
    )
    assert (verdict.repl_code is not None) == answered
    if answered:
        assert verdict.repl_code == job.body
        assert verdict.repl_errors == ([ERROR] if stage is Stage.COMPILE_ERROR else [])


def prepared(tmp_path, generation, **policy):
    with double_backend(tmp_path) as backend:
        verifier = StrictVerifier(backend, VerifierPolicy(budget_s=5.0, feedback=False, **policy))
        return verifier.prepare(make_problem(), generation)


def test_a_job_carries_the_checks_the_policy_asks_for_and_its_length_as_priority(tmp_path):
    generation = make_generation(completion_text=completion("  omega"))
    job = prepared(tmp_path, generation)
    assert (job.theorem_name, job.priority, job.budget_s) == (
        "t",
        float(len(generation.lean_code)),
        5.0,
    )
    assert job.statement_check == (
        "example (x : ℕ) (h₀ : 0 < x) : 0 < x + 1 := by\n  apply _root_.t <;> assumption"
    )
    bare = prepared(tmp_path, generation, axiom_check=False, recheck_statement=False)
    assert (bare.theorem_name, bare.statement_check) == (None, None)


def test_a_prompt_without_room_is_no_code_and_costs_no_lean(tmp_path):
    generation = make_generation(
        completion_text="", completion_ids=[], finish_reason="no_room", max_tokens=0
    )
    verdict = prepared(tmp_path, generation)
    assert (verdict.stage, verdict.reasons, verdict.verify_s) == (
        Stage.NO_CODE,
        ["no_code:no_room"],
        0.0,
    )


def test_a_gate_verdict_records_the_display_and_the_code_size(tmp_path):
    generation = make_generation(completion_text=completion("  sorry"))
    verdict = prepared(tmp_path, generation)
    assert (verdict.stage, verdict.reasons, verdict.verify_s) == (Stage.GATE, ["banned:sorry"], 0.0)
    assert verdict.diagnostics.model_dump(exclude_none=True) == {
        "displayed_statement_faithful": True,
        "code_chars": len(generation.lean_code),
    }


def test_without_the_gate_a_search_tactic_is_a_reinsertion_verdict(tmp_path):
    generation = make_generation(completion_text=completion("  exact?"))
    verdict = prepared(tmp_path, generation, gate=False)
    assert (verdict.stage, verdict.reasons) == (Stage.REINSERTION, ["reinsertion:apply?_or_exact?"])
    assert verdict.diagnostics.code_chars == len(generation.lean_code)


def test_in_record_mode_a_renamed_theorem_goes_to_lean(tmp_path):
    renamed = SIGNATURE.replace("theorem t ", "theorem t_other ")
    generation = make_generation(completion_text=completion("  omega", signature=renamed))
    assert prepared(tmp_path, generation, statement_check="record").key == generation.key
    cheat = make_generation(completion_text=completion("  sorry", signature=renamed))
    verdict = prepared(tmp_path, cheat, statement_check="record")
    assert (verdict.stage, verdict.reasons) == (Stage.GATE, ["banned:sorry"])


def test_a_generation_given_with_another_problem_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"^generation of p2 given with p1$"):
        prepared(tmp_path, make_generation("p2", completion_text=completion("  omega")))


def test_an_infrastructure_verdict_keeps_what_the_backend_said(tmp_path):
    # The double dies at its 3rd command (`#print axioms`), saying why on its stderr.
    generation = make_generation(completion_text=f"```lean4\n{SIGNATURE}\n  omega\n```")
    with double_backend(tmp_path, None, "--die-after", "2", workers=1, retries=0) as backend:
        verdict = StrictVerifier(backend, VerifierPolicy(budget_s=5.0, feedback=False)).verify(
            make_problem(), generation
        )
    assert verdict.stage is Stage.INFRASTRUCTURE
    detail = verdict.diagnostics.failure_detail
    assert "exit code 137" in detail
    assert "died after its scripted number of commands" in detail


# A preamble problem (MOBench-shaped): Lean proves the trusted text, never the candidate's copy.


def preamble_verdict(tmp_path, code: str, rules=None, statement=PREAMBLE_STATEMENT, **policy):
    problem = make_problem(statement=statement)
    generation = make_generation(completion_text="", lean_code=code)
    with double_backend(tmp_path, rules) as backend:
        verifier = StrictVerifier(backend, VerifierPolicy(budget_s=5.0, feedback=True, **policy))
        return verifier.verify(problem, generation)


def test_an_honest_preamble_proof_is_accepted_after_the_statement_check_in_its_namespace(
    tmp_path,
):
    verdict = preamble_verdict(tmp_path, preamble_code())
    assert (verdict.stage, verdict.reasons) == (Stage.ACCEPTED, [])
    assert verdict.diagnostics.displayed_statement_faithful is True
    commands = [
        e["request"]["cmd"] for e in repl_log(tmp_path) if e["request"].get("env") is not None
    ]
    assert "#print axioms _root_.Geo.p" in commands
    (check,) = [c for c in commands if c.startswith("example")]
    assert check.endswith("apply _root_.Geo.p <;> assumption")


def test_in_record_mode_a_tampered_preamble_is_recorded_and_lean_compiles_the_trusted_one(
    tmp_path,
):
    answer = "noncomputable abbrev solution : ℝ := 9 * Real.sqrt 2 / 32\n\n"
    theorem = "theorem p : 0 < solution := by"
    statement = GOEDEL_HEADER + answer + theorem + " sorry"
    tampered = GOEDEL_HEADER + answer.replace("/ 32", "/ 31") + theorem + "\n  positivity"
    strict = preamble_verdict(tmp_path / "strict", tampered, statement=statement)
    assert strict.stage is Stage.GATE
    assert strict.reasons == ["preamble_mismatch:expected `32`, found `31` at line 8"]
    recorded = preamble_verdict(
        tmp_path / "record", tampered, statement=statement, statement_check="record"
    )
    assert recorded.stage is Stage.ACCEPTED
    assert recorded.diagnostics.displayed_statement_faithful is False
    (proof,) = proof_commands(tmp_path / "record")
    assert "9 * Real.sqrt 2 / 32" in proof["request"]["cmd"]
    assert "/ 31" not in proof["request"]["cmd"]


def test_a_preamble_statement_check_that_fails_is_statement_changed(tmp_path):
    check = {"regex": "(?s)^example .* <;> assumption$"}
    rules = [{"match": check, "reply": error_reply("type mismatch", 2, 0, None)}]
    verdict = preamble_verdict(tmp_path, preamble_code(), rules)
    assert (verdict.stage, verdict.reasons) == (Stage.STATEMENT_CHANGED, ["statement_changed"])
    assert verdict.diagnostics.statement_errors == ["type mismatch"]


def test_a_problem_whose_trusted_statement_does_not_parse_is_refused_naming_it(tmp_path):
    statement = GOEDEL_HEADER + "axiom a : False\ntheorem t : True := by sorry"
    problem = make_problem(statement=statement)
    generation = make_generation(
        completion_text="", lean_code=statement.replace("sorry", "trivial")
    )
    with double_backend(tmp_path) as backend:
        verifier = StrictVerifier(backend, VerifierPolicy(budget_s=5.0, feedback=False, gate=False))
        with pytest.raises(ValueError) as refused:
            verifier.prepare(problem, generation)
    assert str(refused.value) == (
        "p1: the trusted statement does not parse (preamble:axiom); every problem is parsed "
        "when it is loaded, so its file was changed since"
    )


def growing_pairs(problem, first, later, gate):
    """Yield `first`, wait until `gate` is set, then yield `later`: a stream still being
    generated."""
    yield problem, first
    assert gate.wait(10), "the verifier waited for the end of the stream"
    for generation in later:
        yield problem, generation


def test_a_growing_stream_is_verified_as_it_comes_not_at_its_end(tmp_path):
    import threading

    problem = make_problem()
    first = make_generation(sample_idx=0, completion_text=completion("  omega"))
    later = [make_generation(sample_idx=1, completion_text=completion("  simp"))]
    gate = threading.Event()
    seen = []
    with double_backend(tmp_path, workers=1) as backend:
        verifier = StrictVerifier(backend, VerifierPolicy(budget_s=5.0, feedback=False))
        for verdict in verifier.verify_stream(growing_pairs(problem, first, later, gate)):
            seen.append(verdict.sample_idx)
            gate.set()  # the second sample is "generated" only once the first is judged
    assert seen == [0, 1]


def test_a_duplicate_arriving_after_its_run_settled_is_a_copy_without_another_lean_run(tmp_path):
    import threading

    problem = make_problem()
    first = make_generation(sample_idx=0, completion_text=completion("  omega"))
    same = [make_generation(sample_idx=i, completion_text=completion("  omega")) for i in (1, 2)]
    gate = threading.Event()
    verdicts = []
    with double_backend(tmp_path, workers=1) as backend:
        verifier = StrictVerifier(backend, VerifierPolicy(budget_s=5.0, feedback=False))
        for verdict in verifier.verify_stream(growing_pairs(problem, first, same, gate)):
            verdicts.append(verdict)
            gate.set()
    assert len(proof_commands(tmp_path)) == 1
    assert [v.sample_idx for v in verdicts] == [0, 1, 2]
    assert all(v.cached_from is not None and v.accepted for v in verdicts[1:])
    assert verdicts[1].verifier == verifier.info
    assert verifier.batch_duplicates == 2


def test_once_stopped_the_waiting_runs_get_no_verdict_and_no_timeout_is_rechecked(tmp_path):
    import threading
    import time

    # One worker: it takes the hanging proof (alone in the queue), two more come behind it;
    # then the generation ends.
    rules = [{"match": {"substring": "aesop"}, "action": "hang"}]
    problem = make_problem()
    hanging = make_generation(sample_idx=0, completion_text=completion("  aesop"))
    waiting = [
        make_generation(sample_idx=i, completion_text=completion(f"  omega -- {i}")) for i in (1, 2)
    ]
    stop = threading.Event()

    def pairs():
        yield problem, hanging
        time.sleep(0.3)
        yield from ((problem, g) for g in waiting)
        stop.set()

    with double_backend(tmp_path, rules, workers=1) as backend:
        verifier = StrictVerifier(backend, VerifierPolicy(budget_s=1.0, feedback=False))
        verdicts = list(verifier.verify_stream(pairs(), stop=stop))
    assert verdicts == []  # the timeout waits for a re-check that a stopped stream never runs
    assert verifier.timeouts_rechecked == 0
    assert not any("omega" in e["request"]["cmd"] for e in proof_commands(tmp_path))


def test_a_statement_measured_long_before_goes_ahead_of_longer_code_never_measured(tmp_path):
    hard = make_problem("hard")
    new = make_problem("new", statement=STATEMENT.replace("0 < x + 1", "0 < x + 2"))
    short = make_generation("hard", completion_text=completion("  omega"))
    long_code = make_generation(
        "new",
        completion_text=completion("  omega" + " -- padding" * 40, SIGNATURE.replace("+ 1", "+ 2")),
    )

    def run(statement: str, lean_s: float, code_chars: int) -> LeanCost:
        return LeanCost(
            seq=0,
            statement_sha256=sha256_text(statement),
            code_chars=code_chars,
            lean_s=lean_s,
            timed_out=False,
        )

    # The hard statement took 90 s with code of the short sample's length; two others 1 s per
    # 1,000 characters, the history's median rate.
    history = CostHistory(
        [
            run(hard.formal_statement, 90.0, len(short.lean_code)),
            run("theorem a : True", 1.0, 1000),
            run("theorem b : True", 1.0, 1000),
        ]
    )
    with double_backend(tmp_path) as backend:
        policy = VerifierPolicy(budget_s=5.0, feedback=False)
        verifier = StrictVerifier(backend, policy, None, history)
        hard_job = verifier.prepare(hard, short)
        new_job = verifier.prepare(new, long_code)
    assert hard_job.priority == pytest.approx(90.0)
    assert new_job.priority == pytest.approx(0.001 * len(long_code.lean_code))
    assert hard_job.priority > new_job.priority
    assert len(short.lean_code) < len(long_code.lean_code)


def test_every_lean_run_is_recorded_in_the_history_and_no_copy_or_gate_verdict_is(tmp_path):
    rules = [{"match": {"substring": "aesop"}, "action": "hang", "times": 1}]
    problem = make_problem()
    samples = [
        make_generation(sample_idx=0, completion_text=completion("  aesop")),  # timeout, re-check
        make_generation(sample_idx=1, completion_text=completion("  omega")),
        make_generation(sample_idx=2, completion_text=completion("  omega")),  # a duplicate
        make_generation(sample_idx=3, completion_text=completion("  sorry")),  # the gate's
    ]
    history = CostHistory.open(tmp_path / "costs")
    with double_backend(tmp_path, rules, workers=2) as backend:
        verifier = StrictVerifier(
            backend, VerifierPolicy(budget_s=1.0, feedback=False), None, history
        )
        verdicts = verifier.verify_many([(problem, g) for g in samples])
    history.close()
    assert len(verdicts) == 4
    costs = read_costs(tmp_path / "costs")
    assert sorted(c.timed_out for c in costs) == [False, False, True]
    assert {c.statement_sha256 for c in costs} == {sha256_text(problem.formal_statement)}
    (timed_out,) = [c for c in costs if c.timed_out]
    assert timed_out.lean_s >= 1.0
    assert CostHistory.open(tmp_path / "costs").knows(problem.formal_statement)


def test_an_error_reading_the_stream_surfaces_from_the_verifier_not_a_thread(tmp_path):
    other = make_generation("p2", completion_text=completion("  omega"))
    with double_backend(tmp_path) as backend:
        verifier = StrictVerifier(backend, VerifierPolicy(budget_s=5.0, feedback=False))
        with pytest.raises(ValueError, match=r"^generation of p2 given with p1$"):
            verifier.verify_many([(make_problem(), other)])


def test_an_error_of_the_lean_backend_surfaces_from_the_verifier(tmp_path):
    def failing_run(jobs):
        raise RuntimeError("the Lean pool died")
        yield

    with double_backend(tmp_path) as backend:
        backend.run = failing_run
        verifier = StrictVerifier(backend, VerifierPolicy(budget_s=5.0, feedback=False))
        generation = make_generation(completion_text=completion("  omega"))
        with pytest.raises(RuntimeError, match="the Lean pool died"):
            verifier.verify_many([(make_problem(), generation)])


@pytest.mark.slow
def test_each_duplicate_and_each_rechecked_timeout_is_counted(tmp_path):
    rules = [{"match": {"substring": "aesop"}, "action": "hang"}]
    problem = make_problem()
    samples = [
        make_generation(sample_idx=i, completion_text=completion(code))
        for i, code in enumerate(["  omega", "  omega", "  omega", "  aesop", "  aesop -- 2"])
    ]
    with double_backend(tmp_path, rules, workers=2) as backend:
        verifier = StrictVerifier(backend, VerifierPolicy(budget_s=0.5, feedback=False))
        verdicts = verifier.verify_many([(problem, g) for g in samples])
    assert len(verdicts) == 5
    assert (verifier.batch_duplicates, verifier.timeouts_rechecked) == (2, 2)


@pytest.mark.slow
def test_a_recheck_waits_until_at_most_the_recheck_share_of_workers_is_busy(tmp_path):
    # Two workers, share 0.5. Worker A: the proof that hangs (0-2 s, a timeout). Worker B: a
    # 1.5 s proof, then another (1.5-3 s). The re-check may start only once B is idle (3 s), not
    # at 2 s while B's second proof runs. Longer code goes first: the padding orders them.
    rules = [
        {"match": {"substring": "aesop"}, "action": "hang", "times": 1},
        {"match": {"substring": "positivity"}, "action": "delay", "argument": "1.5"},
    ]
    problem = make_problem()
    codes = ["  aesop -- " + "x" * 40, "  positivity -- " + "x" * 30, "  positivity"]
    samples = [
        make_generation(sample_idx=i, completion_text=completion(code))
        for i, code in enumerate(codes)
    ]
    with double_backend(tmp_path, rules, workers=2, warm_spare=False) as backend:
        verifier = StrictVerifier(
            backend, VerifierPolicy(budget_s=2.0, feedback=False, recheck_share=0.5)
        )
        verdicts = verifier.verify_many([(problem, g) for g in samples])
    assert [v.stage.value for v in verdicts] == ["accepted"] * 3
    answered = [e["request"]["cmd"] for e in repl_log(tmp_path)]  # in the order answered
    (recheck,) = [i for i, cmd in enumerate(answered) if "aesop" in cmd]  # the hang: no answer
    *_, second_slow = [i for i, cmd in enumerate(answered) if "positivity" in cmd]
    assert second_slow < recheck


def test_only_lean_runs_of_a_measured_statement_count_as_ordered_by_history(tmp_path):
    known = make_problem("known")
    new = make_problem("new", statement=STATEMENT.replace("0 < x + 1", "0 < x + 2"))
    history = CostHistory(
        [
            LeanCost(
                seq=0,
                statement_sha256=sha256_text(known.formal_statement),
                code_chars=50,
                lean_s=2.0,
                timed_out=False,
            )
        ]
    )
    pairs = [
        (known, make_generation("known", 0, completion_text=completion("  omega"))),
        (known, make_generation("known", 1, completion_text=completion("  omega"))),  # a copy
        (known, make_generation("known", 2, completion_text=completion("  sorry"))),  # the gate
        (
            new,
            make_generation(
                "new", 0, completion_text=completion("  omega", SIGNATURE.replace("+ 1", "+ 2"))
            ),
        ),
    ]
    with double_backend(tmp_path) as backend:
        verifier = StrictVerifier(
            backend, VerifierPolicy(budget_s=5.0, feedback=False), None, history
        )
        assert len(verifier.verify_many(pairs)) == 4
    assert verifier.ordered_by_history == 1
