"""The REPL client: reading answers, framing requests, faults, sandbox, memory cap."""

import json
import os
import socket
import sys
import threading

import pytest

from prover_assets.lean.repl import ReplFailure, ReplProcess, read_answer, sandbox_prefix

DOUBLE = [sys.executable, "-m", "prover_assets_tests.doubles.lean_repl"]


def message(severity, data):
    return {"severity": severity, "pos": {"line": 1, "column": 0}, "endPos": None, "data": data}


@pytest.mark.parametrize(
    ("answer", "passed", "complete"),
    [
        ({"env": 1}, True, True),
        ({"messages": [message("error", "unsolved goals")], "env": 1}, False, False),
        ({"messages": [message("warning", "declaration uses 'sorry'")], "env": 1}, True, False),
        ({"messages": [message("warning", "declaration uses `sorry`")], "env": 1}, True, False),
        (
            {"messages": [message("warning", "linarith failed to find a contradiction")], "env": 1},
            True,
            False,
        ),
        ({"messages": [message("warning", "unused variable `h`")], "env": 1}, True, True),
        ({"messages": [message("info", "Try this: exact h")], "env": 1}, True, True),
        ({"sorries": [{"pos": {"line": 1, "column": 0}, "goal": "⊢ True"}], "env": 1}, True, False),
    ],
    ids=[
        "clean",
        "error",
        "sorry_v4_9",
        "sorry_v4_28",
        "warning_failed",
        "lint_warning",
        "info",
        "sorries",
    ],
)
def test_read_answer_is_goedels_reading_in_both_quotings(answer, passed, complete):
    outcome = read_answer(answer)
    assert (outcome.passed, outcome.complete) == (passed, complete)


@pytest.fixture
def repl(tmp_path):
    processes = []

    def start(*args, memory_cap_mb=None, sandbox=False):
        process = ReplProcess(
            [*DOUBLE, "--log", str(tmp_path / "log.jsonl"), *args],
            memory_cap_mb=memory_cap_mb,
            sandbox=sandbox,
        )
        process.start()
        processes.append(process)
        return process

    yield start
    for process in processes:
        process.close()


def log_entries(tmp_path):
    return [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]


def test_each_request_is_one_json_line_even_with_newlines_in_the_code(repl, tmp_path):
    process = repl()
    process.send({"cmd": "import Mathlib"}, 10)
    process.send({"cmd": "theorem a : True := by\n  trivial", "env": 0}, 10)
    raws = [entry["raw"] for entry in log_entries(tmp_path)]
    assert raws == [
        json.dumps({"cmd": "import Mathlib"}) + "\n",
        json.dumps({"cmd": "theorem a : True := by\n  trivial", "env": 0}) + "\n",
    ]


def test_answers_arriving_in_pieces_mid_line_are_read_whole(repl):
    process = repl("--chunked-output")
    code = "theorem a (x : Nat) : x = x := by sorry"
    answer = process.send({"cmd": code}, 10)
    assert answer["sorries"][0]["pos"] == {"line": 1, "column": code.index("sorry")}
    assert answer["env"] == 0


def assert_group_gone(pid):
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)


def test_timeout_kills_the_process_group(repl):
    process = repl()
    pid = process.pid
    with pytest.raises(ReplFailure) as failure:
        process.send({"cmd": "--@fake hang\ntheorem a : True := trivial"}, 0.5)
    assert failure.value.kind == "timeout"
    assert not process.alive
    assert_group_gone(pid)


def test_crash_is_reported_with_exit_code_and_stderr(repl):
    process = repl()
    with pytest.raises(ReplFailure) as failure:
        process.send({"cmd": "--@fake crash 3\ntheorem a : True := trivial"}, 10)
    assert failure.value.kind == "crash"
    assert "exit code 3" in failure.value.detail
    assert "scripted crash" in failure.value.detail


def test_empty_answer_is_a_failure(repl):
    process = repl()
    with pytest.raises(ReplFailure) as failure:
        process.send({"cmd": "--@fake empty\ntheorem a : True := trivial"}, 10)
    assert failure.value.kind == "empty"


def test_non_json_answer_is_a_failure(repl):
    process = repl()
    with pytest.raises(ReplFailure) as failure:
        process.send(
            {"cmd": "--@fake crash 0 PANIC: not json\n\n\ntheorem a : True := trivial"}, 10
        )
    assert failure.value.kind in ("non_json", "crash")


def test_death_after_n_commands_is_eof(repl):
    process = repl("--die-after", "1")
    process.send({"cmd": "import Mathlib"}, 10)
    with pytest.raises(ReplFailure) as failure:
        process.send({"cmd": "def f := 1", "env": 0}, 10)
    assert failure.value.kind == "crash"


def test_memory_cap_stops_a_runaway_process(repl):
    process = repl(memory_cap_mb=400)
    with pytest.raises(ReplFailure) as failure:
        process.send({"cmd": "--@fake oom\ntheorem a : True := trivial"}, 60)
    assert failure.value.kind == "crash"
    assert "MemoryError" in failure.value.detail


def test_slow_startup_is_waited_for(repl):
    process = repl("--startup-delay", "1")
    assert process.send({"cmd": "import Mathlib"}, 10) == {"env": 0}


def probe(process, port=None):
    spec = {"connect": f"127.0.0.1:{port}"} if port else {}
    answer = process.send(
        {"cmd": f"--@fake probe {json.dumps(spec)}\ntheorem a : True := trivial"}, 20
    )
    return json.loads(answer["messages"][0]["data"])


@pytest.fixture
def listener():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    accepting = threading.Thread(target=lambda: [server.accept() for _ in range(8)], daemon=True)
    accepting.start()
    yield server.getsockname()[1]
    server.close()


@pytest.mark.skipif(
    not sandbox_prefix()[0], reason=f"no network sandbox here: {sandbox_prefix()[1]}"
)
def test_sandboxed_repl_has_no_network(repl, listener):
    assert probe(repl(sandbox=False), listener)["connect"] == "ok"
    assert probe(repl(sandbox=True), listener)["connect"].startswith("blocked")


def test_each_repl_has_a_private_tmpdir_removed_when_it_ends(repl):
    first, second = repl(), repl()
    first_tmp, second_tmp = probe(first)["tmpdir"], probe(second)["tmpdir"]
    assert first_tmp != second_tmp
    assert os.path.isdir(first_tmp)
    first.close()
    assert not os.path.exists(first_tmp)


def test_sandbox_description_is_recorded():
    prefix, description = sandbox_prefix()
    assert description.startswith("unshare") == bool(prefix)


def test_an_answer_is_split_into_its_messages_by_severity_with_its_env_and_sorries():
    error, warning = message("error", "unsolved goals"), message("warning", "unused variable `h`")
    info, sorry = message("info", "Try this: exact h"), {"pos": {"line": 2, "column": 2}}
    quiet = {"severity": "warning", "pos": {"line": 3, "column": 0}}  # a warning without data
    answer = {"messages": [info, error, warning, quiet], "sorries": [sorry], "env": 7}
    outcome = read_answer(answer)
    assert (outcome.errors, outcome.warnings, outcome.infos) == (
        (error,),
        (warning, quiet),
        (info,),
    )
    assert (outcome.sorries, outcome.env) == ((sorry,), 7)
    assert (outcome.passed, outcome.complete) == (False, False)
    assert read_answer({"messages": [warning, quiet], "env": 8}).complete
