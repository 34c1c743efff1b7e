"""`make lean-workspace` against stand-in elan, lake and git: the commands in order, a rerun
that resumes, the cache that is no longer served, and the pins read back."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from prover_assets.lean.workspace import (
    CACHE_ATTEMPTS,
    CACHE_DONE,
    NO_CACHE_ON_UPDATE,
    WorkspaceError,
    WorkspacePins,
    build_workspace,
    lakefile,
    main,
)
from prover_assets_tests.doubles.lean_tools import use_stand_ins
from prover_assets_tests.support import CONFIGS

PINS = WorkspacePins(lean_version="v4.9.0-rc1", mathlib_rev="d1d1e4b7", repl_rev="7df77c0a")


@pytest.fixture
def stand_ins(tmp_path, monkeypatch):
    """elan, lake and git on PATH, logging to one file; returns a reader of that log."""
    log = use_stand_ins(tmp_path, monkeypatch)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))

    def calls() -> list[str]:
        entries = [json.loads(line) for line in log.read_text().splitlines()]
        log.unlink()
        return [" ".join([entry["tool"], *entry["args"]]) for entry in entries]

    return calls


def test_a_bare_box_gets_the_toolchain_the_project_the_cache_and_the_repl_in_order(
    tmp_path, stand_ins
):
    folder = tmp_path / "workspace"
    pins = build_workspace(folder, PINS)
    assert stand_ins() == [
        "elan toolchain list",
        "elan toolchain install leanprover/lean4:v4.9.0-rc1",
        "lake update",
        "lake exe cache get",
        "lake build repl",
        f"git -C {folder}/.lake/packages/mathlib rev-parse HEAD",
        f"git -C {folder}/.lake/packages/REPL rev-parse HEAD",
    ]
    assert (folder / "lean-toolchain").read_text() == "leanprover/lean4:v4.9.0-rc1\n"
    assert (folder / "lakefile.lean").read_text() == (
        "import Lake\nopen Lake DSL\n\npackage prover_assets_workspace\n\n"
        'require mathlib from git\n  "https://github.com/leanprover-community/mathlib4"'
        ' @ "d1d1e4b7"\n\n'
        'require REPL from git\n  "https://github.com/leanprover-community/repl" @ "7df77c0a"\n'
    )
    assert (pins.lean_version, pins.mathlib_rev[:8], pins.repl_rev[:8]) == (
        "v4.9.0-rc1",
        "d1d1e4b7",
        "7df77c0a",
    )


def test_a_rerun_resumes_and_repeats_only_the_repl_build_and_the_checks(tmp_path, stand_ins):
    folder = tmp_path / "workspace"
    build_workspace(folder, PINS)
    stand_ins()
    build_workspace(folder, PINS)
    assert stand_ins() == [
        "elan toolchain list",
        "lake build repl",
        f"git -C {folder}/.lake/packages/mathlib rev-parse HEAD",
        f"git -C {folder}/.lake/packages/REPL rev-parse HEAD",
    ]


def test_a_cache_that_cannot_be_had_is_tried_three_times_then_mathlib_is_built(
    tmp_path, stand_ins, monkeypatch, capsys
):
    # Offline: Mathlib's post_update hook would fail `lake update` itself; the recipe turns the
    # hook's fetch off, tries its own three times, then builds.
    monkeypatch.setenv("STAND_IN_NO_CACHE", "1")
    build_workspace(tmp_path / "workspace", PINS, cache_retry_pause_s=0)
    calls = stand_ins()
    assert calls[calls.index("lake update") :][:6] == [
        "lake update",
        *["lake exe cache get"] * CACHE_ATTEMPTS,
        "lake build Mathlib",
        "lake build repl",
    ]
    out = capsys.readouterr().out
    assert "could not be had in 3 attempts" in out and "This takes hours" in out
    assert (tmp_path / "workspace" / CACHE_DONE).read_text() == "d1d1e4b7\n"


def test_a_download_cut_short_is_fetched_again_not_built(tmp_path, stand_ins, monkeypatch):
    monkeypatch.setenv("STAND_IN_CACHE_FAILS", "2")
    build_workspace(tmp_path / "workspace", PINS, cache_retry_pause_s=0)
    calls = stand_ins()
    assert calls.count("lake exe cache get") == 3
    assert "lake build Mathlib" not in calls


def test_offline_the_stand_ins_update_fails_without_the_variable_as_mathlibs_hook_makes_it(
    tmp_path, stand_ins, monkeypatch
):
    # The stand-in is no kinder than the pinned Mathlib's hook: the old recipe's bare
    # `lake update` fails offline; the recipe's passes.
    import subprocess

    monkeypatch.setenv("STAND_IN_NO_CACHE", "1")
    folder = tmp_path / "workspace"
    folder.mkdir()
    (folder / "lakefile.lean").write_text(lakefile(PINS))
    bare = subprocess.run(["lake", "update"], cwd=folder, capture_output=True, text=True)
    assert bare.returncode == 1 and "mathlib: failed to fetch cache" in bare.stderr
    assert subprocess.run([*NO_CACHE_ON_UPDATE, "lake", "update"], cwd=folder).returncode == 0


def test_a_toolchain_mathlibs_hook_changes_is_refused_naming_both(tmp_path, stand_ins, monkeypatch):
    monkeypatch.setenv("STAND_IN_MATHLIB_TOOLCHAIN", "leanprover/lean4:v4.10.0\n")
    with pytest.raises(WorkspaceError, match=r"asks for leanprover/lean4:v4.10.0 .* the pins say"):
        build_workspace(tmp_path / "workspace", PINS)


def test_a_package_checked_out_at_another_commit_is_refused(tmp_path, stand_ins, monkeypatch):
    monkeypatch.setenv("STAND_IN_HEAD", "f" * 40)
    with pytest.raises(WorkspaceError, match=r"mathlib is checked out at f{40}, the pins say d1d"):
        build_workspace(tmp_path / "workspace", PINS)


def test_without_elan_it_says_how_to_install_it(tmp_path, stand_ins):
    (tmp_path / "bin" / "elan").unlink()
    with pytest.raises(WorkspaceError, match="elan is not installed: install it from"):
        build_workspace(tmp_path / "workspace", PINS)


def write_config(tmp_path: Path, workspace: str, **local: object) -> Path:
    """configs/p2.yaml as shipped (its other placeholders left), its Lean workspace `workspace`
    and its pins `PINS`, with `local` set in its local Lean settings."""
    raw = yaml.safe_load((CONFIGS / "p2.yaml").read_text())
    settings = raw["resources"]["lean"]["config"]["settings"]["local"]
    settings.update(workspace=workspace, expected_pins=vars(PINS), **local)
    config = tmp_path / "p2.yaml"
    config.write_text(yaml.safe_dump(raw))
    return config


def test_a_config_without_all_three_pins_is_refused_naming_the_missing(tmp_path, capsys):
    config = write_config(tmp_path, str(tmp_path / "workspace"))
    raw = yaml.safe_load(config.read_text())
    del raw["resources"]["lean"]["config"]["settings"]["local"]["expected_pins"]["repl_rev"]
    config.write_text(yaml.safe_dump(raw))
    assert main(["--config", str(config)]) == 1
    assert "expected_pins lacks ['repl_rev']" in capsys.readouterr().err


def test_a_config_the_run_would_refuse_is_refused_here_too(tmp_path, capsys):
    config = write_config(tmp_path, str(tmp_path / "workspace"), memory_cap_mb=-1)
    assert main(["--config", str(config)]) == 1
    assert "memory_cap_mb" in capsys.readouterr().err


def test_make_lean_workspace_builds_reads_the_pins_back_and_passes_the_self_test(
    tmp_path, stand_ins, capsys
):
    config = write_config(tmp_path, str(tmp_path / "workspace"))
    assert main(["--config", str(config), "--self-test-budget-s", "10"]) == 0
    out = capsys.readouterr().out
    assert "pins read back: Lean v4.9.0-rc1, Mathlib d1d1e4b7" in out
    assert "self-test passed: known-good accepted" in out
    # The REPL started as the workers start it: the built binary with `lake env`'s variables,
    # read once; no `lake exe repl`, no Lake process above any REPL.
    assert "'via': \"the REPL binary with `lake env`'s environment\"" in out
    calls = stand_ins()
    assert "lake env env -0" in calls
    assert not any(call.startswith("lake exe repl") for call in calls)


def test_a_workspace_still_a_placeholder_is_refused_naming_the_key(tmp_path, stand_ins, capsys):
    config = write_config(tmp_path, "REPLACE_ME/lean/mathlib4-workspace")
    assert main(["--config", str(config)]) == 1
    assert "local.workspace is still 'REPLACE_ME/lean/mathlib4-workspace'" in (
        capsys.readouterr().err
    )


BUILD_ENV = "PROVER_LEAN_BUILD_DIR"


@pytest.mark.lean
@pytest.mark.skipif(
    not os.environ.get(BUILD_ENV),
    reason=f"set {BUILD_ENV} to a folder to build the registered workspace in (elan and the "
    "network needed; Mathlib's cache, or hours of build)",
)
def test_real_build_of_the_registered_workspace_reads_back_its_pins():
    config = Path(__file__).parents[2] / "configs/p2.yaml"
    assert main(["--config", str(config), "--workspace", os.environ[BUILD_ENV]]) == 0
