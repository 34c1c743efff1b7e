"""The demo's REPL simulator, as a process speaking the REPL's protocol: seeded acceptance,
the self-test's answers, sorry, `#print axioms`, and no obedience to the tests' directives."""

import hashlib
import json
import subprocess
import sys

from prover_assets.lean.repl import ReplProcess, read_answer
from prover_assets.verify.known_proofs import SELF_TEST_BAD, SELF_TEST_GOOD
from prover_assets.verify.simulator import describe_rule

SIMULATOR = [sys.executable, "-m", "prover_assets.verify.simulator"]


def run_simulator(
    requests: list[dict], share: float = 0.3, seed: int = 7, rule: str = "seeded_share"
) -> list[dict]:
    stdin = "".join(json.dumps(r) + "\n\n" for r in requests)
    done = subprocess.run(
        [*SIMULATOR, "--rule", rule, "--accept-share", str(share), "--seed", str(seed)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return [json.loads(chunk) for chunk in done.stdout.split("\n\n") if chunk.strip()]


def accepted_by_the_rule(command: str, share: float, seed: int) -> bool:
    """The documented rule, computed here: a hash of seed and the command's sha256."""
    digest = hashlib.sha256(command.encode()).hexdigest()
    draw = int(hashlib.sha256(f"{seed}|{digest}".encode()).hexdigest(), 16)
    return (draw % 10**6) / 10**6 < share


def test_a_theorem_is_accepted_exactly_when_its_seeded_draw_is_below_the_share():
    codes = [f"theorem t{i} (x : ℕ) : x + {i} = {i} + x := by\n  omega" for i in range(200)]
    answers = run_simulator([{"cmd": "import Mathlib"}] + [{"cmd": c, "env": 0} for c in codes])
    accepted = ["messages" not in answer for answer in answers[1:]]
    assert accepted == [accepted_by_the_rule(code, 0.3, 7) for code in codes]
    assert 40 <= sum(accepted) <= 80
    rejected = answers[1 + accepted.index(False)]
    assert rejected["messages"][0]["severity"] == "error"
    assert rejected["messages"][0]["pos"]["line"] == 2  # the first tactic line


def test_the_self_test_is_answered_known_good_accepted_and_known_bad_rejected_at_any_share():
    answers = run_simulator(
        [
            {"cmd": "import Mathlib"},
            {"cmd": SELF_TEST_GOOD, "env": 0},
            {"cmd": SELF_TEST_BAD, "env": 0},
        ],
        share=0.000001,
    )
    good, bad = read_answer(answers[1]), read_answer(answers[2])
    assert good.complete
    assert not bad.passed


def test_a_sorry_is_reported_and_axioms_are_printed_for_what_an_env_declared():
    answers = run_simulator(
        [
            {"cmd": "import Mathlib"},
            {"cmd": "theorem s : True := by\n  sorry", "env": 0},
            {"cmd": "#print axioms s", "env": 1},
            {"cmd": "#print axioms nowhere", "env": 1},
            {"cmd": "theorem x : True := trivial", "env": 9},
        ],
        share=1.0,
    )
    assert not read_answer(answers[1]).complete and answers[1]["sorries"]
    assert "depends on axioms: [propext, Classical.choice, Quot.sound]" in str(answers[2])
    assert answers[3]["messages"][0]["severity"] == "error"
    assert answers[4] == {"message": "Unknown environment."}


def test_the_tests_fault_directives_mean_nothing_to_the_product_simulator():
    answers = run_simulator(
        [
            {"cmd": "import Mathlib"},
            {"cmd": "--@fake crash 3\ntheorem a : True := by\n  trivial", "env": 0},
        ],
        share=1.0,
    )
    assert answers[1] == {"env": 1}


def test_the_canary_gets_leans_unknown_identifier_error_where_the_repls_own_test_has_it():
    nonce = "canary_" + "ab" * 16
    answers = run_simulator(
        [{"cmd": "import Mathlib"}, {"cmd": f"#check {nonce}", "env": 0}], share=1.0
    )
    # As the pinned REPL's test/dup_msg answers `#check g`: on the name, a new env.
    assert answers[1] == {
        "messages": [
            {
                "severity": "error",
                "pos": {"line": 1, "column": 7},
                "endPos": {"line": 1, "column": 46},
                "data": f"unknown identifier '{nonce}'",
            }
        ],
        "env": 1,
    }


def test_the_product_repl_client_drives_the_simulator_as_it_drives_lake_exe_repl():
    process = ReplProcess(
        [*SIMULATOR, "--rule", "seeded_share", "--accept-share", "1.0", "--seed", "1"],
        sandbox=False,
    )
    process.start()
    try:
        assert process.send({"cmd": "import Mathlib"}, 10) == {"env": 0}
        assert read_answer(process.send({"cmd": SELF_TEST_GOOD, "env": 0}, 10)).complete
        process.canary(0, 10)  # the demo's verifier sends one after every job
    finally:
        process.close()


# The tactic names the demo teaches (written out here, not read from the simulator).
TACTIC_NAMES = ["nlinarith", "norm_num", "omega", "simp_all", "linarith", "positivity"]


def planted_by_the_documented_rule(seed: int) -> str:
    """The planted tactic computed here: sha256 of `planted_tactic|<seed>`, modulo the six."""
    draw = int(hashlib.sha256(f"planted_tactic|{seed}".encode()).hexdigest(), 16)
    return TACTIC_NAMES[draw % len(TACTIC_NAMES)]


def test_the_planted_rule_accepts_exactly_the_proofs_closed_by_the_seed_s_tactic():
    for seed in (1, 7):
        planted = planted_by_the_documented_rule(seed)
        codes = {
            name: f"theorem t (x : ℕ) : x = x := by\n  intro\n  {name} [h]\n\n-- done\n"
            for name in TACTIC_NAMES
        }
        answers = run_simulator(
            [{"cmd": "import Mathlib"}] + [{"cmd": c, "env": 0} for c in codes.values()],
            seed=seed,
            rule="planted_tactic",
        )
        accepted = {name: "messages" not in a for name, a in zip(codes, answers[1:], strict=True)}
        assert accepted == {name: name == planted for name in TACTIC_NAMES}
        rejected = answers[1 + TACTIC_NAMES.index(next(n for n in TACTIC_NAMES if n != planted))]
        # the error sits on the last tactic's line (line 3), comments and blank lines aside
        assert rejected["messages"][0]["pos"] == {"line": 3, "column": 2}


def test_the_planted_rule_reads_the_last_tactic_not_an_earlier_one():
    planted = planted_by_the_documented_rule(1)
    other = next(n for n in TACTIC_NAMES if n != planted)
    answers = run_simulator(
        [
            {"cmd": "import Mathlib"},
            {"cmd": f"theorem a : True := by\n  {planted}\n  {other}", "env": 0},
            {"cmd": f"theorem b : True := by\n  {other}\n  {planted}", "env": 0},
        ],
        seed=1,
        rule="planted_tactic",
    )
    assert "messages" in answers[1] and "messages" not in answers[2]


def test_the_rule_s_words_name_the_planted_tactic_or_the_share():
    planted = describe_rule("planted_tactic", 1, None)
    assert f"`{planted_by_the_documented_rule(1)}`" in planted
    assert "planted by construction" in planted
    null = describe_rule("seeded_share", 7, 0.3)
    assert "probability 0.3" in null and "no effect is planted" in null


def test_the_theorem_rule_judges_the_theorem_whatever_its_proof_says():
    names = [f"t{i}" for i in range(60)]
    proofs = ("omega", "norm_num", "simp_all")
    requests = [{"cmd": "import Mathlib"}] + [
        {"cmd": f"theorem {name} (x : ℕ) : x = x := by\n  {proof}", "env": 0}
        for name in names
        for proof in proofs
    ]
    answers = run_simulator(requests, share=0.3, seed=7, rule="seeded_theorems")
    accepted = ["messages" not in a for a in answers[1:]]
    by_theorem = [accepted[i * len(proofs) : (i + 1) * len(proofs)] for i in range(len(names))]
    # every proof of a theorem gets its theorem's verdict: the documented draw on its name
    assert by_theorem == [[accepted_by_the_rule(n, 0.3, 7)] * len(proofs) for n in names]
    assert 8 <= sum(row[0] for row in by_theorem) <= 30


def test_a_statement_check_holds_only_for_the_theorem_the_env_declared_with_that_signature():
    preamble = "abbrev s : ℕ := 4\nnamespace G\n"
    check = "example (n : ℕ) : n + s = s + n := by\n  apply _root_.G.t <;> assumption"
    answers = run_simulator(
        [
            {"cmd": "import Mathlib"},
            {"cmd": preamble + "theorem t (n : ℕ) : n + s = s + n := by\n  omega", "env": 0},
            {"cmd": check, "env": 1},
            {"cmd": "#print axioms G.t", "env": 1},
            {"cmd": preamble + "theorem t (n : ℕ) : n + s = n + s := by\n  rfl", "env": 0},
            {"cmd": check, "env": 4},
        ],
        share=1.0,
    )
    honest, axioms, changed = (
        read_answer(answers[2]),
        read_answer(answers[3]),
        read_answer(answers[5]),
    )
    assert honest.passed and not honest.errors
    assert "'G.t' depends on axioms" in axioms.infos[0]["data"]
    assert not changed.passed
    assert changed.errors[0]["data"].startswith("tactic 'apply' failed")
