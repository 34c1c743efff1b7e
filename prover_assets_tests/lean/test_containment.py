"""Containment: the argv each mechanism gives a REPL, the fallbacks and what they record, and
the probe's bound and its reasons."""

import functools
import os
import shutil
from pathlib import Path

import pytest

import prover_assets.lean.containment as containment_module


def test_bwrap_gets_no_network_a_read_only_root_a_private_tmpdir_and_the_data_root_emptied(
    tmp_path,
):
    data_root, workspace = tmp_path / "data", tmp_path / "data" / "lean"
    workspace.mkdir(parents=True)
    argv = containment_module.bwrap_argv(
        ["lake", "exe", "repl"],
        tmpdir=Path("/tmp/lean-repl-x"),
        hidden=[data_root, tmp_path / "absent"],
        cwd=workspace,
    )
    assert argv == [
        "bwrap",
        *("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"),
        *("--unshare-net", "--unshare-ipc", "--unshare-pid", "--die-with-parent"),
        *("--tmpfs", str(data_root)),
        *("--ro-bind", str(workspace), str(workspace)),  # a workspace inside it comes back
        *("--remount-ro", str(data_root)),
        *("--bind", "/tmp/lean-repl-x", "/tmp/lean-repl-x"),
        *("--chdir", str(workspace)),
        *("--", "lake", "exe", "repl"),
    ]  # an absent folder is not mounted over: there is nothing in it to hide


def fresh_containment(monkeypatch, path: str) -> containment_module.Containment:
    """This host's containment probed anew with `path` as PATH (not the session's cached one)."""
    monkeypatch.setenv("PATH", path)
    fresh = functools.cache(containment_module.containment.__wrapped__)
    monkeypatch.setattr(containment_module, "containment", fresh)
    return fresh()


@pytest.mark.skipif(os.geteuid() != 0, reason="the stand-ins run `unshare --net`, which needs root")
def test_without_bwrap_the_network_alone_is_contained_and_the_record_says_why(
    tmp_path, monkeypatch
):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("unshare", "true"):  # `true`: what the probe runs
        (bin_dir / tool).symlink_to(shutil.which(tool))
    absent = fresh_containment(monkeypatch, str(bin_dir))
    assert absent == containment_module.Containment(
        "unshare", True, False, "unshare --net: the network only (bwrap is not installed)"
    )
    (bin_dir / "bwrap").write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n"
    )
    (bin_dir / "bwrap").chmod(0o755)
    refused = fresh_containment(monkeypatch, str(bin_dir))
    assert refused.how == (
        "unshare --net: the network only "
        "(bwrap refused: bwrap: No permissions to create new namespace)"
    )
    assert containment_module.describe_containment(True)["mechanism"] == "unshare"


def test_a_sandbox_off_in_the_config_is_recorded_as_none():
    assert containment_module.describe_containment(False) == {
        "mechanism": "none",
        "network": False,
        "filesystem": False,
        "how": "off in config",
    }


def test_a_workspace_outside_every_hidden_folder_is_not_bound_back(tmp_path):
    data_root, workspace = tmp_path / "data", tmp_path / "workspace"
    data_root.mkdir()
    workspace.mkdir()
    argv = containment_module.bwrap_argv(
        ["repl"], tmpdir=tmp_path / "t", hidden=[data_root], cwd=workspace
    )
    assert "--ro-bind" not in argv[argv.index("--tmpfs") :]  # `/` read-only shows it already
    assert argv[argv.index("--chdir") + 1] == str(workspace)


@pytest.mark.parametrize(
    ("mechanism", "euid", "expected"),
    [
        ("unshare", 0, ["unshare", "--net", "--", "repl"]),
        ("unshare", 1000, ["unshare", "--user", "--map-root-user", "--net", "--", "repl"]),
        ("none", 1000, ["repl"]),
    ],
)
def test_the_argv_under_each_containment_is_the_mechanisms_own(
    monkeypatch, tmp_path, mechanism, euid, expected
):
    monkeypatch.setattr(
        containment_module,
        "containment",
        lambda: containment_module.Containment(mechanism, False, False, ""),
    )
    monkeypatch.setattr(containment_module.os, "geteuid", lambda: euid)
    argv = containment_module.contained_argv(["repl"], tmpdir=tmp_path, hidden=[], cwd=None)
    assert argv == expected


def test_under_bwrap_the_argv_is_bwraps_for_the_same_folders_and_workspace(monkeypatch, tmp_path):
    monkeypatch.setattr(
        containment_module,
        "containment",
        lambda: containment_module.Containment("bwrap", True, True, ""),
    )
    data_root = tmp_path / "data"
    (data_root / "lean").mkdir(parents=True)
    argv = containment_module.contained_argv(
        ["repl"], tmpdir=tmp_path / "t", hidden=[data_root], cwd=data_root / "lean"
    )
    assert argv == containment_module.bwrap_argv(
        ["repl"], tmpdir=tmp_path / "t", hidden=[data_root], cwd=data_root / "lean"
    )
    assert argv[argv.index("--chdir") + 1] == str(data_root / "lean")


def test_a_probe_that_hangs_is_cut_at_its_bound_and_says_so(monkeypatch):
    monkeypatch.setattr(containment_module, "_PROBE_TIMEOUT_S", 0.3)
    reason = containment_module._probe(["sleep", "3"])
    assert reason is not None and "timed out after 0.3 seconds" in reason


def test_a_probe_that_cannot_run_names_why(tmp_path):
    reason = containment_module._probe([str(tmp_path / "no-such-tool")])
    assert reason is not None and "No such file or directory" in reason


def test_a_refused_probe_quotes_its_stderr_decoded_with_replacement_and_cut_at_200(tmp_path):
    script = tmp_path / "refuse"
    script.write_bytes(
        b"#!/bin/sh\nprintf 'bwrap: \\377 ' >&2\nhead -c 300 /dev/zero | tr '\\0' x >&2\nexit 1\n"
    )
    script.chmod(0o755)
    reason = containment_module._probe([str(script)])
    assert reason == ("bwrap: \ufffd " + "x" * 300)[:200]


def test_a_refused_probe_without_stderr_gives_its_exit_code(tmp_path):
    assert containment_module._probe(["sh", "-c", "exit 3"]) == "exit 3"
