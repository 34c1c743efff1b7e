"""The REPL started directly: the workspace's binary with `lake env`'s variables, no Lake
process above it; any other command as given."""

import json
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
from prover_assets_tests.doubles.lean_tools import install_stand_ins
from prover_assets_tests.lean_double import probe, working_instrument


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
    assert launch.record() == {"via": "command", "argv": ["python3", "-m", "my_repl"]}


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    """A workspace the stand-in `lake` built (its REPL binary runs the double)."""
    bin_dir = install_stand_ins(tmp_path / "bin")
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps(working_instrument()))
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("STAND_IN_LOG", str(tmp_path / "calls.jsonl"))
    monkeypatch.setenv("STAND_IN_STATE", str(tmp_path / "state"))
    monkeypatch.setenv("STAND_IN_REPL_RULES", str(rules))
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
