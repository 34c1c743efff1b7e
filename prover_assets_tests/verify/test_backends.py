"""Backends: the remote (Kimina) client against a local HTTP double, settings, the simulated and
the real REPL backends."""

import json
from pathlib import Path

import pytest

from prover_assets.config import LocalLeanSettings, SimulatedLeanSettings
from prover_assets.lean.feedback import format_error_block
from prover_assets.lean.protocol import GOEDEL_HEADER
from prover_assets.records import Stage, Verification, publish_records, read_records
from prover_assets.verify.backends import RemoteBackend, backend_from_settings
from prover_assets.verify.pins import PinError, check_expected_pins, read_workspace_pins
from prover_assets.verify.runner import verify_generations
from prover_assets.verify.self_test import self_test
from prover_assets.verify.verifier import StrictVerifier, VerifierPolicy
from prover_assets_tests.doubles.kimina_server import KiminaDouble
from prover_assets_tests.factories import make_generation, make_pins, make_problem
from prover_assets_tests.lean_double import (
    double_backend,
)
from prover_assets_tests.support import LEAN_WORKSPACE_ENV, lean_workspace

SIGNATURE = "theorem t (x : ℕ) (h₀ : 0 < x) : 0 < x + 1 := by"


def completion(tactic: str) -> str:
    return f"```lean4\n{SIGNATURE}\n  {tactic}\n```"


def remote_verdict(server, tactic, **backend_kwargs):
    backend = RemoteBackend(
        server.url, pins=make_pins(backend="remote"), workers=2, **backend_kwargs
    )
    verifier = StrictVerifier(backend, VerifierPolicy(budget_s=5.0, feedback=True))
    return verifier.verify(make_problem(), make_generation(completion_text=completion(tactic)))


def test_remote_accepts_a_clean_proof_after_checking_axioms():
    with KiminaDouble() as server:
        verdict = remote_verdict(server, "omega")
        assert verdict.accepted
        assert verdict.diagnostics.axioms == ["propext", "Classical.choice", "Quot.sound"]
        (request,) = server.requests
        code = request["snippets"][0]["code"]
        assert "\n\n#print axioms _root_.t\n\n" in code
        assert code.endswith("\n  apply _root_.t <;> assumption")
        assert request["timeout"] == 5


def test_remote_error_positions_index_the_compile_view():
    rules = [
        {
            "match": {"substring": "nlinarith"},
            "messages_at": [{"severity": "error", "at": "nlinarith", "data": "linarith failed"}],
        }
    ]
    with KiminaDouble(rules) as server:
        verdict = remote_verdict(server, "nlinarith [h₀]")
    assert verdict.stage is Stage.COMPILE_ERROR
    error = verdict.repl_errors[0]
    line = verdict.repl_code.split("\n")[error["pos"]["line"] - 1]
    assert line[error["pos"]["column"] :].startswith("nlinarith")


def test_remote_foreign_axiom_rejects():
    rules = [{"match": {"substring": "positivity"}, "reply": {}, "axioms": ["sorryAx"]}]
    with KiminaDouble(rules) as server:
        assert remote_verdict(server, "positivity").reasons == ["axiom:sorryAx"]


def test_remote_timeout_is_a_timeout_verdict():
    with KiminaDouble() as server:
        verdict = remote_verdict(server, "exact hang")
    assert (verdict.stage, verdict.reasons) == (Stage.TIMEOUT, ["timeout"])


def test_remote_server_errors_are_retried_then_infrastructure_keeping_the_servers_text():
    with KiminaDouble(fail_first=1) as server:
        assert remote_verdict(server, "omega", retries=1, backoff_s=0.01).accepted
    with KiminaDouble(fail_first=5) as server:
        verdict = remote_verdict(server, "omega", retries=1, backoff_s=0.01)
    assert (verdict.stage, verdict.reasons) == (Stage.INFRASTRUCTURE, ["infrastructure:http_500"])
    assert "scripted failure" in verdict.diagnostics.failure_detail


def test_remote_proofs_reuse_one_connection_per_worker():
    with KiminaDouble() as server:
        backend = RemoteBackend(server.url, pins=make_pins(backend="remote"), workers=1)
        verifier = StrictVerifier(backend, VerifierPolicy(budget_s=5.0, feedback=True))
        for tactic in ("omega", "simp", "linarith", "norm_num"):
            verifier.verify(make_problem(), make_generation(completion_text=completion(tactic)))
    assert len(server.requests) == 4
    assert len(server.connections) == 1


def test_remote_backoff_doubles_from_its_base_up_to_its_bound():
    backend = RemoteBackend(
        "http://x", pins=make_pins(), workers=1, backoff_s=1.0, backoff_max_s=30
    )
    assert [backend.backoff(attempt) for attempt in range(1, 7)] == [1, 2, 4, 8, 16, 30]


def test_an_unreachable_remote_server_is_infrastructure_naming_the_cause():
    with KiminaDouble() as server:
        url = server.url
    verdict = remote_verdict(type("Gone", (), {"url": url})(), "omega", retries=0)
    assert verdict.reasons == ["infrastructure:connection"]
    assert "ConnectionError" in verdict.diagnostics.failure_detail


def test_simulated_backend_is_labelled_simulated_and_passes_its_self_test(tmp_path):
    settings = SimulatedLeanSettings(workers=1, rule="seeded_share", accept_share=0.5, seed=3)
    with backend_from_settings(settings) as backend:
        assert backend.pins.simulated
        assert backend.pins.lean_version == "SIMULATED"
        assert self_test(backend, 5.0, GOEDEL_HEADER.strip()).passed


def make_workspace(tmp_path, toolchain="leanprover/lean4:v4.9.0-rc1"):
    (tmp_path / "lean-toolchain").write_text(toolchain + "\n")
    manifest = {
        "packages": [
            {"name": "mathlib", "rev": "d1d1e4b7aaa"},
            {"name": "REPL", "rev": "7df77c0abbb"},
        ]
    }
    (tmp_path / "lake-manifest.json").write_text(json.dumps(manifest))
    return tmp_path


def test_pins_are_read_from_the_workspace(tmp_path):
    pins = read_workspace_pins(make_workspace(tmp_path))
    assert (pins.lean_version, pins.mathlib_rev, pins.repl_rev) == (
        "v4.9.0-rc1",
        "d1d1e4b7aaa",
        "7df77c0abbb",
    )
    check_expected_pins(pins, {"lean_version": "v4.9.0-rc1", "mathlib_rev": "d1d1e4b7"})


def test_wrong_pins_refuse_to_start(tmp_path):
    pins = read_workspace_pins(make_workspace(tmp_path, "leanprover/lean4:v4.15.0"))
    with pytest.raises(PinError, match="not the registered verifier"):
        check_expected_pins(pins, {"lean_version": "v4.9.0-rc1"})


def test_workspace_without_manifest_is_refused(tmp_path):
    with pytest.raises(PinError, match="not a Lean workspace"):
        read_workspace_pins(tmp_path)


# The real Lean REPL (marker `lean`): the same code path as the double, against Lean + Mathlib.

WORKSPACE = lean_workspace()
real_lean = pytest.mark.skipif(
    WORKSPACE is None,
    reason=f"set {LEAN_WORKSPACE_ENV} to a Lean + Mathlib workspace with the REPL built "
    "(`lake exe repl` must start there)",
)


@pytest.fixture(scope="module")
def real_backend(tmp_path_factory):
    settings = LocalLeanSettings(workspace=str(WORKSPACE), workers=2, budget_s=120.0)
    with backend_from_settings(settings) as backend:
        yield backend


def real_verdict(backend, tactic: str):
    verifier = StrictVerifier(backend, VerifierPolicy(budget_s=120.0, feedback=True))
    return verifier.verify(make_problem(), make_generation(completion_text=completion(tactic)))


@pytest.mark.lean
@real_lean
def test_real_repl_passes_the_self_test_with_the_workspaces_pins(real_backend):
    assert not real_backend.pins.simulated
    assert real_backend.pins.lean_version.startswith("v4")
    assert self_test(real_backend, 120.0, GOEDEL_HEADER.strip()).passed


@pytest.mark.lean
@real_lean
def test_real_repl_accepts_a_proof_with_only_the_standard_axioms(real_backend):
    verdict = real_verdict(real_backend, "omega")
    assert verdict.accepted, verdict.reasons
    assert set(verdict.diagnostics.axioms) <= {"propext", "Classical.choice", "Quot.sound"}


@pytest.mark.lean
@real_lean
def test_real_repl_errors_index_the_code_it_compiled(real_backend):
    verdict = real_verdict(real_backend, "exact h₀")
    assert verdict.stage is Stage.COMPILE_ERROR
    error = verdict.repl_errors[0]
    line = verdict.repl_code.split("\n")[error["pos"]["line"] - 1]
    # Lean puts a type mismatch on the tactic or on its term: either way, inside `exact h₀`.
    assert line.strip() == "exact h₀"
    assert line[error["pos"]["column"] :].startswith(("exact h₀", "h₀"))


@pytest.mark.lean
@real_lean
def test_real_path_rejects_sorry_at_the_gate_and_no_code_without_lean(real_backend):
    sorry = real_verdict(real_backend, "sorry")
    assert (sorry.stage, sorry.reasons) == (Stage.GATE, ["banned:sorry"])
    verifier = StrictVerifier(real_backend, VerifierPolicy(budget_s=120.0, feedback=True))
    no_code = verifier.verify(make_problem(), make_generation(completion_text="no code here"))
    assert no_code.stage is Stage.NO_CODE and no_code.verify_s == 0.0


@pytest.mark.lean
@real_lean
def test_real_feedback_is_an_error_block_for_the_correction_prompt(real_backend):
    verdict = real_verdict(real_backend, "exact h₀")
    block = format_error_block(verdict.repl_code, verdict.repl_errors)
    marked = {"<error>exact</error> h₀", "<error>exact h₀</error>", "exact <error>h₀</error>"}
    assert any(m in block for m in marked) and verdict.repl_errors[0]["data"] in block


@pytest.mark.lean
@real_lean
def test_real_verification_resumes_without_verifying_anything_twice(real_backend, tmp_path):
    generations = [
        make_generation(sample_idx=i, completion_text=completion(tactic))
        for i, tactic in enumerate(["omega", "exact h₀", "simp"])
    ]
    publish_records(tmp_path / "generations.jsonl", generations)
    verifier = StrictVerifier(real_backend, VerifierPolicy(budget_s=120.0, feedback=True))

    def verify():
        return verify_generations(
            {"p1": make_problem()},
            tmp_path / "generations.jsonl",
            tmp_path / "verdicts.jsonl",
            verifier,
            commit_every=1,
        )

    assert verify().verified_now == 3
    again = verify()
    assert (again.already_verified, again.verified_now) == (3, 0)
    assert len(read_records(tmp_path / "verdicts.jsonl", Verification)) == 3


# The two scope attacks of the trusted-statement issue, run against real Lean with the gate and
# the re-insertion out of the way (the job is built by hand), so that only the REPL's statement
# check stands between them and an accepted verdict.
SCOPE_ATTACKS = {
    "shadowing_def_in_namespace": (
        "noncomputable def Real.sqrt (x : ℝ) : ℝ := 4\nnamespace Evil\n"
        "theorem t : Real.sqrt 16 = 4 := by\n  rfl\nend Evil"
    ),
    "section_variable_false": (
        "section\nvariable (hF : False)\ntheorem t : Real.sqrt 16 = 5 := by\n  exact hF.elim\nend"
    ),
}


@pytest.mark.lean
@real_lean
@pytest.mark.parametrize("attack", sorted(SCOPE_ATTACKS))
def test_real_lean_statement_check_rejects_each_scope_attack(real_backend, attack):
    from prover_assets.lean.protocol import GOEDEL_HEADER
    from prover_assets.lean.statements import statement_check_command
    from prover_assets.verify.worker import LeanJob

    claim = "4" if attack == "shadowing_def_in_namespace" else "5"
    trusted = GOEDEL_HEADER + f"theorem t : Real.sqrt 16 = {claim} := by sorry"
    job = LeanJob(
        ("attack", attack),
        GOEDEL_HEADER.strip(),
        SCOPE_ATTACKS[attack],
        "t",
        120.0,
        statement_check=statement_check_command(trusted),
    )
    (result,) = list(real_backend.run([job]))
    assert result.failure is None, result.failure
    # The root `t` does not exist, or is not the trusted statement: either way the check fails.
    assert not result.outcome.complete or result.statement_errors, result


# Preamble problems (MOBench whole) against real Lean: the honest proof in the preamble's
# namespace passes the statement check elaborated from the trusted signature (its section
# variable included as Lean includes it), and a theorem of another statement under the same
# name in the same preamble fails it.
REAL_PREAMBLE = (
    "noncomputable abbrev solution : ℝ := 2\n\n"
    "def f (x : ℝ) : ℝ := x ^ 2 + 1\n\n"
    "variable (y : ℝ)\n\n"
    "namespace Geo\n\n"
)
REAL_PREAMBLE_SIGNATURE = "theorem p (x : ℝ) : 0 < f x + solution + y ^ 2 := by"


@pytest.mark.lean
@real_lean
def test_real_lean_accepts_an_honest_preamble_proof_through_the_whole_verifier(real_backend):
    from prover_assets.lean.protocol import GOEDEL_HEADER

    statement = GOEDEL_HEADER + REAL_PREAMBLE + REAL_PREAMBLE_SIGNATURE + " sorry"
    code = (
        GOEDEL_HEADER
        + REAL_PREAMBLE
        + REAL_PREAMBLE_SIGNATURE
        + "\n  unfold f solution\n  positivity"
    )
    verifier = StrictVerifier(real_backend, VerifierPolicy(budget_s=120.0, feedback=True))
    problem = make_problem(statement=statement)
    verdict = verifier.verify(problem, make_generation(completion_text="", lean_code=code))
    assert verdict.accepted, (verdict.reasons, verdict.repl_errors, verdict.diagnostics)


@pytest.mark.lean
@real_lean
def test_real_lean_statement_check_rejects_another_statement_under_a_preamble_problems_name(
    real_backend,
):
    from prover_assets.lean.protocol import GOEDEL_HEADER
    from prover_assets.lean.statements import statement_check_command
    from prover_assets.verify.worker import LeanJob

    statement = GOEDEL_HEADER + REAL_PREAMBLE + REAL_PREAMBLE_SIGNATURE + " sorry"
    other = REAL_PREAMBLE + "theorem p (x : ℝ) : 0 < f x := by\n  unfold f\n  positivity"
    job = LeanJob(
        ("preamble", "other"),
        GOEDEL_HEADER.strip(),
        other,
        "Geo.p",
        120.0,
        statement_check=statement_check_command(statement),
    )
    (result,) = list(real_backend.run([job]))
    assert result.failure is None, result.failure
    assert result.outcome.complete and result.statement_errors, result


def test_remote_reads_the_axioms_from_the_print_axioms_line_not_from_a_proofs_own_trace():
    # The proof's `trace` prints the words of a clean answer; the real answer names sorryAx.
    spoof = "'t' does not depend on any axioms"
    rules = [
        {
            "match": {"substring": "trace"},
            "reply": {},
            "messages_at": [{"severity": "info", "at": "trace", "data": spoof}],
            "axioms": ["sorryAx"],
        }
    ]
    with KiminaDouble(rules) as server:
        verdict = remote_verdict(server, f'trace "{spoof}"\n  omega')
    assert verdict.reasons == ["axiom:sorryAx"]


LET_STATEMENTS = (
    "2006_A4",
    "2010_A2",
    "Imo1970P6",
    "Imo1983P6",
    "Imo2001P1",
    "Imo2014P4",
    "Usa1983P5",
)


# MOBench statements (by problem_id: imo_sl_2009_N3 is 2009_N3) whose preamble states a hypothesis as a `variable` the signature does not
# mention, or that rely on auto-bound implicits (see "The statement check under Lean 4.9").
VARIABLE_STATEMENTS = (
    "2009_N3",
    "2010_A6",
    "2010_N5",
    "2018_A2",
    "2018_N5",
    "Imo2023P2",
)


@pytest.mark.lean
@real_lean
@pytest.mark.parametrize("problem_id", LET_STATEMENTS + VARIABLE_STATEMENTS)
def test_real_repl_elaborates_the_statement_check_of_a_statement_with_a_let_in_its_type(
    problem_id,
):
    # The signature of seven MOBench statements holds `let T := ...`, six more have section
    # variables or auto-bound implicits; the statement check built from each must be Lean that
    # holds for the statement's own theorem.
    from prover_assets.lean.extract import lean_input
    from prover_assets.lean.repl import ReplProcess, read_answer
    from prover_assets.lean.statements import statement_check_command
    from prover_assets.problems.eval_sets import load_mobench

    mobench = Path(__file__).parents[2] / "prover_assets/data/goedel-prover-v2/MOBench.jsonl"
    problem = next(p for p in load_mobench(mobench)[0] if p.problem_id == problem_id)
    statement = problem.formal_statement
    body = lean_input(statement, statement).body  # the theorem, proved by `sorry`
    process = ReplProcess(["lake", "exe", "repl"], cwd=WORKSPACE, sandbox=False)
    process.start()
    try:
        env = read_answer(process.send({"cmd": problem.header}, 600)).env
        declared = read_answer(process.send({"cmd": body, "env": env}, 300))
        assert declared.passed, declared.errors
        checked = process.send(
            {"cmd": statement_check_command(statement), "env": declared.env}, 300
        )
        assert read_answer(checked).passed, checked
    finally:
        process.close()


def test_a_backends_config_names_how_its_memory_cap_is_enforced(tmp_path):
    with double_backend(tmp_path) as uncapped:
        assert uncapped.config()["memory_limit"]["mechanism"] == "none"
    with double_backend(tmp_path, memory_cap_mb=4000) as capped:
        limit = capped.config()["memory_limit"]
    assert limit["mechanism"] in ("cgroup", "rlimit_as")
    assert limit["malloc_arena_max"] == 2


def test_a_backends_config_records_which_containment_held_and_its_repls_miss_the_data_root(
    tmp_path,
):
    from dataclasses import asdict

    from prover_assets.lean.containment import containment

    with double_backend(tmp_path / "off") as off:
        assert off.config()["sandbox"] == {
            "mechanism": "none",
            "network": False,
            "filesystem": False,
            "how": "off in config",
            "data_root_hidden": False,
            "tmpdir": "private per REPL",
        }
    settings = SimulatedLeanSettings(workers=1, rule="seeded_share", accept_share=0.5, seed=1)
    with backend_from_settings(settings, tmp_path) as on:
        recorded, hidden = on.config()["sandbox"], on.hidden
        # The demo's verifier works contained: the simulator answers, canaries included.
        assert self_test(on, 10.0, GOEDEL_HEADER.strip()).passed
    held = containment()
    assert recorded == {
        **asdict(held),
        "data_root_hidden": held.filesystem,  # out of sight wherever bwrap runs
        "tmpdir": "private per REPL",
    }
    assert hidden == (tmp_path,)
