"""A REPL fault at every stage of one proof (header, proof, `#print axioms`, statement check):
only the proof's own command over budget is a verdict; everything else is infrastructure,
except text Lean did not write read as its answer, which is `forged_output`."""

import json
import tempfile
import threading
from pathlib import Path

import pytest

from prover_assets.config import SimulatedLeanSettings
from prover_assets.lean.canary import canary_name
from prover_assets.lean.repl import ReplProcess
from prover_assets.records import Stage
from prover_assets.verify.backends import backend_from_settings
from prover_assets.verify.verifier import StrictVerifier, VerifierPolicy
from prover_assets.verify.worker import WarmSpare
from prover_assets_tests.factories import make_generation, make_problem
from prover_assets_tests.lean_double import DOUBLE, double_backend, error_reply, repl_log

SIGNATURE = "theorem t (x : ℕ) (h₀ : 0 < x) : 0 < x + 1 := by"
HEADER = {"regex": "^import Mathlib"}
AXIOMS = {"substring": "#print axioms"}
STATEMENT = {"regex": "(?s)^example .* <;> assumption$"}


def verify(tmp_path, rules, *, retries=1, budget_s=5.0, check_timeout_s=0.5, proof="  omega"):
    generation = make_generation(completion_text=f"```lean4\n{SIGNATURE}\n{proof}\n```")
    policy = VerifierPolicy(budget_s=budget_s, feedback=False)
    with double_backend(
        tmp_path,
        rules,
        workers=1,
        retries=retries,
        check_timeout_s=check_timeout_s,
        header_timeout_s=1.0,
    ) as backend:
        return StrictVerifier(backend, policy).verify(make_problem(), generation)


@pytest.mark.parametrize(
    ("rule", "reason"),
    [
        pytest.param(
            {"match": HEADER, "action": "hang"},
            "infrastructure:header:timeout",
            marks=pytest.mark.slow,
        ),
        ({"match": HEADER, "action": "crash"}, "infrastructure:header:crash"),
        (
            {"match": HEADER, "reply": error_reply("unknown package 'Mathlib'")},
            "infrastructure:header:did_not_elaborate",
        ),
        ({"match": {"substring": "omega"}, "action": "crash"}, "infrastructure:proof:crash"),
        (
            {"match": {"substring": "omega"}, "raw": True, "reply": {}},
            "infrastructure:proof:no_env",
        ),
        (
            {
                "match": {"substring": "omega"},
                "raw": True,
                "reply": {"message": "Unknown environment."},
            },
            "infrastructure:proof:unknown_environment",
        ),
        pytest.param(
            {"stage": "axioms", "match": AXIOMS, "action": "hang"},
            "infrastructure:axioms:timeout",
            marks=pytest.mark.slow,
        ),
        ({"stage": "axioms", "match": AXIOMS, "action": "crash"}, "infrastructure:axioms:crash"),
        (
            {
                "stage": "axioms",
                "match": AXIOMS,
                "raw": True,
                "reply": {"message": "Unknown environment."},
            },
            "infrastructure:axioms:unknown_environment",
        ),
        (
            {"stage": "axioms", "match": AXIOMS, "reply": {}},
            "infrastructure:axioms:axioms_unreadable",
        ),
        pytest.param(
            {"match": STATEMENT, "action": "hang"},
            "infrastructure:statement:timeout",
            marks=pytest.mark.slow,
        ),
        ({"match": STATEMENT, "raw": True, "reply": {}}, "infrastructure:statement:no_env"),
    ],
)
def test_a_fault_outside_the_proof_is_infrastructure_after_retries(tmp_path, rule, reason):
    # A hang after the proof's answer is waited for as long as the proof's budget has left, then
    # the check timeout (the test below): a short budget keeps that wait short. The double's
    # proof answers within milliseconds, so a second is never what ends it, even under load.
    verdict = verify(tmp_path, [rule], retries=1, budget_s=1.0)
    assert (verdict.stage, verdict.reasons) == (Stage.INFRASTRUCTURE, [reason])
    assert not verdict.accepted
    assert verdict.diagnostics.attempts == 2


def test_only_the_proofs_own_command_over_budget_is_a_timeout(tmp_path):
    verdict = verify(tmp_path, [{"match": {"substring": "omega"}, "action": "hang"}], budget_s=0.5)
    assert (verdict.stage, verdict.reasons) == (Stage.TIMEOUT, ["timeout"])
    assert verdict.diagnostics.attempts == 1  # a verdict: not retried


@pytest.mark.slow
def test_axioms_that_hang_past_the_budgets_rest_and_the_check_timeout_are_not_a_timeout(tmp_path):
    # An answer after the proof's is waited for as long as the proof could still run (text it
    # printed may have stood in for its answer), then the check timeout: here about 1.5 s.
    rule = {"stage": "axioms", "match": AXIOMS, "action": "delay", "argument": "2.5"}
    slow = verify(tmp_path / "slow", [rule], retries=0, budget_s=1.0, check_timeout_s=0.5)
    patient = verify(tmp_path / "patient", [rule], retries=0, budget_s=1.0, check_timeout_s=5.0)
    assert slow.reasons == ["infrastructure:axioms:timeout"]
    assert patient.accepted


def test_statement_that_does_not_elaborate_to_the_trusted_one_is_statement_changed(tmp_path):
    rule = {"match": STATEMENT, "reply": error_reply("type mismatch\n  @t\nhas type", line=1)}
    verdict = verify(tmp_path, [rule])
    assert (verdict.stage, verdict.reasons) == (Stage.STATEMENT_CHANGED, ["statement_changed"])
    assert verdict.diagnostics.statement_errors == ["type mismatch\n  @t\nhas type"]


def test_statement_check_is_sent_in_the_proofs_env_at_the_root(tmp_path):
    verdict = verify(tmp_path, [])
    entries = repl_log(tmp_path)
    proof = next(e for e in entries if e["request"]["cmd"].startswith("\n"))
    check = next(e for e in entries if e["request"]["cmd"].startswith("example"))
    assert verdict.accepted
    assert check["request"] == {
        "cmd": "example (x : ℕ) (h₀ : 0 < x) : 0 < x + 1 := by\n  apply _root_.t <;> assumption",
        "env": proof["answer"]["env"],
    }


def test_each_attempt_after_an_axioms_fault_runs_on_a_fresh_repl(tmp_path):
    # The double dies at its 3rd command (`#print axioms`), on every REPL it is started as.
    generation = make_generation(completion_text=f"```lean4\n{SIGNATURE}\n  omega\n```")
    # No warm spare: every header import in the log is then one REPL of an attempt.
    with double_backend(
        tmp_path, None, "--die-after", "2", workers=1, retries=1, warm_spare=False
    ) as backend:
        verdict = StrictVerifier(backend, VerifierPolicy(budget_s=5.0, feedback=False)).verify(
            make_problem(), generation
        )
    assert verdict.reasons == ["infrastructure:axioms:crash"]
    headers = [e for e in repl_log(tmp_path) if "env" not in e["request"]]
    assert len(headers) == 2


def test_check_timeout_is_scaled_from_the_budget_and_recorded(tmp_path):
    settings = SimulatedLeanSettings(
        workers=1,
        budget_s=40.0,
        check_timeout_factor=0.25,
        rule="seeded_share",
        accept_share=0.5,
        seed=1,
    )
    with backend_from_settings(settings) as backend:
        assert backend.config()["check_timeout_s"] == 10.0


def test_a_helper_lemma_is_refused_before_lean_not_dropped_and_sent_to_fail(tmp_path):
    # Goedel's re-insertion keeps only the text after the theorem's `:= by`: Lean would get
    # `exact helper x` without `helper` and fail on an unknown identifier.
    helper = "lemma helper (y : ℕ) : 0 < y + 1 := by omega\n"
    generation = make_generation(
        completion_text=f"```lean4\n{helper}{SIGNATURE}\n  exact helper x\n```"
    )
    with double_backend(tmp_path, workers=1) as backend:
        verdict = StrictVerifier(backend, VerifierPolicy(budget_s=5.0, feedback=False)).verify(
            make_problem(), generation
        )
    assert (verdict.stage, verdict.reasons) == (Stage.GATE, ["dropped_by_reinsertion:lemma"])


@pytest.mark.parametrize(
    ("before", "reason"),
    [
        (
            "noncomputable def Real.sqrt (x : ℝ) : ℝ := 4\nnamespace Evil\n",
            "banned:scope:namespace",
        ),
        ("variable (hF : False)\n", "banned:scope:variable"),
    ],
)
def test_scope_attacks_are_rejected_before_lean(tmp_path, before, reason):
    generation = make_generation(completion_text=f"```lean4\n{before}{SIGNATURE}\n  omega\n```")
    with double_backend(tmp_path, workers=1) as backend:
        verdict = StrictVerifier(backend, VerifierPolicy(budget_s=5.0, feedback=False)).verify(
            make_problem(), generation
        )
    assert verdict.stage is Stage.GATE and reason in verdict.reasons
    assert repl_log(tmp_path) == []


def info(data: str) -> dict:
    return {"severity": "info", "pos": {"line": 1, "column": 0}, "data": data}


@pytest.mark.parametrize(
    ("messages", "axioms"),
    [
        ([info("'t' does not depend on any axioms")], ()),
        (
            [info("'t' depends on axioms: [propext, sorryAx, Quot.sound]")],
            ("propext", "sorryAx", "Quot.sound"),
        ),
    ],
    ids=["none", "three"],
)
def test_the_axioms_are_read_from_the_print_axioms_answer(messages, axioms):
    from prover_assets.lean.repl import read_answer
    from prover_assets.verify.worker import parse_axioms

    assert parse_axioms(read_answer({"messages": messages, "env": 2}), "t") == axioms


@pytest.mark.parametrize(
    "messages",
    [
        [info("'t' does not depend on any axioms"), info("'t' does not depend on any axioms")],
        [{"severity": "info"}, info("'t' depends on axioms: [propext]")],
        [info("'s' does not depend on any axioms")],
        [info("'Geo.t' does not depend on any axioms")],
        [info("note: 't' does not depend on any axioms")],
        [info("'t' does not depend on any axioms, honestly")],
        [info("'t' depends on axioms: [propext, ]")],
        [info("'t' depends on axioms: [propext")],
        [{"severity": "warning", "data": "'t' does not depend on any axioms"}],
        [],
    ],
    ids=[
        "two_answers",
        "a_second_message",
        "another_declaration",
        "a_namespaced_namesake",
        "words_inside_a_longer_text",
        "words_followed_by_more",
        "an_empty_axiom",
        "an_open_list",
        "not_an_info",
        "no_message",
    ],
)
def test_only_one_info_in_leans_exact_shape_for_the_theorem_is_an_axioms_answer(messages):
    from prover_assets.lean.repl import ReplFailure, read_answer
    from prover_assets.verify.worker import parse_axioms

    with pytest.raises(ReplFailure) as failure:
        parse_axioms(read_answer({"messages": messages, "env": 2}), "t")
    assert failure.value.kind == "axioms_unreadable"


def test_the_axioms_are_asked_of_the_root_declaration():
    from prover_assets.verify.worker import print_axioms_command

    assert print_axioms_command("Geo.p") == "#print axioms _root_.Geo.p"


def test_an_unreadable_axioms_answer_names_the_theorem_and_what_lean_said():
    from prover_assets.lean.repl import ReplFailure, read_answer
    from prover_assets.verify.worker import parse_axioms

    answer = {"messages": [{"severity": "error", "data": "unknown constant 't'"}, info("x")]}
    with pytest.raises(ReplFailure) as failure:
        parse_axioms(read_answer(answer), "t")
    assert (failure.value.kind, failure.value.detail) == (
        "axioms_unreadable",
        "#print axioms t: unknown constant 't'; x",
    )


@pytest.mark.parametrize(
    ("answer", "kind", "detail"),
    [
        ({"message": "Unknown environment."}, "unknown_environment", "Unknown environment."),
        ({"messages": []}, "no_env", "an answer without `env`: {'messages': []}"),
    ],
)
def test_an_answer_that_is_no_answer_to_the_command_says_what_it_was(answer, kind, detail):
    from prover_assets.lean.repl import ReplFailure
    from prover_assets.verify.worker import checked_answer

    with pytest.raises(ReplFailure) as failure:
        checked_answer(answer)
    assert (failure.value.kind, failure.value.detail) == (kind, detail)


def test_a_message_beside_messages_is_an_answer_with_its_env():
    from prover_assets.verify.worker import checked_answer

    answer = {"message": "note", "messages": [info("fine")], "env": 4}
    assert checked_answer(answer).env == 4


def test_a_verdict_records_how_long_lean_took_and_which_worker_ran_it(tmp_path):
    accepted = verify(tmp_path / "a", None)
    timed_out = verify(
        tmp_path / "t", [{"match": {"substring": "omega"}, "action": "hang"}], budget_s=0.5
    )
    # Durations, not speed targets: a wall-clock time since the job started, never an epoch.
    assert 0.0 < accepted.verify_s < 60.0
    assert 0.5 <= timed_out.verify_s < 60.0
    assert accepted.diagnostics.worker == timed_out.diagnostics.worker == 0


def test_a_restart_after_a_timeout_takes_the_warm_spare_and_imports_nothing(tmp_path):
    rules = [{"match": {"substring": "aesop"}, "action": "hang"}]
    problem = make_problem()
    hanging = make_generation(sample_idx=0, completion_text=f"```lean4\n{SIGNATURE}\n  aesop\n```")
    fine = make_generation(sample_idx=1, completion_text=f"```lean4\n{SIGNATURE}\n  omega\n```")
    with double_backend(tmp_path, rules, workers=1) as backend:
        policy = VerifierPolicy(budget_s=1.0, feedback=False, recheck_timeouts=False)
        verdicts = StrictVerifier(backend, policy).verify_many(
            [(problem, hanging), (problem, fine)]
        )
        taken, restarts = backend.pool.spare.taken, backend.restarts()
    assert sorted(v.stage.value for v in verdicts) == ["accepted", "timeout"]
    assert (taken, restarts) == (1, 1)


def test_warming_imports_the_header_on_every_worker_before_any_proof(tmp_path):
    with double_backend(tmp_path, workers=3, warm_spare=False) as backend:
        backend.warm(make_problem().header)
        verdicts = StrictVerifier(
            backend, VerifierPolicy(budget_s=5.0, feedback=False)
        ).verify_many(
            [
                (
                    make_problem(),
                    make_generation(
                        sample_idx=i, completion_text=f"```lean4\n{SIGNATURE}\n  omega -- {i}\n```"
                    ),
                )
                for i in range(3)
            ]
        )
    log = repl_log(tmp_path)
    headers = [i for i, e in enumerate(log) if "env" not in e["request"]]
    assert len(headers) == 3  # one per worker, none again for the proofs
    first_proof = min(i for i, e in enumerate(log) if "env" in e["request"])
    assert max(headers) < first_proof
    assert all(v.accepted for v in verdicts)


def test_closing_the_pool_ends_its_warm_spare_too(tmp_path):
    import time
    from pathlib import Path

    def repls() -> list[str]:
        alive = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    cmdline = (entry / "cmdline").read_bytes()
                except OSError:
                    continue
                if str(tmp_path).encode() in cmdline:
                    alive.append(entry.name)
        return alive

    with double_backend(tmp_path, workers=1) as backend:
        backend.warm(make_problem().header)  # the worker's first REPL starts the spare warming
        deadline = time.monotonic() + 10
        while len(repls()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(repls()) == 2  # the worker's REPL and the spare
    deadline = time.monotonic() + 5
    while repls() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert repls() == []


HEADER_A = make_problem().header
HEADER_B = HEADER_A + "\nopen Finset"


def spare_of(tmp_path, *, import_s: float = 0.0):
    """A warm spare on the double, and every REPL it started (in order)."""
    started: list[ReplProcess] = []

    def factory() -> ReplProcess:
        started.append(ReplProcess([*DOUBLE, "--import-delay", str(import_s)], sandbox=False))
        return started[-1]

    return WarmSpare(factory, header_timeout_s=10.0), started


def warmed(spare: WarmSpare) -> None:
    """Wait for the spare that is warming (its thread) to be ready or to have failed."""
    warming = spare._warming
    assert warming is not None
    warming.join(timeout=10)


def test_a_spare_is_handed_out_only_for_the_header_it_imported_and_another_is_closed(tmp_path):
    spare, started = spare_of(tmp_path)
    assert spare.take(HEADER_A) is None  # none warm yet: one starts warming for A
    warmed(spare)
    assert spare.take(HEADER_B) is None  # warm for A, not for B
    assert not started[0].alive
    warmed(spare)
    handed = spare.take(HEADER_B)
    assert handed is not None and handed[0] is started[1] and handed[0].alive
    assert spare.taken == 1
    warmed(spare)  # the next spare, for B
    assert spare.header_imports == len(started) == 3  # one import per process started
    spare.close()
    handed[0].close()


def test_a_spare_that_died_is_not_handed_out_and_each_taken_one_is_counted(tmp_path):
    spare, started = spare_of(tmp_path)
    spare.take(HEADER_A)
    warmed(spare)
    started[0].kill()
    assert spare.take(HEADER_A) is None
    handed = []
    for _ in range(2):
        warmed(spare)
        handed.append(spare.take(HEADER_A))
    assert [h[0] for h in handed] == started[1:3]
    assert spare.taken == 2
    spare.close()
    for process, _env in handed:
        process.close()


def worker_on_the_double(
    tmp_path, *args: str, spare: WarmSpare | None = None, ceiling_mb: float = float("inf")
):
    from prover_assets.verify.worker import ReplWorker

    log = tmp_path / "repl_log.jsonl"
    return ReplWorker(
        0,
        lambda: ReplProcess([*DOUBLE, "--log", str(log), *args], sandbox=False),
        header_timeout_s=30,
        check_timeout_s=10,
        recycle_after=1000,
        memory_ceiling_mb=ceiling_mb,
        spare=spare,
    )


def one_job_recycles(worker) -> int:
    from prover_assets.verify.worker import LeanJob

    try:
        worker.execute(LeanJob(("p", 0), HEADER_A, f"{SIGNATURE}\n  omega", "t", 10.0), 1)
        return worker.recycles
    finally:
        worker.close()


@pytest.mark.parametrize(("anonymous_mb", "recycles"), [(100.0, 0), (100.1, 1)])
def test_a_repl_is_recycled_above_its_memory_ceiling_not_at_it(
    tmp_path, monkeypatch, anonymous_mb, recycles
):
    from prover_assets.verify import worker as worker_module

    monkeypatch.setattr(worker_module, "MEMORY_CHECK_INTERVAL_S", 0.0)
    monkeypatch.setattr(ReplProcess, "anonymous_mb", lambda self: anonymous_mb)
    assert one_job_recycles(worker_on_the_double(tmp_path, ceiling_mb=100.0)) == recycles


@pytest.mark.parametrize(("elapsed_s", "recycles"), [(59.9, 0), (60.0, 1)])
def test_memory_is_measured_again_once_a_whole_interval_has_passed(
    tmp_path, monkeypatch, elapsed_s, recycles
):
    import types

    from prover_assets.verify import worker as worker_module

    clock = [1000.0]  # the worker's clock only: the REPL's deadlines keep the real one
    monkeypatch.setattr(worker_module, "time", types.SimpleNamespace(monotonic=lambda: clock[0]))
    monkeypatch.setattr(worker_module, "MEMORY_CHECK_INTERVAL_S", 60.0)
    monkeypatch.setattr(ReplProcess, "anonymous_mb", lambda self: 1e6)  # always above
    worker = worker_on_the_double(tmp_path, ceiling_mb=100.0)  # last measured at 1000.0
    clock[0] += elapsed_s
    assert one_job_recycles(worker) == recycles


@pytest.mark.parametrize(("elapsed_s", "waited_s"), [(3.0, 7.0 + 10.0), (12.0, 0.0 + 10.0)])
def test_an_answer_after_the_proof_s_is_awaited_while_the_proof_could_run_and_a_check_more(
    tmp_path, monkeypatch, elapsed_s, waited_s
):
    """A proof with a 10 s budget sent at t = 1000 s; the check timeout is 10 s: what is left of
    the budget (none once it has passed), plus the check's own."""
    import types

    from prover_assets.verify import worker as worker_module
    from prover_assets.verify.worker import LeanJob

    clock = [1000.0 + elapsed_s]
    monkeypatch.setattr(worker_module, "time", types.SimpleNamespace(monotonic=lambda: clock[0]))
    worker = worker_on_the_double(tmp_path)
    job = LeanJob(("k",), HEADER_A, "theorem t : True := trivial", None, budget_s=10.0)
    assert worker._after_proof_timeout(job, proof_sent=1000.0) == waited_s


def test_warming_a_worker_takes_the_spare_warm_for_its_header_and_imports_nothing(tmp_path):
    spare, _ = spare_of(tmp_path)
    spare.take(HEADER_A)  # starts one warming for A
    warmed(spare)
    worker = worker_on_the_double(tmp_path, spare=spare)
    try:
        worker.warm(HEADER_A)
        assert spare.taken == 1
        assert worker.held_headers() == (HEADER_A,)
        assert [e for e in repl_log(tmp_path) if "env" not in e["request"]] == []  # no import
    finally:
        worker.close()
        spare.close()


def test_a_workers_memory_report_is_its_repls_and_none_before_it_has_one(tmp_path):
    # the double imports 64 MiB mapped from a file, as Lean maps its .oleans
    olean = ["--import-memory-mb", "64", "--olean-file", str(tmp_path / "mathlib.olean")]
    worker = worker_on_the_double(tmp_path, *olean)
    try:
        assert worker.memory_report() is None
        worker.warm(HEADER_A)
        report = worker.memory_report()
    finally:
        worker.close()
    assert report is not None and report["mapped_mb"] >= 60.0
    assert report["resident_mb"] >= report["mapped_mb"] + report["anonymous_mb"] - 0.2


def threads_started_since(before: set[threading.Thread]) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t not in before]


def test_one_spare_warms_at_a_time(tmp_path):
    before = set(threading.enumerate())
    spare, started = spare_of(tmp_path, import_s=1.0)
    assert spare.take(HEADER_A) is None
    assert spare.take(HEADER_A) is None  # still importing: no second REPL starts
    spare.close()
    for thread in threads_started_since(before):
        thread.join(timeout=10)
    assert len(started) == 1


def test_closing_while_a_spare_warms_waits_for_it_closes_it_and_starts_no_other(tmp_path):
    before = set(threading.enumerate())
    spare, started = spare_of(tmp_path, import_s=0.5)
    spare.take(HEADER_A)
    spare.close()
    assert not any(t.is_alive() for t in threads_started_since(before))  # close waited
    assert len(started) == 1 and not started[0].alive
    assert spare.take(HEADER_A) is None
    for thread in threads_started_since(before):
        thread.join(timeout=10)
    assert len(started) == 1


def test_a_proof_that_does_not_compile_gets_no_axioms_or_statement_check(tmp_path):
    rules = [{"match": {"substring": "nlinarith"}, "reply": error_reply("linarith failed")}]
    generation = make_generation(completion_text=f"```lean4\n{SIGNATURE}\n  nlinarith\n```")
    with double_backend(tmp_path, rules, workers=1) as backend:
        verdict = StrictVerifier(backend, VerifierPolicy(budget_s=5.0, feedback=False)).verify(
            make_problem(), generation
        )
    assert verdict.stage is Stage.COMPILE_ERROR
    commands = [entry["request"]["cmd"] for entry in repl_log(tmp_path)]
    # One log holds the worker's header, the warm spare's (whenever it lands), the proof and
    # the canary: besides those, nothing is sent; no axioms, no statement check.
    sent = [c for c in commands if not c.startswith("import") and canary_name(c) is None]
    assert len(sent) == 1 and "nlinarith" in sent[0]
    assert len(commands) - len(sent) - sum(c.startswith("import") for c in commands) == 1


# --- answers a proof prints ------------------------------------------------------------------
# Hand-built from the REPL's protocol, as code a proof runs could print them: the header's
# answer is env 0 on a fresh REPL, so the proof's is env 1, `#print axioms`'s env 2 and the
# statement check's env 3 (the pinned REPL allocates them in order).
CLEAN_PROOF = {"env": 1}
CLEAN_AXIOMS = {
    "messages": [
        {
            "severity": "info",
            "pos": {"line": 1, "column": 0},
            "endPos": {"line": 1, "column": 27},
            "data": "'t' depends on axioms: [propext]",
        }
    ],
    "env": 2,
}
CLEAN_STATEMENT = {"env": 3}
FAILS_IN_LEAN = {"match": {"substring": "nlinarith"}, "reply": error_reply("linarith failed")}


def printed(*answers: dict) -> str:
    """Answers as the REPL frames them: JSON, then a blank line."""
    return "".join(json.dumps(answer) + "\n\n" for answer in answers)


def forging(text: str, lean_says: dict | None = None) -> dict:
    """The double's rule for the proof with `nlinarith`: its code prints `text` to the REPL's
    stdout while Lean elaborates it, then Lean answers as `lean_says` (by default: rejects).
    (A rule, not a directive: the compile view Lean gets has no comments.)"""
    said = FAILS_IN_LEAN if lean_says is None else lean_says
    return {**said, "action": "print", "argument": json.dumps(text)}


@pytest.mark.parametrize(
    ("text", "caught_at", "said"),
    [
        (printed(CLEAN_PROOF, CLEAN_AXIOMS, CLEAN_STATEMENT), "canary", "canary"),
        (printed({"env": 7}), "proof", "env"),
        # an answer Lean itself could give: the canary then shows it was not Lean's
        (printed({"message": "Unknown environment."}), "proof", "; then the canary: "),
        (json.dumps(CLEAN_PROOF) + "\n", "proof", ""),  # no blank line: runs into Lean's answer
        ("Goals accomplished\n\n", "proof", ""),
    ],
    ids=["every_answer_with_its_env", "another_env", "leans_error_answer", "unframed", "text"],
)
def test_answers_a_proof_prints_are_forged_output_never_accepted(tmp_path, text, caught_at, said):
    """Lean's own answer rejects the proof; the proof prints answers that would accept it. The
    first case was `accepted` before answers were bound to their commands."""
    honest = verify(tmp_path / "honest", [FAILS_IN_LEAN], proof="  nlinarith")
    forged = verify(tmp_path / "forged", [forging(text)], proof="  nlinarith")
    assert (honest.stage, honest.reasons) == (Stage.COMPILE_ERROR, ["compile_error"])
    assert (forged.stage, forged.reasons) == (Stage.FORGED_OUTPUT, ["forged_output"])
    assert not forged.accepted
    assert forged.diagnostics.attempts == 1  # never retried: a retry is the forger's next try
    detail = forged.diagnostics.failure_detail
    assert detail.startswith(f"{caught_at}: ") and said in detail
    assert detail != f"{caught_at}: None"  # what was read is said, not lost


def test_a_proof_that_prints_an_accepting_answer_after_lean_accepted_it_is_still_forged(tmp_path):
    clean = {"match": {"substring": "nlinarith"}, "reply": {}}
    forged = verify(tmp_path, [forging(printed(CLEAN_PROOF), clean)], proof="  nlinarith")
    assert forged.reasons == ["forged_output"]


def verify_in_turn(tmp_path, rules, proofs, **kwargs):
    """Each proof verified after the one before, on one worker, and the pid of the REPL that
    answered each proof's command."""
    policy = VerifierPolicy(budget_s=5.0, feedback=False)
    with double_backend(tmp_path, rules, workers=1, **kwargs) as backend:
        verifier = StrictVerifier(backend, policy)
        verdicts = [
            verifier.verify(
                make_problem(),
                make_generation(sample_idx=i, completion_text=f"```lean4\n{SIGNATURE}\n{p}\n```"),
            )
            for i, p in enumerate(proofs)
        ]
    log = repl_log(tmp_path)
    pids = {
        proof: list(dict.fromkeys(e["pid"] for e in log if proof in e["request"]["cmd"]))
        for proof in proofs
    }
    return verdicts, pids


def test_the_repl_a_forgery_was_read_from_is_recycled(tmp_path):
    forger, honest = "  nlinarith", "  omega"
    verdicts, pids = verify_in_turn(tmp_path, [forging(printed({"env": 7}))], [forger, honest])
    assert [v.stage for v in verdicts] == [Stage.FORGED_OUTPUT, Stage.ACCEPTED]
    assert len(pids[forger]) == len(pids[honest]) == 1
    assert pids[forger] != pids[honest]


@pytest.mark.parametrize(
    ("times", "stage", "attempts"),
    [(1, Stage.ACCEPTED, 2), (None, Stage.FORGED_OUTPUT, 2)],
    ids=["an_earlier_jobs_text", "its_own_text"],
)
def test_text_read_on_a_repl_an_earlier_job_ran_on_is_judged_on_a_fresh_one(
    tmp_path, times, stage, attempts
):
    """Code an earlier proof ran may have left a task printing: the proof read after it is
    judged again on a fresh REPL, and is forged only if it prints there too."""
    rule = {"match": {"substring": "simp"}, "action": "print", "argument": json.dumps("x\n\n")}
    rules = [rule if times is None else {**rule, "times": times}]
    verdicts, pids = verify_in_turn(tmp_path, rules, ["  omega", "  simp"], warm_spare=False)
    assert [v.stage for v in verdicts] == [Stage.ACCEPTED, stage]
    assert verdicts[1].diagnostics.attempts == attempts
    assert pids["  omega"][0] == pids["  simp"][0] != pids["  simp"][1]


# The stages at which text can be printed: while the proof runs, or while a check after it does.
PRINT_STAGES = ("proof", "axioms", "statement")
# What Lean itself says of the proof (the double's script), and the verdict that is.
LEAN_SAYS = {
    "compile_error": Stage.COMPILE_ERROR,
    "sorry_axiom": Stage.AXIOM,
    "statement_changed": Stage.STATEMENT_CHANGED,
    "accepted": Stage.ACCEPTED,
}
BLANK = " \t\r\n"  # what the client skips between answers


def script(lean_says: str, texts: dict[str, str]) -> list[dict]:
    """Rules under which the double answers each command as Lean would (`lean_says`) after
    printing that stage's text."""
    proof_reply = {
        "compile_error": {"reply": error_reply("linarith failed")},
        "sorry_axiom": {"reply": {}, "axioms": ["sorryAx"]},
    }.get(lean_says, {"reply": {}})
    changed = lean_says == "statement_changed"
    statement_reply = error_reply("type mismatch", line=1) if changed else {}

    def printing(stage: str) -> dict:
        return {"action": "print", "argument": json.dumps(texts[stage])}

    return [
        {"match": {"substring": "nlinarith"}, **proof_reply, **printing("proof")},
        {"stage": "axioms", "match": AXIOMS, **printing("axioms")},
        {"match": STATEMENT, "reply": statement_reply, **printing("statement")},
    ]


def _forgeries():
    from hypothesis import strategies as st

    envs = st.integers(min_value=0, max_value=6)
    lean_like = st.one_of(
        envs.map(lambda env: {"env": env}),
        envs.map(lambda env: {**CLEAN_AXIOMS, "env": env}),
        st.just({"message": "Unknown environment."}),
        envs.map(
            lambda env: {
                "messages": [
                    {"severity": "error", "data": "unknown identifier 'canary_" + "0" * 32 + "'"}
                ],
                "env": env,
            }
        ),
    )
    framed = st.lists(lean_like, min_size=1, max_size=4).map(lambda a: printed(*a))
    anything = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)
    text = st.one_of(framed, anything, st.text(BLANK, max_size=4))
    return st.fixed_dictionaries({stage: st.one_of(st.just(""), text) for stage in PRINT_STAGES})


@pytest.mark.slow
def test_a_forged_answer_anywhere_in_the_stream_never_yields_accepted():
    """Whatever a proof prints, at whichever command: never `accepted` unless Lean accepts,
    `forged_output` whenever what the proof's own command printed is more than blank."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    @settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_forgeries(), st.sampled_from(sorted(LEAN_SAYS)))
    def check(texts, lean_says):
        honest = LEAN_SAYS[lean_says]
        with tempfile.TemporaryDirectory() as folder:
            verdict = verify(Path(folder), script(lean_says, texts), proof="  nlinarith")
        if honest is not Stage.ACCEPTED:
            assert not verdict.accepted
        if texts["proof"].strip(BLANK):
            assert verdict.stage is Stage.FORGED_OUTPUT
        if not any(text.strip(BLANK) for text in texts.values()):
            assert verdict.stage in (honest, Stage.FORGED_OUTPUT)  # a blank line may read empty
        if honest is Stage.ACCEPTED and any(text.strip(BLANK) for text in texts.values()):
            assert verdict.stage is Stage.FORGED_OUTPUT

    check()


# --- one header per process ------------------------------------------------------------------


def test_a_mixed_header_batch_imports_one_header_per_process_and_stays_under_the_cap(
    tmp_path, monkeypatch
):
    import prover_assets.lean.repl as repl_module
    from prover_assets.verify.worker import LeanJob, ReplWorker

    # RLIMIT_AS at 350 MiB: one import of 200 MiB fits beside the double (about 27 MiB), two
    # in one process (the first mapped, the second anonymous, as Lean's) do not.
    monkeypatch.setattr(repl_module, "memory_limit", lambda: "rlimit_as")
    log = tmp_path / "repl_log.jsonl"
    olean = ["--import-memory-mb", "200", "--olean-file", str(tmp_path / "mathlib.olean")]
    worker = ReplWorker(
        0,
        lambda: ReplProcess([*DOUBLE, "--log", str(log), *olean], memory_cap_mb=350, sandbox=False),
        header_timeout_s=30,
        check_timeout_s=10,
        recycle_after=1000,
        memory_ceiling_mb=float("inf"),
    )
    headers = [HEADER_A, HEADER_B, HEADER_B, HEADER_A, HEADER_B]
    try:
        results = [
            worker.execute(LeanJob(("p", i), header, f"{SIGNATURE}\n  omega", "t", 10.0), 1)
            for i, header in enumerate(headers)
        ]
    finally:
        worker.close()
    assert [(r.failure, r.attempts) for r in results] == [(None, 1)] * len(headers)
    imports = [e for e in repl_log(tmp_path) if "env" not in e["request"]]
    by_process = {}
    for entry in imports:
        by_process.setdefault(entry["pid"], []).append(entry["request"]["cmd"])
    assert all(len(commands) == 1 for commands in by_process.values())
    assert len(by_process) == 4  # a process for each change of header: A, B, A, B
    assert (worker.restarts, worker.header_switches) == (0, 3)


def worker_with(tmp_path, rules: list[dict]):
    """A worker on the double scripted with `rules`."""
    rules_path = tmp_path / "rules.json"
    rules_path.write_text(json.dumps(rules))
    return worker_on_the_double(tmp_path, "--rules", str(rules_path))


def job_of(proof: str, budget_s: float = 5.0, statement_check: str | None = None):
    from prover_assets.verify.worker import LeanJob

    return LeanJob(
        ("k",),
        HEADER_A,
        f"theorem t : True := by\n{proof}",
        "t",
        budget_s,
        statement_check=statement_check,
    )


def test_a_repl_that_died_between_jobs_is_replaced_and_each_replacement_counted(tmp_path):
    worker = worker_on_the_double(tmp_path)
    try:
        for _ in range(3):
            assert worker.execute(job_of("  omega"), retries=0).failure is None
            worker._process.kill()  # gone between jobs: an OOM killer, a signal
        assert (worker.restarts, worker.header_imports) == (2, 3)
    finally:
        worker.close()


def test_a_forgery_on_a_repl_warmed_but_unused_is_its_own_and_never_retried(tmp_path):
    """A REPL that imported its header and ran no job holds no earlier job's code: text read
    before Lean's answer is this proof's, and the verdict is forged_output at once."""
    worker = worker_with(tmp_path, [forging(printed({"env": 7}))])
    try:
        worker.warm(HEADER_A)
        result = worker.execute(job_of("  nlinarith"), retries=1)
        assert (result.failure, result.attempts, result.worker) == ("forged_output", 1, 0)
        assert result.outcome is None and 0 < result.elapsed_s < 30
    finally:
        worker.close()


def test_a_forgery_s_long_detail_is_cut_at_500_characters(tmp_path):
    long = {"message": "Unknown environment." + " x" * 400}
    worker = worker_with(tmp_path, [forging(printed(long))])
    try:
        result = worker.execute(job_of("  nlinarith"), retries=1)
        assert result.failure == "forged_output"
        assert result.failure_detail.startswith("proof: ") and len(result.failure_detail) == 500
    finally:
        worker.close()


def test_a_proof_lean_rejects_has_no_axioms_or_statement_check_read(tmp_path):
    worker = worker_with(tmp_path, [FAILS_IN_LEAN])
    try:
        check = "example : True := by\n  apply _root_.t <;> assumption"
        result = worker.execute(job_of("  nlinarith", statement_check=check), retries=0)
        assert result.outcome is not None and not result.outcome.passed
        assert (result.axioms, result.statement_errors) == (None, None)  # neither ran
    finally:
        worker.close()


def test_a_proof_past_its_budget_is_a_timeout_with_no_detail_and_no_retry(tmp_path):
    worker = worker_with(tmp_path, [{"match": {"substring": "nlinarith"}, "action": "hang"}])
    try:
        result = worker.execute(job_of("  nlinarith", budget_s=1.0), retries=1)
        assert (result.failure, result.failure_detail, result.attempts) == ("timeout", None, 1)
    finally:
        worker.close()
