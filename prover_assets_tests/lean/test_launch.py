"""The REPL started directly: the workspace's binary with `lake env`'s variables, no Lake
process above it; any other command as given."""

import os

import psutil
import pytest

from prover_assets.lean.launch import (
    LAKE_EXE_REPL,
    REPL_BINARY,
    LaunchError,
    parse_environment,
    repl_launch,
)
from prover_assets.lean.repl import ReplProcess
from prover_assets_tests.doubles.lean_tools import use_stand_ins
from prover_assets_tests.lean_double import probe


def test_env_dash_0_output_is_read_entry_by_entry_whatever_the_values_hold():
    output = b"LEAN_PATH=/a:/b\0NOTE=two\nlines=and an equals\0EMPTY=\0"
    assert parse_environment(output) == {
        "LEAN_PATH": "/a:/b",
        "NOTE": "two\nlines=and an equals",
        "EMPTY": "",
    }


def test_an_entry_without_a_name_is_refused():
    with pytest.raises(LaunchError, match="without a name"):
        parse_environment(b"LEAN_PATH=/a\0garbage\0")


def test_a_custom_command_runs_as_given(tmp_path):
    launch = repl_launch(["python3", "-m", "my_repl"], tmp_path)
    assert (launch.argv, launch.env, launch.direct) == (("python3", "-m", "my_repl"), {}, False)
    assert launch.cwd == tmp_path
    assert launch.record() == {"via": "command", "argv": ["python3", "-m", "my_repl"]}


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    """A workspace the stand-in `lake` built (its REPL binary runs the double)."""
    use_stand_ins(tmp_path, monkeypatch)
    folder = tmp_path / "workspace"
    folder.mkdir()
    return folder


def test_an_unbuilt_repl_says_to_build_the_workspace(workspace):
    with pytest.raises(LaunchError, match="not a built REPL: run `make lean-workspace`"):
        repl_launch(LAKE_EXE_REPL, workspace)


def test_lake_exe_repl_becomes_the_binary_with_lakes_variables_and_no_lake_above_it(workspace):
    import subprocess

    subprocess.run(["lake", "build", "repl"], cwd=workspace, check=True)
    launch = repl_launch(LAKE_EXE_REPL, workspace)
    assert launch.direct and launch.argv == (str(workspace / REPL_BINARY),)
    assert launch.env["LEAN_PATH"].startswith(str(workspace / ".lake/packages/mathlib"))
    assert launch.record()["lean_sysroot"] == launch.env["LEAN_SYSROOT"]
    process = ReplProcess(launch.argv, cwd=workspace, sandbox=False, extra_env=launch.env)
    process.start()
    try:
        seen = probe(process)
        tree = [psutil.Process(process.pid), *psutil.Process(process.pid).children(True)]
        commands = [p.cmdline() for p in tree]
    finally:
        process.close()
    assert seen["lean_path"] == launch.env["LEAN_PATH"]
    # the REPL itself (the double, which the binary execs), this process's child: no Lake
    assert len(tree) == 1 and commands[0][1:3] == ["-m", "prover_assets_tests.doubles.lean_repl"]


def test_a_lake_env_that_fails_is_said_with_its_message(workspace, monkeypatch):
    import subprocess

    subprocess.run(["lake", "build", "repl"], cwd=workspace, check=True)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(LaunchError, match=r"`lake env` in .* did not run"):
        repl_launch(LAKE_EXE_REPL, workspace)


def test_an_empty_entry_is_skipped_and_bytes_that_are_not_utf8_survive():
    output = b"A=1\0\0B=\xff\0"
    assert parse_environment(output) == {"A": "1", "B": "\udcff"}


def test_an_entry_without_a_name_is_quoted_to_80_bytes():
    entry = b"x" * 100
    with pytest.raises(LaunchError) as refused:
        parse_environment(entry + b"\0")
    assert str(refused.value) == (
        f"`lake env env -0` printed an entry without a name: {entry[:80]!r}"
    )


def lake_printing(folder, body: str):
    """A `lake` whose `lake env env -0` runs `body` (a shell script) instead."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "lake"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    return folder


@pytest.fixture
def built(tmp_path):
    binary = tmp_path / "workspace" / REPL_BINARY
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    return tmp_path / "workspace"


def test_lakes_variables_are_those_it_adds_or_changes_and_the_two_imports_need_always(
    tmp_path, built, monkeypatch
):
    monkeypatch.setenv("LEAN_PATH", "/same")
    monkeypatch.setenv("KEPT", "as-is")
    body = "printf 'LEAN_PATH=/same\\0LEAN_SYSROOT=/root\\0KEPT=as-is\\0NEW=1\\0'\n"
    monkeypatch.setenv("PATH", f"{lake_printing(tmp_path / 'bin', body)}:{os.environ['PATH']}")
    launch = repl_launch(LAKE_EXE_REPL, built)
    assert dict(launch.env) == {"LEAN_PATH": "/same", "LEAN_SYSROOT": "/root", "NEW": "1"}
    assert launch.cwd == built
    assert launch.record() == {
        "via": "the REPL binary with `lake env`'s environment",
        "binary": str(built / REPL_BINARY),
        "lean_path": "/same",
        "lean_sysroot": "/root",
    }


def test_a_lake_env_that_sets_no_lean_path_is_refused_naming_what_is_missing(
    tmp_path, built, monkeypatch
):
    body = "printf 'OTHER=1\\0'\n"
    monkeypatch.setenv("PATH", f"{lake_printing(tmp_path / 'bin', body)}:{os.environ['PATH']}")
    with pytest.raises(LaunchError) as refused:
        repl_launch(LAKE_EXE_REPL, built)
    assert str(refused.value) == f"`lake env` in {built} sets no LEAN_PATH, LEAN_SYSROOT"


def test_a_lake_env_that_fails_is_refused_with_the_end_of_its_message(tmp_path, built, monkeypatch):
    noise = "y" * 600
    body = (
        f"echo first line >&2\necho '{noise}' >&2\n"
        "printf 'error: no such package \\377\\n' >&2\nexit 3\n"
    )
    monkeypatch.setenv("PATH", f"{lake_printing(tmp_path / 'bin', body)}:{os.environ['PATH']}")
    with pytest.raises(LaunchError) as refused:
        repl_launch(LAKE_EXE_REPL, built)
    tail = f"first line\n{noise}\nerror: no such package \ufffd"[-500:]  # not UTF-8: replaced
    assert str(refused.value) == (
        f"`lake env env -0` in {built} exited 3: {tail}; is it a built workspace? "
        "(`make lean-workspace`)"
    )


def test_a_lake_env_that_hangs_is_refused_after_its_timeout(tmp_path, built, monkeypatch):
    import prover_assets.lean.launch as launch_module

    monkeypatch.setattr(launch_module, "_LAKE_ENV_TIMEOUT_S", 0.5)
    body = "exec sleep 30\n"
    monkeypatch.setenv("PATH", f"{lake_printing(tmp_path / 'bin', body)}:{os.environ['PATH']}")
    with pytest.raises(LaunchError, match=r"did not run: .*timed out after 0\.5 seconds"):
        repl_launch(LAKE_EXE_REPL, built)
