"""How a REPL process is started: the REPL binary itself, with the workspace's environment.

`lake exe repl` spawns the REPL as its child and waits: every worker would carry a Lake process
(its memory counted in the worker's), every restart would reload the workspace and re-check the
build, and anything Lake printed before the first answer would be read as the answer. Kimina's
server and LeanInteract start the binary with the environment Lake gives instead; so does this.
The environment is read once per backend from `lake env env -0` in the workspace (Lake runs the
command with `LEAN_PATH`, `LEAN_SYSROOT`, `PATH` and the shared-library path set as for
`lake exe`; `env -0` prints them NUL-separated, so no value can split a line), and the binary is
where `lake build repl` puts a dependency's executable. A custom `command` is run as given.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "LAKE_EXE_REPL",
    "REPL_BINARY",
    "LaunchError",
    "ReplLaunch",
    "lake_environment",
    "parse_environment",
    "repl_launch",
]

LAKE_EXE_REPL = ("lake", "exe", "repl")
# Where Lake builds the REPL package's executable in a workspace that requires it.
REPL_BINARY = Path(".lake/packages/REPL/.lake/build/bin/repl")
# What the REPL cannot import Mathlib without.
REQUIRED = ("LEAN_PATH", "LEAN_SYSROOT")
_LAKE_ENV_TIMEOUT_S = 300  # Lake loads the workspace's configuration: seconds, once


class LaunchError(RuntimeError):
    """The REPL cannot be started directly; the message says what to do."""


@dataclass(frozen=True)
class ReplLaunch:
    """The argv of a REPL process, its working folder, and the variables added to its
    environment (Lake's, for a direct start)."""

    argv: tuple[str, ...]
    cwd: Path | None
    env: Mapping[str, str] = field(default_factory=dict)
    direct: bool = False

    def record(self) -> dict[str, object]:
        """What a verdict's config records of it (the paths Lean imports from, not the whole
        environment)."""
        if not self.direct:
            return {"via": "command", "argv": list(self.argv)}
        return {
            "via": "the REPL binary with `lake env`'s environment",
            "binary": self.argv[0],
            **{name.lower(): self.env.get(name) for name in REQUIRED},
        }


def parse_environment(output: bytes) -> dict[str, str]:
    """`env -0`'s output: NUL-terminated `NAME=value` entries (a value may hold newlines)."""
    variables = {}
    for entry in output.split(b"\0"):
        if not entry:
            continue
        name, separator, value = entry.decode(errors="surrogateescape").partition("=")
        if not separator or not name:
            raise LaunchError(f"`lake env env -0` printed an entry without a name: {entry[:80]!r}")
        variables[name] = value
    return variables


def lake_environment(workspace: Path) -> dict[str, str]:
    """The variables `lake env` sets or changes in `workspace`, relative to this process's."""
    try:
        done = subprocess.run(
            ["lake", "env", "env", "-0"],
            cwd=workspace,
            capture_output=True,
            timeout=_LAKE_ENV_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LaunchError(f"`lake env` in {workspace} did not run: {exc}") from exc
    if done.returncode != 0:
        stderr = done.stderr.decode(errors="replace").strip()[-500:]
        raise LaunchError(
            f"`lake env env -0` in {workspace} exited {done.returncode}: {stderr}; "
            "is it a built workspace? (`make lean-workspace`)"
        )
    lake = parse_environment(done.stdout)
    missing = [name for name in REQUIRED if not lake.get(name)]
    if missing:
        raise LaunchError(f"`lake env` in {workspace} sets no {', '.join(missing)}")
    return {name: value for name, value in lake.items() if os.environ.get(name) != value} | {
        name: lake[name] for name in REQUIRED
    }


def repl_launch(command: Sequence[str], workspace: Path | None) -> ReplLaunch:
    """How to start the REPL `command` names: `lake exe repl` in a workspace becomes the built
    binary with Lake's environment; any other command runs as given."""
    if tuple(command) != LAKE_EXE_REPL or workspace is None:
        return ReplLaunch(tuple(command), workspace)
    binary = workspace / REPL_BINARY
    if not os.access(binary, os.X_OK):
        raise LaunchError(
            f"{binary} is not a built REPL: run `make lean-workspace` (or `lake build repl` in "
            f"{workspace})"
        )
    return ReplLaunch((str(binary),), workspace, lake_environment(workspace), direct=True)
