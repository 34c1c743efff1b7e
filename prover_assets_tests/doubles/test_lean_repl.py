"""The REPL double against the real REPL's own fixtures (both warning quotings)."""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from prover_assets.lean.repl import ReplProcess, read_answer

DATA = Path(__file__).parents[1] / "data"
REPL_TESTS = DATA / "repl-fixtures/leanprover-community-repl/test"
DOUBLE = [sys.executable, "-m", "prover_assets_tests.doubles.lean_repl"]


def run_double(requests: list[dict], *args: str) -> tuple[list[dict], subprocess.CompletedProcess]:
    stdin = "".join(json.dumps(r, ensure_ascii=False) + "\n\n" for r in requests)
    result = subprocess.run(
        [*DOUBLE, *args], input=stdin, capture_output=True, text=True, timeout=60
    )
    answers = [json.loads(block) for block in result.stdout.split("\n\n") if block.strip()]
    return answers, result


def fixture_pairs(name: str) -> list[tuple[dict, dict]]:
    requests = [
        json.loads(b) for b in (REPL_TESTS / f"{name}.in").read_text().split("\n\n") if b.strip()
    ]
    answers = [
        json.loads(b)
        for b in (REPL_TESTS / f"{name}.expected.out").read_text().split("\n\n")
        if b.strip()
    ]
    return list(zip(requests, answers, strict=True))


def default_sorry_fixtures() -> list[str]:
    """Fixtures whose commands are all answered by the REPL's default sorry behaviour."""
    names = []
    for path in sorted(REPL_TESTS.glob("*.in")):
        try:
            pairs = fixture_pairs(path.stem)
        except (ValueError, FileNotFoundError):
            continue
        if pairs and all(
            "cmd" in request
            and set(answer) <= {"sorries", "messages", "env"}
            and len(answer.get("sorries", [])) <= 1
            and all(m["data"] == "declaration uses `sorry`" for m in answer.get("messages", []))
            and request["cmd"].count("sorry") == len(answer.get("sorries", []))
            for request, answer in pairs
        ):
            names.append(path.stem)
    return names


def positions(answer: dict) -> dict:
    return {
        "keys": sorted(answer),
        "sorries": [(s["pos"], s["endPos"]) for s in answer.get("sorries", [])],
        "messages": [
            (m["severity"], m["pos"], m["endPos"], m["data"]) for m in answer.get("messages", [])
        ],
        "env": answer.get("env"),
    }


def test_there_are_default_behaviour_fixtures_to_compare_with():
    assert len(default_sorry_fixtures()) >= 3


@pytest.mark.parametrize("name", default_sorry_fixtures())
def test_answers_have_the_real_repls_shapes_and_positions_v4_28(name):
    pairs = fixture_pairs(name)
    answers, result = run_double([request for request, _ in pairs], "--warning-style", "v4.28")
    assert result.returncode == 0, result.stderr
    assert [positions(a) for a in answers] == [positions(expected) for _, expected in pairs]


def _recorded_text_was_compiled(code: str, feedback: dict) -> bool:
    """About 4% of FormalMATH rows were edited after their feedback was recorded (the recorded
    `sorry` position does not point at a `sorry` in the stored text); those cannot be compared."""
    position = feedback["sorries"][0]["pos"]
    lines = code.split("\n")
    if position["line"] > len(lines):
        return False
    line = lines[position["line"] - 1]
    return line[position["column"] : position["column"] + 5] == "sorry"


def formalmath_rows(limit: int = 60) -> list[dict]:
    rows = json.loads((DATA / "pool-sources/FormalMATH_lite.json").read_text())
    picked = []
    for row in rows:
        feedback = ast.literal_eval(row["compiler_feedback"])
        code = row["autoformalization"] + " sorry"
        if (
            len(feedback.get("sorries", [])) == 1
            and len(feedback.get("messages", [])) == 1
            and _recorded_text_was_compiled(code, feedback)
        ):
            picked.append({"code": code, "feedback": feedback})
        if len(picked) == limit:
            break
    return picked


def test_answers_match_v4_9_era_feedback_on_real_statements():
    """FormalMATH's recorded REPL feedback (the v4.9-era quoting) for `statement + sorry`."""
    rows = formalmath_rows()
    answers, result = run_double([{"cmd": row["code"]} for row in rows], "--warning-style", "v4.9")
    assert result.returncode == 0, result.stderr
    for row, answer in zip(rows, answers, strict=True):
        expected = row["feedback"]
        assert answer["sorries"][0]["pos"] == expected["sorries"][0]["pos"]
        assert answer["sorries"][0]["endPos"] == expected["sorries"][0]["endPos"]
        assert answer["messages"] == [{k: v for k, v in expected["messages"][0].items()}], row[
            "code"
        ][-120:]


def test_unknown_environment_answer_is_the_real_one_and_allocates_nothing():
    pairs = fixture_pairs("unknown_environment")
    answers, _ = run_double([request for request, _ in pairs])
    assert answers == [expected for _, expected in pairs]
    answers, _ = run_double([{"cmd": "x", "env": 5}, {"cmd": "def f := 1"}])
    assert answers == [{"message": "Unknown environment."}, {"env": 0}]


def test_every_real_fixture_answer_is_readable():
    for path in sorted(REPL_TESTS.glob("*.expected.out")):
        for block in path.read_text().split("\n\n"):
            if block.strip():
                outcome = read_answer(json.loads(block))
                assert outcome.passed == (not outcome.errors)


def test_commands_allocate_envs_even_with_errors():
    code = (
        '--@fake error {"at": "rfl", "data": "The rfl tactic failed"}\ntheorem a : 1 = 2 := by rfl'
    )
    answers, _ = run_double(
        [{"cmd": "import Mathlib"}, {"cmd": code, "env": 0}, {"cmd": "def g := 1", "env": 0}]
    )
    assert [a["env"] for a in answers] == [0, 1, 2]
    assert answers[1]["messages"][0]["pos"] == {"line": 2, "column": 24}
    assert answers[1]["messages"][0]["endPos"] == {"line": 2, "column": 27}


def test_print_axioms_answers_from_the_env_record():
    answers, _ = run_double(
        [
            {"cmd": "import Mathlib"},
            {"cmd": "theorem good : True := trivial", "env": 0},
            {
                "cmd": '--@fake axioms ["sorryAx", "propext"]\ntheorem bad : True := trivial',
                "env": 0,
            },
            {"cmd": "#print axioms good", "env": 1},
            {"cmd": "#print axioms bad", "env": 2},
        ]
    )
    assert (
        answers[3]["messages"][0]["data"]
        == "'good' depends on axioms: [propext, Classical.choice, Quot.sound]"
    )
    assert answers[4]["messages"][0]["data"] == "'bad' depends on axioms: [sorryAx, propext]"


def test_comment_queries_get_no_answer_and_bad_json_kills_the_process():
    result = subprocess.run(
        DOUBLE,
        input='-- a comment\n\n{"cmd": "def f := 1"}\n\n{"cmd": broken\n\n',
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert json.loads(result.stdout.split("\n\n")[0]) == {"env": 0}
    assert result.returncode == 1
    assert "uncaught exception" in result.stderr


def test_eof_exits_cleanly():
    result = subprocess.run(DOUBLE, input="", capture_output=True, text=True, timeout=30)
    assert result.returncode == 0


def test_log_records_each_request_and_answer(tmp_path):
    log = tmp_path / "log.jsonl"
    run_double([{"cmd": "import Mathlib"}, {"cmd": "def f := 1", "env": 0}], "--log", str(log))
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["request"] for e in entries] == [
        {"cmd": "import Mathlib"},
        {"cmd": "def f := 1", "env": 0},
    ]
    assert [e["answer"]["env"] for e in entries] == [0, 1]


def test_rules_match_by_substring_regex_and_sha256(tmp_path):
    import hashlib

    exact = "theorem z : 0 = 0 := rfl"
    rules = [
        {
            "match": {"substring": "needle"},
            "reply": {
                "messages": [
                    {
                        "severity": "error",
                        "pos": {"line": 1, "column": 0},
                        "endPos": None,
                        "data": "from substring",
                    }
                ]
            },
        },
        {
            "match": {"regex": r"^theorem r\d"},
            "reply": {
                "messages": [
                    {
                        "severity": "error",
                        "pos": {"line": 1, "column": 0},
                        "endPos": None,
                        "data": "from regex",
                    }
                ]
            },
        },
        {
            "match": {"sha256": hashlib.sha256(exact.encode()).hexdigest()},
            "reply": {
                "messages": [
                    {
                        "severity": "error",
                        "pos": {"line": 1, "column": 0},
                        "endPos": None,
                        "data": "from sha",
                    }
                ]
            },
        },
    ]
    path = tmp_path / "rules.json"
    path.write_text(json.dumps(rules))
    answers, _ = run_double(
        [{"cmd": "theorem a : x := needle"}, {"cmd": "theorem r7 : 1 = 1 := rfl"}, {"cmd": exact}],
        "--rules",
        str(path),
    )
    assert [a["messages"][0]["data"] for a in answers] == [
        "from substring",
        "from regex",
        "from sha",
    ]


def test_each_header_command_costs_an_import_of_resident_memory():
    header = {"cmd": "import Mathlib"}
    process = ReplProcess([*DOUBLE, "--import-memory-mb", "64"], sandbox=False)
    process.start()
    try:
        process.send({"cmd": "example : True := trivial", "env": 7}, 30)  # up, nothing imported
        started = process.resident_mb()
        first = read_answer(process.send(header, 30))
        once = process.resident_mb()
        second = read_answer(process.send(header, 30))  # the same header, imported again
        twice = process.resident_mb()
        read_answer(process.send({"cmd": "example : True := trivial", "env": 0}, 30))
        after_proof = process.resident_mb()
    finally:
        process.close()
    assert (first.env, second.env) == (0, 1)
    assert 60 < once - started < 80 and 60 < twice - once < 80
    assert abs(after_proof - twice) < 16  # a proof in an env imports nothing
