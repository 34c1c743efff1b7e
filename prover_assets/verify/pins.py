"""The verifier's pins, read from the Lean workspace itself: Lean version, Mathlib, REPL."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
from pathlib import Path

from prover_assets.records import Pins

__all__ = ["PinError", "check_expected_pins", "read_workspace_pins", "simulated_pins"]


class PinError(ValueError):
    """The workspace's toolchain is not the one the config expects."""

    pass


def _manifest_rev(manifest: dict, names: tuple[str, ...]) -> str | None:
    for package in manifest.get("packages", []):
        if str(package.get("name", "")).lower() in names:
            return package.get("rev")
    return None


def _git_head(folder: Path) -> str | None:
    try:
        result = subprocess.run(
            ["git", "-C", str(folder), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return result.stdout.strip() or None if result.returncode == 0 else None


def read_workspace_pins(workspace: Path) -> Pins:
    """Lean from `lean-toolchain`, Mathlib and the REPL from `lake-manifest.json` (the REPL may
    also be the workspace itself, as in Kimina's layout: then its git HEAD)."""
    toolchain = workspace / "lean-toolchain"
    manifest_path = workspace / "lake-manifest.json"
    if not toolchain.is_file() or not manifest_path.is_file():
        raise PinError(
            f"{workspace} is not a Lean workspace (needs lean-toolchain and lake-manifest.json)"
        )
    lean_version = toolchain.read_text().strip().rsplit(":", 1)[-1]
    manifest = json.loads(manifest_path.read_text())
    mathlib = _manifest_rev(manifest, ("mathlib",))
    repl = _manifest_rev(manifest, ("repl",))
    if repl is None and (workspace / "REPL").is_dir():
        repl = _git_head(workspace)
    if mathlib is None or repl is None:
        raise PinError(
            f"{manifest_path}: cannot find the {'Mathlib' if mathlib is None else 'REPL'} "
            "revision; the verifier refuses to run without its pins"
        )
    return Pins(
        lean_version=lean_version,
        mathlib_rev=mathlib,
        repl_rev=repl,
        backend="local",
        simulated=False,
    )


def simulated_pins(description: str) -> Pins:
    """The pins of the simulated backend (labelled SIMULATED everywhere)."""
    return Pins(
        lean_version="SIMULATED",
        mathlib_rev="SIMULATED",
        repl_rev=f"SIMULATED ({description})",
        backend="simulated",
        simulated=True,
    )


def check_expected_pins(pins: Pins, expected: Mapping[str, str]) -> None:
    """Each expected pin must be a prefix of the actual one (commits may be abbreviated)."""
    for name, value in expected.items():
        actual = getattr(pins, name, None)
        if actual is None:
            raise PinError(f"unknown pin {name!r}; pins are lean_version, mathlib_rev, repl_rev")
        if not str(actual).startswith(value):
            raise PinError(
                f"the workspace has {name} {actual}, the config expects {value}: this is not "
                "the registered verifier"
            )
