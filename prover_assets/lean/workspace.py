"""Build the registered Lean workspace on a bare Linux box: `make lean-workspace`.

Steps, each printed with the command it runs, each skipped when its result is already there
(so a rerun resumes where a failure or a kill stopped it):

1. elan: an existing install (`elan` on PATH, or `~/.elan/bin/elan`); none is downloaded;
2. the toolchain the pins name (`elan toolchain install leanprover/lean4:<lean_version>`);
3. a lake project requiring Mathlib and the REPL at their pinned commits (`lean-toolchain`,
   `lakefile.lean`), then `lake update` to fetch them and write `lake-manifest.json`, under
   `MATHLIB_NO_CACHE_ON_UPDATE=1`: Mathlib's `post_update` hook would otherwise run `cache get`
   inside `lake update` (and fail it where the cache cannot be had, before step 4's fallback);
   the hook also copies Mathlib's `lean-toolchain` over the workspace's, which is read back;
4. `lake exe cache get` (Mathlib's prebuilt `.olean`s for that commit), up to
   `CACHE_ATTEMPTS` times; where the cache cannot be had, `lake build Mathlib`, which takes
   hours;
5. `lake build repl`: a root `lake build` does not build a dependency's executable; the
   workers start that binary directly with `lake env`'s environment (`lean/launch.py`);
6. the pins read back (`read_workspace_pins`, and each package's git HEAD) and compared with
   `expected_pins`, then the verifier's self-test on one REPL of the workspace, started as the
   workers start it.

`python -m prover_assets.lean.workspace --config configs/p2.yaml [--workspace DIR]`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path

from prover_assets.config import (
    ConfigError,
    LocalLeanSettings,
    is_placeholder,
    load_run_config,
)
from prover_assets.lean.launch import LaunchError
from prover_assets.lean.protocol import GOEDEL_HEADER
from prover_assets.records import Pins, publish_text
from prover_assets.verify.backends import LocalReplBackend
from prover_assets.verify.pins import PinError, check_expected_pins, read_workspace_pins
from prover_assets.verify.self_test import self_test

__all__ = [
    "WorkspaceError",
    "WorkspacePins",
    "build_workspace",
    "lakefile",
    "local_lean_settings",
    "main",
    "workspace_pins",
]

MATHLIB_GIT = "https://github.com/leanprover-community/mathlib4"
REPL_GIT = "https://github.com/leanprover-community/repl"
# Written once `lake exe cache get` (or the build it fell back to) has finished.
CACHE_DONE = ".lake/prover_assets_mathlib_ready"
# `lake exe cache get` tries before building Mathlib instead: a download cut short is common,
# a cache that is not served stays so.
CACHE_ATTEMPTS = 3
CACHE_RETRY_PAUSE_S = 30.0
# Mathlib's post_update hook runs `cache get` inside `lake update` unless this is "1".
NO_CACHE_ON_UPDATE = ("env", "MATHLIB_NO_CACHE_ON_UPDATE=1")


class WorkspaceError(RuntimeError):
    """A step that cannot go on; the message says what to do."""


@dataclass(frozen=True)
class WorkspacePins:
    """What the workspace is built at: `expected_pins` of the config."""

    lean_version: str
    mathlib_rev: str
    repl_rev: str

    @property
    def toolchain(self) -> str:
        return f"leanprover/lean4:{self.lean_version}"


WORKSPACE_PINS = tuple(f.name for f in fields(WorkspacePins))


def lakefile(pins: WorkspacePins) -> str:
    """The workspace's `lakefile.lean`: Mathlib and the REPL at their pinned commits."""
    return (
        "import Lake\nopen Lake DSL\n\n"
        "package prover_assets_workspace\n\n"
        f'require mathlib from git\n  "{MATHLIB_GIT}" @ "{pins.mathlib_rev}"\n\n'
        f'require REPL from git\n  "{REPL_GIT}" @ "{pins.repl_rev}"\n'
    )


Runner = Callable[[Sequence[str], Path | None], int]


def _run_printed(command: Sequence[str], cwd: Path | None) -> int:
    """Run `command` with its output on this terminal (lake's progress shows as it comes)."""
    where = f" (in {cwd})" if cwd else ""
    print(f"$ {' '.join(command)}{where}", flush=True)
    return subprocess.run(list(command), cwd=cwd, check=False).returncode


def _elan() -> str:
    found = shutil.which("elan") or str(Path.home() / ".elan/bin/elan")
    if not Path(found).is_file():
        raise WorkspaceError(
            "elan is not installed: install it from your distribution (`apt-get install elan` "
            "on Debian 13 and later) or from https://github.com/leanprover/elan, then rerun "
            "`make lean-workspace`"
        )
    return found


def _toolchain_installed(elan: str, toolchain: str) -> bool:
    print(f"$ {elan} toolchain list", flush=True)
    listed = subprocess.run(
        [elan, "toolchain", "list"], capture_output=True, text=True, check=False
    )
    return any(line.split()[0] == toolchain for line in listed.stdout.splitlines() if line.strip())


def _write_if_changed(path: Path, text: str) -> bool:
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return False
    publish_text(path, text)
    print(f"wrote {path}", flush=True)
    return True


def _manifest_matches(folder: Path, pins: WorkspacePins) -> bool:
    try:
        found = read_workspace_pins(folder)
    except (PinError, ValueError):
        return False
    return (
        found.mathlib_rev.startswith(pins.mathlib_rev)
        and found.repl_rev.startswith(pins.repl_rev)
        and (folder / ".lake/packages/mathlib").is_dir()
        and (folder / ".lake/packages/REPL").is_dir()
    )


def _checked_out(folder: Path, package: str) -> str:
    head = subprocess.run(
        ["git", "-C", str(folder / ".lake/packages" / package), "rev-parse", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    if head.returncode != 0:
        raise WorkspaceError(f"{package}: git rev-parse HEAD failed: {head.stderr.strip()}")
    return head.stdout.strip()


def _step(run: Runner, command: Sequence[str], cwd: Path | None, what_to_do: str) -> None:
    code = run(command, cwd)
    if code != 0:
        raise WorkspaceError(f"`{' '.join(command)}` exited {code}: {what_to_do}")


def _fetch_mathlib(folder: Path, pins: WorkspacePins, run: Runner, pause_s: float) -> None:
    """Mathlib's prebuilt `.olean`s, or, where the cache cannot be had, a build from source."""
    if (folder / CACHE_DONE).is_file():
        print("Mathlib's .olean files: in place", flush=True)
        return
    for attempt in range(1, CACHE_ATTEMPTS + 1):
        if run(["lake", "exe", "cache", "get"], folder) == 0:
            break
        if attempt < CACHE_ATTEMPTS:
            print(
                f"`lake exe cache get` failed (attempt {attempt} of {CACHE_ATTEMPTS}); "
                f"again in {pause_s:g} s",
                flush=True,
            )
            time.sleep(pause_s)
    else:
        print(
            f"Mathlib's cache for {pins.mathlib_rev} could not be had in {CACHE_ATTEMPTS} "
            "attempts (no network, or no longer served): building Mathlib from source instead. "
            "This takes hours (about three on 16 cores) and the same disk as the cache; a "
            "rerun resumes the build.",
            flush=True,
        )
        _step(run, ["lake", "build", "Mathlib"], folder, "Mathlib did not build")
    publish_text(folder / CACHE_DONE, pins.mathlib_rev + "\n")


def _update(folder: Path, pins: WorkspacePins, run: Runner) -> None:
    """`lake update` without the cache download Mathlib's hook would start, then the toolchain
    the hook copied from Mathlib read back against the pins."""
    _step(
        run,
        [*NO_CACHE_ON_UPDATE, "lake", "update"],
        folder,
        "lake could not fetch Mathlib and the REPL",
    )
    toolchain = (folder / "lean-toolchain").read_text(encoding="utf-8").strip()
    if toolchain != pins.toolchain:
        raise WorkspaceError(
            f"Mathlib {pins.mathlib_rev} asks for {toolchain} (its post_update hook wrote it "
            f"to {folder / 'lean-toolchain'}), the pins say {pins.toolchain}: pin the Lean "
            "version Mathlib's lean-toolchain names at that commit"
        )


def build_workspace(
    folder: Path,
    pins: WorkspacePins,
    run: Runner = _run_printed,
    *,
    cache_retry_pause_s: float = CACHE_RETRY_PAUSE_S,
) -> Pins:
    """Build (or finish building) the workspace in `folder`; returns the pins read back."""
    elan = _elan()
    print(f"elan: {elan}", flush=True)
    if _toolchain_installed(elan, pins.toolchain):
        print(f"toolchain {pins.toolchain}: installed", flush=True)
    else:
        _step(
            run,
            [elan, "toolchain", "install", pins.toolchain],
            None,
            "elan could not install the toolchain (network? disk?); rerun once fixed",
        )
    folder.mkdir(parents=True, exist_ok=True)
    changed = _write_if_changed(folder / "lean-toolchain", pins.toolchain + "\n")
    changed |= _write_if_changed(folder / "lakefile.lean", lakefile(pins))
    if changed or not _manifest_matches(folder, pins):
        _update(folder, pins, run)
    _fetch_mathlib(folder, pins, run, cache_retry_pause_s)
    _step(run, ["lake", "build", "repl"], folder, "the REPL did not build")
    found = read_workspace_pins(folder)
    check_expected_pins(found, vars(pins))
    for package, rev in (("mathlib", pins.mathlib_rev), ("REPL", pins.repl_rev)):
        head = _checked_out(folder, package)
        if not head.startswith(rev):
            raise WorkspaceError(
                f"{package} is checked out at {head}, the pins say {rev}: run `lake update` "
                "in the workspace, or remove .lake/packages and rerun"
            )
    print(
        f"pins read back: Lean {found.lean_version}, Mathlib {found.mathlib_rev}, "
        f"REPL {found.repl_rev}",
        flush=True,
    )
    return found


def run_self_test(folder: Path, pins: Pins, command: Sequence[str], budget_s: float) -> bool:
    """The verifier's self-test on one REPL of the workspace; prints its outcome."""
    print(f"$ {' '.join(command)} (in {folder}): the verifier's self-test", flush=True)
    backend = LocalReplBackend(
        command, pins=pins, workers=1, cwd=folder, check_timeout_s=budget_s, warm_spare=False
    )
    print(f"the REPL starts as: {backend.launch.record()}", flush=True)
    with backend:
        outcome = self_test(backend, budget_s, GOEDEL_HEADER.strip())
    print(f"self-test {'passed' if outcome.passed else 'FAILED'}: {outcome.description}")
    return outcome.passed


def local_lean_settings(config: Path) -> LocalLeanSettings:
    """The local Lean backend's settings of the run config `config`, read and validated as every
    run reads them (`config.load_run_config`); another backend is refused saying so."""
    lean = load_run_config(config).lean
    if not isinstance(lean, LocalLeanSettings):
        raise WorkspaceError(
            f"{config}: resources.lean.config.settings.backend is {lean.backend!r}; a workspace "
            "is built for the local Lean backend"
        )
    return lean


def workspace_pins(config: Path, expected: Mapping[str, str]) -> WorkspacePins:
    """The pins to build at: the config's `expected_pins`, every one of them named."""
    if missing := [name for name in WORKSPACE_PINS if name not in expected]:
        raise WorkspaceError(
            f"{config}: resources.lean.config.settings.local.expected_pins lacks {missing}; a "
            "workspace is built at all three"
        )
    return WorkspacePins(**{name: expected[name] for name in WORKSPACE_PINS})


def main(argv: list[str] | None = None) -> int:
    """`make lean-workspace`: build the config's Lean workspace (or `--workspace`) at its pins
    and self-test the REPL in it; exit 0 when it verifies."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=Path("configs/p2.yaml"))
    parser.add_argument("--workspace", type=Path, help="instead of the config's `workspace`")
    parser.add_argument("--self-test-budget-s", type=float, default=300.0)
    args = parser.parse_args(argv)
    try:
        settings = local_lean_settings(args.config)
        folder = args.workspace or Path(settings.workspace)
        if args.workspace is None and is_placeholder(settings.workspace):
            raise WorkspaceError(
                f"{args.config}: resources.lean.config.settings.local.workspace is still "
                f"{settings.workspace!r}; fill it in or pass WORKSPACE=<dir>"
            )
        pins = workspace_pins(args.config, settings.expected_pins)
        found = build_workspace(folder.resolve(), pins)
        passed = run_self_test(folder.resolve(), found, settings.command, args.self_test_budget_s)
    except (WorkspaceError, ConfigError, PinError, LaunchError) as exc:
        print(f"make lean-workspace: {exc}", file=sys.stderr)
        return 1
    print(f"workspace ready: {folder.resolve()}" if passed else "workspace NOT ready")
    return 0 if passed else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
