"""The pinned REPL's stdio as the simulated Lean speaks it: queries read and refused as the
REPL reads them, answers buffered as an unflushed C stdio `FILE *` buffers them."""

import os
import subprocess
import sys

import pytest

from prover_assets.verify.repl_stdio import CStdioStdout

SIMULATOR = [sys.executable, "-m", "prover_assets.verify.simulator"]


# As the pinned REPL's loop and `parse` (REPL/Main.lean 306-321, 283-303 at 7df77c0) answer.
@pytest.mark.parametrize(
    ("stdin", "answers", "code", "said"),
    [
        ('# note\n\n{"cmd": "import Mathlib"}\n\n', 1, 0, ""),
        ('-- note\n\n{"cmd": "import Mathlib"}\n\n', 1, 0, ""),
        ('  # note\n\n{"cmd": "import Mathlib"}\n\n', 0, 1, "Could not parse JSON"),
        ('{"cmd": "import Mathlib"}\n\n\n', 1, 1, "Could not parse JSON"),
        ('{"cmd": broken\n\n', 0, 1, "Could not parse JSON"),
        ('{"tactic": "rfl"}\n\n', 0, 1, "Could not parse as a valid JSON command"),
        ('{"cmd": 3}\n\n', 0, 1, "Could not parse as a valid JSON command"),
        ("[1]\n\n", 0, 1, "Could not parse as a valid JSON command"),
        ("", 0, 0, ""),
    ],
    ids=[
        "hash_comment",
        "dash_comment",
        "indented_comment_is_no_comment",
        "an_extra_blank_line",
        "no_json",
        "no_command",
        "cmd_not_a_string",
        "not_an_object",
        "eof",
    ],
)
def test_queries_are_read_and_refused_as_the_pinned_repl_reads_them(stdin, answers, code, said):
    done = subprocess.run(
        [*SIMULATOR, "--rule", "seeded_share", "--seed", "1"],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert len([c for c in done.stdout.split("\n\n") if c.strip()]) == answers
    assert done.returncode == code
    assert said in done.stderr
    if code:
        assert done.stderr.startswith('uncaught exception: {"message": ')


def drained(read_fd: int) -> bytes:
    os.set_blocking(read_fd, False)
    try:
        return os.read(read_fd, 1 << 16)
    except BlockingIOError:
        return b""


def test_into_a_pipe_only_whole_blocks_are_written_until_close():
    read_fd, write_fd = os.pipe()
    try:
        stdout = CStdioStdout(write_fd, block=8)
        stdout.write("abc\n\n")  # 5 bytes: less than a block
        assert drained(read_fd) == b""
        stdout.write("defghijklm")  # 15 bytes in all: one block of 8 goes out
        assert drained(read_fd) == b"abc\n\ndef"
        stdout.close()  # a normal exit writes what is left
        assert drained(read_fd) == b"ghijklm"
    finally:
        os.close(read_fd)
        os.close(write_fd)


def test_what_is_buffered_is_lost_when_the_process_is_killed():
    read_fd, write_fd = os.pipe()
    child = os.fork()
    if child == 0:  # the child writes less than a block and is killed before it closes
        os.close(read_fd)
        CStdioStdout(write_fd, block=4096).write('{"env": 0}\n\n')
        os.kill(os.getpid(), 9)
    os.close(write_fd)
    try:
        os.waitpid(child, 0)
        assert os.read(read_fd, 1 << 16) == b""
    finally:
        os.close(read_fd)
