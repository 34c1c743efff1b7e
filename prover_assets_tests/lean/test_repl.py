"""The REPL client: reading answers, framing requests, faults, sandbox, memory cap."""

import json
import os
import random
import resource
import signal
import socket
import stat
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest

import prover_assets.lean.repl as repl_module
from prover_assets.lean.containment import containment
from prover_assets.lean.repl import (
    MALLOC_ARENA_MAX,
    AnswerBuffer,
    ReplFailure,
    ReplProcess,
    read_answer,
)
from prover_assets_tests.lean_double import DOUBLE, probe, rescanning_take


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
def repl(tmp_path, monkeypatch):
    # The caps below are RLIMIT_AS's, whatever this host offers (the cgroup has its own test).
    monkeypatch.setattr(repl_module, "memory_limit", lambda: "rlimit_as")
    processes = []

    def start(*args, memory_cap_mb=None, sandbox=False):
        # A sandboxed double cannot write its log: the test's folder is under the host's /tmp.
        log = [] if sandbox else ["--log", str(tmp_path / "log.jsonl")]
        process = ReplProcess(
            [*DOUBLE, *log, *args],
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


def test_each_request_is_one_json_line_of_utf8_even_with_newlines_in_the_code(repl, tmp_path):
    process = repl()
    process.send({"cmd": "import Mathlib"}, 10)
    process.send({"cmd": "theorem a (x : ℕ) : x = x := by\n  rfl", "env": 0}, 10)
    raws = [entry["raw"] for entry in log_entries(tmp_path)]
    assert raws == [
        '{"cmd": "import Mathlib"}\n',
        '{"cmd": "theorem a (x : ℕ) : x = x := by\\n  rfl", "env": 0}\n',  # ℕ as itself
    ]
    assert process.commands_sent == 2
    process.start()
    assert process.commands_sent == 0


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
    assert (failure.value.kind, failure.value.detail) == ("timeout", "no answer within 0.5 s")
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
    assert (failure.value.kind, failure.value.detail) == ("empty", "the REPL answered with nothing")
    assert not process.alive


@pytest.mark.parametrize(
    ("garbage", "detail"),
    [
        (
            "PANIC " + "x" * 300,
            "Expecting value: line 1 column 1 (char 0): 'PANIC " + "x" * 194 + "'",
        ),
        ("[" + "1, " * 100 + "1]", "not a JSON object: '[" + "1, " * 66 + "1'"),
    ],
    ids=["not_json", "not_an_object"],
)
def test_an_answer_that_is_not_a_json_object_is_a_failure_quoting_it(repl, garbage, detail):
    process = repl()
    with pytest.raises(ReplFailure) as failure:
        process.send({"cmd": f"--@fake garbage {garbage}\ntheorem a : True := trivial"}, 10)
    assert (failure.value.kind, failure.value.detail) == ("non_json", detail)
    assert not process.alive


def test_a_quick_answer_within_a_timeout_under_a_second_is_read(repl):
    assert repl().send({"cmd": "import Mathlib"}, 0.8) == {"env": 0}


def test_a_repl_that_stopped_reading_fails_the_write_as_a_crash():
    process = ReplProcess(["bash", "-c", "exec 0<&-; exec sleep 30"], sandbox=False)
    process.start()
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/{process.pid}/fd/0") and time.monotonic() < deadline:
        time.sleep(0.01)
    with pytest.raises(ReplFailure) as failure:
        process.send({"cmd": "import Mathlib"}, 10)
    assert failure.value.kind == "crash"
    assert failure.value.detail.startswith(
        "writing the request failed: [Errno 32] Broken pipe; still running"
    )
    assert not process.alive


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


@pytest.fixture
def listener():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    accepting = threading.Thread(target=lambda: [server.accept() for _ in range(8)], daemon=True)
    accepting.start()
    yield server.getsockname()[1]
    server.close()


@pytest.mark.skipif(not containment().network, reason=f"no network sandbox: {containment().how}")
def test_sandboxed_repl_has_no_network(repl, listener):
    assert probe(repl(sandbox=False), listener)["connect"] == "ok"
    assert probe(repl(sandbox=True), listener)["connect"].startswith("blocked")


def test_each_repl_has_a_private_tmpdir_removed_when_it_ends(repl):
    first, second = repl(), repl()
    seen = probe(first)
    first_tmp, second_tmp = seen["tmpdir"], probe(second)["tmpdir"]
    assert seen["tmp"] == seen["temp"] == first_tmp  # every name a program may look under
    assert first_tmp != second_tmp
    assert os.path.isdir(first_tmp)
    first.close()
    assert not os.path.exists(first_tmp)


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


def test_repls_started_at_once_from_many_threads_each_get_their_own_memory_cap(repl):
    caps = [300 + 10 * i for i in range(8)]
    started: dict[int, ReplProcess] = {}
    threads = [
        threading.Thread(target=lambda c=c: started.__setitem__(c, repl(memory_cap_mb=c)))
        for c in caps
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert {c: probe(started[c])["address_space_limit"] for c in caps} == {c: c << 20 for c in caps}


def test_a_repl_that_cannot_be_run_fails_its_first_request_as_a_crash_naming_why(tmp_path):
    process = ReplProcess([str(tmp_path / "no-lake"), "exe", "repl"], sandbox=False)
    process.start()
    with pytest.raises(ReplFailure) as failure:
        process.send({"cmd": "import Mathlib"}, 10)
    assert failure.value.kind == "crash"
    assert "exit code 127" in failure.value.detail
    assert "cannot run" in failure.value.detail
    assert not process.alive


def test_a_repl_already_gone_before_its_first_request_still_names_its_exit_code(tmp_path):
    # Under load the process can be reaped before the request is written: the reason must
    # not depend on which came first.
    process = ReplProcess([str(tmp_path / "no-lake"), "exe", "repl"], sandbox=False)
    process.start()
    deadline = time.monotonic() + 30
    while process.alive and time.monotonic() < deadline:
        time.sleep(0.01)
    with pytest.raises(ReplFailure) as failure:
        process.send({"cmd": "import Mathlib"}, 10)
    assert failure.value.kind == "crash"
    assert "the REPL is not running; exit code 127" in failure.value.detail
    assert "cannot run" in failure.value.detail


def test_resident_memory_counts_the_repl_under_its_launcher_and_is_zero_once_gone(tmp_path):
    # As `lake exe repl`: a launcher process whose child is the REPL.
    process = ReplProcess(["bash", "-c", '"$@"; exit $?', "lake", *DOUBLE], sandbox=False)
    process.start()
    before = process.resident_mb()
    process.send({"cmd": "--@fake grow 200\ntheorem a : True := trivial"}, 30)
    grown = process.resident_mb()
    assert 0 < before < 150
    assert 190 < grown - before < 260
    process.close()
    assert process.resident_mb() == 0.0


def test_a_repl_that_died_on_its_own_holds_no_memory_reaped_or_not(repl):
    process = repl()
    process._process.stdin.write(b'{"cmd": "--@fake crash 3\\n"}\n\n')
    process._process.stdin.flush()
    os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT)  # a zombie, not yet reaped
    assert process.resident_mb() == 0.0
    process._process.wait()
    assert process.resident_mb() == 0.0


def vm_rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


def children_of(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as children:
        return [int(child) for child in children.read().split()]


def test_resident_memory_is_the_sum_over_every_descendant_of_the_launcher(tmp_path):
    # Two launchers deep (a wrapper script around `lake exe repl`): grandchildren count too.
    inner = 'bash -c \'"$@"; exit $?\' inner "$@"; exit $?'
    process = ReplProcess(["bash", "-c", inner, "outer", *DOUBLE], sandbox=False)
    process.start()
    try:
        process.send({"cmd": "--@fake grow 50\ntheorem a : True := trivial"}, 30)
        (middle,) = children_of(process.pid)
        (repl_pid,) = children_of(middle)
        by_hand_kb = sum(vm_rss_kb(pid) for pid in (process.pid, middle, repl_pid))
        assert abs(process.resident_mb() - by_hand_kb / 1024) < 2.0
        assert vm_rss_kb(repl_pid) > 50 * 1024
    finally:
        process.close()


def test_a_failure_names_its_stage_kind_and_detail_and_keeps_them_when_staged():
    bare = ReplFailure("timeout", "no answer within 5.0 s")
    staged = bare.at_stage("axioms")
    assert str(bare) == "timeout: no answer within 5.0 s"
    assert str(staged) == "axioms:timeout: no answer within 5.0 s"
    assert (staged.kind, staged.detail, staged.stage) == ("timeout", bare.detail, "axioms")
    assert bare.stage is None


def test_stderr_tail_is_the_last_bytes_decoded_with_replacement_and_empty_once_gone():
    noisy = "head -c 5000 /dev/zero | tr '\\0' a >&2; printf '\\377end' >&2; exec \"$@\""
    process = ReplProcess(["bash", "-c", noisy, "lake", *DOUBLE], sandbox=False)
    process.start()
    process.send({"cmd": "import Mathlib"}, 10)
    assert process.stderr_tail(limit=10) == "aaaaaa\ufffdend"
    assert len(process.stderr_tail()) == 2000
    process.close()
    assert process.stderr_tail() == ""


def test_a_repls_tmpdir_is_named_for_the_process_that_started_it(repl):
    from prover_assets.records.owned import HOST

    tmpdir = Path(probe(repl())["tmpdir"])
    assert tmpdir.parent == Path(tempfile.gettempdir())
    assert tmpdir.name.startswith(f"lean-repl-h{HOST}-p{os.getpid()}-")


def test_a_dead_verifiers_repl_folders_are_swept_and_a_live_ones_are_not(repl, tmp_path):
    from prover_assets.lean.repl import sweep_repl_folders
    from prover_assets.records.owned import HOST
    from prover_assets_tests.records.test_owned import dead_pid

    live = Path(probe(repl())["tmpdir"])
    dead = Path(tempfile.gettempdir()) / f"lean-repl-h{HOST}-p{dead_pid()}-0a1b"
    dead.mkdir()
    swept = [removed.path for removed in sweep_repl_folders()]
    assert dead in swept and not dead.exists()
    assert live.exists()


def test_kill_closes_stdin_and_the_terminal_and_removes_the_tmpdir(repl):
    process = repl()
    handle, stdout_fd, tmpdir = process._process, process._stdout_fd, probe(process)["tmpdir"]
    process.kill()
    assert handle.returncode == -signal.SIGKILL
    assert handle.stdin.closed and process._stdout_fd is None
    with pytest.raises(OSError):
        os.fstat(stdout_fd)
    assert not os.path.exists(tmpdir)
    assert not process.alive


def test_close_lets_the_repl_exit_on_eof_before_anything_is_killed(repl):
    process = repl()
    process.send({"cmd": "import Mathlib"}, 10)
    handle = process._process
    process.close()
    assert handle.returncode == 0  # the REPL's own exit on EOF, not SIGKILL


def test_a_request_to_a_repl_that_is_not_running_is_a_crash(repl):
    process = repl()
    process.kill()
    with pytest.raises(ReplFailure) as failure:
        process.send({"cmd": "import Mathlib"}, 10)
    assert (failure.value.kind, failure.value.detail) == ("crash", "the REPL is not running")


@pytest.mark.parametrize(
    ("buffered", "answers", "left"),
    [
        (b'{"env": 0}\n\n{"env": 1}\n\n', ['{"env": 0}', '{"env": 1}'], b""),
        (b'\n\n {"env": 0}\n\n', ['{"env": 0}'], b""),  # blank lines before an answer
        (b"XY\n\n", ["XY"], b""),  # nothing but whitespace is skipped
        (b'{"data": "\xff"}\n\n', ['{"data": "\ufffd"}'], b""),  # bad UTF-8 replaced
        (b'{"env": 0}\n', [], b'{"env": 0}\n'),  # not complete yet
        (b" \n\n", [""], b""),  # an empty answer
        (b" \n", [], b" \n"),
    ],
    ids=["two_at_once", "leading_blank", "text", "bad_utf8", "partial", "empty", "whitespace"],
)
def test_answers_are_taken_from_the_buffer_one_at_a_time(buffered, answers, left):
    buffer = AnswerBuffer()
    buffer.feed(buffered)
    taken = []
    while (text := buffer.take()) is not None:
        taken.append(text)
    assert (taken, bytes(buffer)) == (answers, left)


@pytest.mark.parametrize("seed", range(40))
def test_a_stream_read_in_any_pieces_gives_the_answers_a_full_rescan_gives(seed):
    rng = random.Random(seed)
    stream = b"".join(
        rng.choice([b"{", b"x", b" ", b"\t", b"\n", b"\n\n", b"\xff"]) for _ in range(300)
    )
    resumable, oracle = AnswerBuffer(), bytearray()
    at = 0
    while at < len(stream):
        piece = stream[at : at + rng.randint(1, 9)]
        at += len(piece)
        resumable.feed(piece)
        oracle.extend(piece)
        while True:
            expected = rescanning_take(oracle)
            assert resumable.take() == expected
            if expected is None:
                break
        assert bytes(resumable) == bytes(oracle)


def test_a_request_the_repl_does_not_read_fails_as_a_timeout_instead_of_blocking():
    # A REPL that never reads stdin: the pipe (64 KiB) fills, and a blocking write would wait
    # for good. The request's timeout covers the write.
    process = ReplProcess(["sh", "-c", "exec sleep 60"], sandbox=False)
    process.start()
    try:
        with pytest.raises(ReplFailure) as failure:
            process.send({"cmd": "x" * 1_000_000}, 1.0)
        assert failure.value.kind == "timeout"
        assert "request was not taken" in str(failure.value)
        assert not process.alive
    finally:
        process.kill()


def test_the_repl_runs_in_its_workspace(tmp_path):
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    process = ReplProcess(DOUBLE, cwd=workspace, sandbox=False)
    process.start()
    try:
        assert probe(process)["cwd"] == str(workspace)
    finally:
        process.close()


def _pipe_answer_within(argv, seconds):
    """What a reader of a plain pipe gets for `import Mathlib` within `seconds` (today's
    reading before the terminal: `select` on the REPL's stdout pipe)."""
    import select
    import subprocess

    child = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        child.stdin.write(b'{"cmd": "import Mathlib"}\n\n')
        child.stdin.flush()
        ready, _, _ = select.select([child.stdout], [], [], seconds)
        return os.read(child.stdout.fileno(), 1 << 16) if ready else b""
    finally:
        child.kill()
        child.wait()


@pytest.mark.slow
def test_a_pipe_reader_waits_on_the_pinned_repls_unflushed_answer_the_terminal_reader_does_not():
    # The double writes as the pinned REPL does: IO.println, never flushed, 4 KiB blocks on a
    # pipe. Read from a pipe, its answer of a few dozen bytes never comes.
    assert _pipe_answer_within(DOUBLE, 2.0) == b""
    # A REPL that flushes each answer (since 4fc1e6d) is answered through the same pipe.
    assert b'"env": 0' in _pipe_answer_within([*DOUBLE, "--flush-each"], 10.0)
    assert _terminal_answer(DOUBLE)["env"] == 0


def test_the_terminal_reader_gets_a_flushing_repls_answers_too():
    assert _terminal_answer([*DOUBLE, "--flush-each"])["env"] == 0


def _terminal_answer(argv):
    process = ReplProcess(argv, sandbox=False)
    process.start()
    try:
        return process.send({"cmd": "import Mathlib"}, 10)
    finally:
        process.close()


def test_the_terminal_passes_newlines_as_they_are_written():
    # Raw mode: no output processing, so `\n` never arrives as `\r\n`. The writer stays alive:
    # once the terminal's last writer has exited, Linux may answer EIO before the bytes arrive.
    process = ReplProcess(["sh", "-c", "printf 'a\\nb\\n'; sleep 30"], sandbox=False)
    process.start()
    try:
        received = b""
        while len(received) < 4:
            received += os.read(process._stdout_fd, 64)
        assert received == b"a\nb\n"
    finally:
        process.kill()


def test_an_answer_far_larger_than_the_terminals_buffer_arrives_whole(tmp_path):
    data = "x" * 2_000_000
    rules = tmp_path / "rules.json"
    rules.write_text(
        json.dumps(
            [
                {
                    "match": {"substring": "big"},
                    "reply": {"messages": [{"severity": "info", "data": data}]},
                }
            ]
        )
    )
    process = ReplProcess([*DOUBLE, "--rules", str(rules)], sandbox=False)
    process.start()
    try:
        answer = process.send({"cmd": "big"}, 30)
        assert answer["messages"][0]["data"] == data
    finally:
        process.close()


def test_the_repl_runs_with_malloc_arenas_bounded(repl):
    assert probe(repl())["malloc_arena_max"] == MALLOC_ARENA_MAX == "2"


def test_a_warmed_repls_memory_report_names_its_largest_address_space_and_resident_memory(repl):
    process = repl("--import-memory-mb", "96")
    before = process.memory_report()
    process.send({"cmd": "import Mathlib"}, 30)
    after = process.memory_report()
    assert after["resident_mb"] - before["resident_mb"] > 90
    assert after["address_space_mb"] >= after["resident_mb"] - 1
    # in MiB: the double's address space (Python, 96 MiB held) is far under a GiB, not bytes
    largest = max(p.memory_info().vms for p in process._tree()) / (1 << 20)
    assert after["address_space_mb"] == pytest.approx(largest, abs=16) and largest < 1024


@pytest.mark.parametrize("processes", [1, 2], ids=["alone", "beside_another"])
def test_mapped_olean_pages_are_not_a_repls_own_memory_and_a_second_import_is(
    repl, tmp_path, processes
):
    # Alone, the mapped pages are private to the REPL (psutil's USS would count them); beside
    # another they are shared: its own memory is the same either way.
    olean = ["--import-memory-mb", "96", "--olean-file", str(tmp_path / "mathlib.olean")]
    started = [repl(*olean) for _ in range(processes)]
    for process in started:
        process.send({"cmd": "import Mathlib"}, 30)
    measured = started[-1]
    warmed = measured.memory_report()
    assert warmed["mapped_mb"] >= 90 and warmed["anonymous_mb"] < warmed["resident_mb"] - 90
    measured.send({"cmd": "import Mathlib\nimport Aesop"}, 30)
    again = measured.memory_report()
    assert again["anonymous_mb"] - warmed["anonymous_mb"] > 90  # read into its own memory
    assert abs(again["mapped_mb"] - warmed["mapped_mb"]) < 10


# --- answers bound to their commands ---------------------------------------------------------


def printing(text: str) -> str:
    """A command whose code prints `text` to the REPL's stdout while it runs."""
    return f"--@fake print {json.dumps(text)}\ntheorem a : True := trivial"


def test_env_ids_are_counted_from_zero_per_process_and_an_error_answer_takes_none(repl):
    process = repl()
    assert process.send({"cmd": "import Mathlib"}, 10) == {"env": 0}
    assert process.send({"cmd": "def f := 1", "env": 7}, 10) == {"message": "Unknown environment."}
    assert process.send({"cmd": "def f := 1", "env": 0}, 10) == {"env": 1}
    assert process.next_env == 2
    process.kill()
    process.start()
    assert process.next_env == 0


@pytest.mark.parametrize(
    ("printed", "detail"),
    [
        ('{"env": 5}\n\n', "an answer with env 5, expected 1"),
        ('{"env": 0}\n\n', "an answer with env 0, expected 1"),  # an id already given out
        ('{"env": true}\n\n', "an answer with env True, expected 1"),  # true == 1 in Python
        ('{"env": 1.0}\n\n', "an answer with env 1.0, expected 1"),
    ],
    ids=["ahead", "reused", "bool", "float"],
)
def test_an_answer_with_another_env_than_the_next_is_forged_output(repl, printed, detail):
    process = repl()
    process.send({"cmd": "import Mathlib"}, 10)
    with pytest.raises(ReplFailure) as failure:
        process.send({"cmd": printing(printed), "env": 0}, 10)
    assert (failure.value.kind, failure.value.detail) == ("forged_output", detail)
    assert not process.alive  # recycled: nothing it prints later is read


def test_a_printed_answer_with_the_next_env_passes_its_command_and_fails_the_canary(repl):
    """The env count alone cannot tell a guessed id: the canary's nonce can."""
    process = repl()
    process.send({"cmd": "import Mathlib"}, 10)
    assert process.send({"cmd": printing('{"env": 1}\n\n'), "env": 0}, 10) == {"env": 1}
    with pytest.raises(ReplFailure) as failure:
        process.canary(0, 10)
    # Lean's own answer to the command (env 1) is what came next, not the canary's (env 2).
    assert (failure.value.kind, failure.value.detail) == (
        "forged_output",
        "an answer with env 1, expected 2",
    )


def test_a_canary_answered_next_names_its_nonce_and_takes_the_next_env(repl):
    process = repl()
    process.send({"cmd": "import Mathlib"}, 10)
    process.send({"cmd": "theorem a : True := trivial", "env": 0}, 10)
    process.canary(0, 10)
    process.canary(0, 10)
    assert process.next_env == 4
    assert process.alive


def test_a_canary_answer_without_its_nonce_is_forged_output(tmp_path):
    # A REPL that answers every command cleanly, with the right env: as forged text would.
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps([{"match": {"substring": "canary_"}, "reply": {}}]))
    process = ReplProcess([*DOUBLE, "--rules", str(rules)], sandbox=False)
    process.start()
    try:
        process.send({"cmd": "import Mathlib"}, 10)
        with pytest.raises(ReplFailure) as failure:
            process.canary(0, 10)
        assert failure.value.kind == "forged_output"
        assert failure.value.detail == "the canary's answer was not Lean's: {'env': 1}"
    finally:
        process.close()


def test_text_a_command_prints_arrives_before_it_ends_as_on_the_real_repls_terminal(repl):
    """The double is no kinder than the REPL: what code prints is on the terminal while Lean is
    still elaborating, ahead of an answer that may never come."""
    process = repl()
    process.send({"cmd": "import Mathlib"}, 10)
    command = printing('{"env": 1}\n\n').replace("\ntheorem", "\n--@fake hang\ntheorem")
    assert process.send({"cmd": command, "env": 0}, 10) == {"env": 1}
    with pytest.raises(ReplFailure) as failure:
        process.canary(0, 1.0)
    assert failure.value.kind == "timeout"


# --- containment -----------------------------------------------------------------------------


def write_from_the_repl(process: ReplProcess, path: Path) -> dict:
    spec = {"path": str(path), "text": "forged verdict"}
    answer = process.send(
        {"cmd": f"--@fake write {json.dumps(spec)}\ntheorem a : True := trivial"}, 20
    )
    return json.loads(answer["messages"][0]["data"])


@pytest.mark.skipif(
    not containment().filesystem, reason=f"no filesystem sandbox here: {containment().how}"
)
def test_under_bwrap_a_proof_cannot_see_or_write_the_data_root_or_the_workspace(tmp_path):
    data_root, workspace = tmp_path / "data", tmp_path / "workspace"
    (data_root / "verdicts").mkdir(parents=True)
    workspace.mkdir()
    verdicts = data_root / "verdicts" / "verdicts.jsonl"
    verdicts.write_text("the real verdict\n")
    free = ReplProcess(DOUBLE, cwd=workspace, sandbox=False)
    boxed = ReplProcess(DOUBLE, cwd=workspace, sandbox=True, hidden=[data_root])
    for process in (free, boxed):
        process.start()
    try:
        # Uncontained, the same write goes through: the test's write is one that would land.
        assert write_from_the_repl(free, tmp_path / "control.txt")["written"] is True
        seen = write_from_the_repl(boxed, verdicts)
        assert (seen["existed"], seen["written"]) == (False, False)  # the folder is not there
        beside = write_from_the_repl(boxed, data_root / "manifest.json")
        assert beside["written"] is False and "Read-only file system" in beside["error"]
        assert verdicts.read_text() == "the real verdict\n"
        assert not (data_root / "manifest.json").exists()
        assert write_from_the_repl(boxed, workspace / "Main.lean")["written"] is False
        assert not (workspace / "Main.lean").exists()
        own_tmp = Path(probe(boxed)["tmpdir"]) / "scratch"
        assert write_from_the_repl(boxed, own_tmp)["written"] is True  # its private tmp
    finally:
        free.close()
        boxed.close()


@pytest.mark.skipif(not containment().filesystem, reason=f"no bwrap here: {containment().how}")
def test_a_sandboxed_repl_that_hangs_is_killed_with_everything_it_started(repl):
    process = repl(sandbox=True)
    process.send({"cmd": "import Mathlib"}, 10)
    tree = [p.pid for p in process._tree()]
    assert len(tree) == 3  # bwrap, its namespace's init, the REPL
    with pytest.raises(ReplFailure):
        process.send({"cmd": "--@fake hang\ntheorem a : True := trivial"}, 0.5)
    # The namespace's init is not our child: it may stay a zombie until the host's init reaps
    # it, holding no memory (`resident_mb` counts none). SIGKILL lands at once; a loaded host
    # may take a moment to tear a process down.
    deadline = time.monotonic() + 5
    while [pid for pid in tree if alive(pid)] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [pid for pid in tree if alive(pid)] == []


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.skipif(not containment().filesystem, reason=f"no bwrap here: {containment().how}")
def test_a_sandboxed_repl_whose_workspace_is_inside_the_data_root_runs_in_it(tmp_path):
    data_root = tmp_path / "data"
    workspace = data_root / "lean"
    workspace.mkdir(parents=True)
    process = ReplProcess(DOUBLE, cwd=workspace, sandbox=True, hidden=[data_root])
    process.start()
    try:
        assert probe(process)["cwd"] == str(workspace)
    finally:
        process.close()


def test_a_repls_tmpdir_is_private_to_its_user(repl):
    process = repl()
    assert stat.S_IMODE(Path(probe(process)["tmpdir"]).stat().st_mode) == 0o700


def test_under_a_cgroup_cap_the_repl_runs_under_the_prefix_without_an_address_space_limit(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(repl_module, "memory_limit", lambda: "cgroup")
    # A stand-in for systemd-run's scope: it marks the environment with the cap it was given.
    monkeypatch.setattr(repl_module, "cgroup_prefix", lambda mb: ["env", f"LEAN_PATH=capped-{mb}"])
    process = ReplProcess(DOUBLE, memory_cap_mb=512, sandbox=False)
    process.start()
    try:
        seen = probe(process)
    finally:
        process.close()
    assert seen["lean_path"] == "capped-512"
    assert seen["address_space_limit"] == resource.RLIM_INFINITY


def test_a_start_that_fails_to_spawn_raises_its_own_error_and_leaks_no_terminal(monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("no processes left")

    monkeypatch.setattr(repl_module, "spawn_tied", refuse)
    before = len(os.listdir("/proc/self/fd"))
    process = ReplProcess(DOUBLE, sandbox=False)
    with pytest.raises(OSError, match="no processes left"):
        process.start()
    assert len(os.listdir("/proc/self/fd")) == before


def test_a_request_whose_write_meets_a_full_pipe_once_is_written_whole(repl, monkeypatch):
    process = repl()
    stdin_fd = process._process.stdin.fileno()
    real_write, refused = os.write, []

    def full_once(fd, data):
        if fd == stdin_fd and not refused:
            refused.append(fd)
            raise BlockingIOError  # another writer filled the pipe between select and write
        return real_write(fd, data)

    monkeypatch.setattr(repl_module.os, "write", full_once)
    answer = process.send({"cmd": "theorem a : True := trivial"}, 10)
    assert refused and answer.get("env") == 0


class _GoneProcess:
    """A process of the tree that exited between the listing and the reading."""

    pid = 2**22 + 1  # above pid_max's default: no process has it

    def memory_info(self):
        raise psutil.NoSuchProcess(self.pid)


class _Process:
    def __init__(self, pid, rss, vms):
        self.pid, self._info = pid, SimpleNamespace(rss=rss, vms=vms)

    def memory_info(self):
        return self._info


MIB = 1 << 20


def test_the_memory_report_is_in_mib_to_a_tenth_and_skips_a_process_that_exited(monkeypatch):
    tree = [
        _GoneProcess(),
        _Process(1, rss=int(3.6 * MIB), vms=int(10.24 * MIB)),
        _Process(2, rss=int(1.01 * MIB), vms=int(7 * MIB)),
    ]
    anonymous = {1: int(1.01 * MIB), 2: int(0.33 * MIB)}

    def anonymous_bytes(process):
        if process.pid not in anonymous:
            raise psutil.NoSuchProcess(process.pid)
        return anonymous[process.pid]

    process = ReplProcess(DOUBLE)
    monkeypatch.setattr(process, "_tree", lambda: tree)
    monkeypatch.setattr(repl_module, "_anonymous_bytes", anonymous_bytes)
    # by hand: largest vms 10.24; rss 3.6 + 1.01 = 4.61; anonymous 1.01 + 0.33 = 1.34;
    # mapped 4.61 - 1.34 = 3.27 (each to a tenth, none a whole number of MiB)
    assert process.memory_report() == {
        "address_space_mb": 10.2,
        "resident_mb": 4.6,
        "anonymous_mb": 1.3,
        "mapped_mb": 3.3,
    }


def test_a_tree_whose_memory_is_all_its_own_has_nothing_mapped(monkeypatch):
    tree = [_Process(1, rss=int(2.5 * MIB), vms=int(9 * MIB))]
    process = ReplProcess(DOUBLE)
    monkeypatch.setattr(process, "_tree", lambda: tree)
    monkeypatch.setattr(repl_module, "_anonymous_bytes", lambda p: int(2.5 * MIB))
    assert process.memory_report()["mapped_mb"] == 0.0
