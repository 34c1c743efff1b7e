"""What holds a REPL process in on this host: bubblewrap (no network, `/` read-only, a private
writable TMPDIR, the data root emptied), else a network namespace, else nothing, each probed
with the argv a REPL gets and each fallback saying why the stronger one does not hold. A
verdict records which held (`describe_containment`)."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = [
    "Containment",
    "bwrap_argv",
    "contained_argv",
    "containment",
    "describe_containment",
]


@dataclass(frozen=True)
class Containment:
    """What holds a REPL process in on this host."""

    mechanism: str  # "bwrap", "unshare" or "none"
    network: bool  # no network inside
    filesystem: bool  # `/` read-only, a private writable TMPDIR, hidden folders emptied
    how: str  # in words: what holds, or why not


def bwrap_argv(
    command: Sequence[str], *, tmpdir: Path, hidden: Sequence[Path] = (), cwd: Path | None = None
) -> list[str]:
    """`command` under bubblewrap: no network (nor IPC, nor other processes), `/` bound
    read-only (`/tmp` included: a toolchain or workspace may live there, and reading it is
    harmless once nothing can be written), `tmpdir` alone writable, each existing folder of
    `hidden` replaced by an empty read-only one; `cwd` (the workspace) is bound back, read-only,
    when it lies inside a hidden folder."""
    argv = [
        "bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
        "--unshare-net", "--unshare-ipc", "--unshare-pid", "--die-with-parent",
    ]  # fmt: skip
    # A folder that does not exist cannot be mounted over (`/` is read-only by then), and
    # there is nothing in it to hide.
    folders = [folder.resolve() for folder in hidden if folder.is_dir()]
    for folder in folders:
        argv += ["--tmpfs", str(folder)]
    if cwd is not None and any(cwd.is_relative_to(f) for f in folders):
        argv += ["--ro-bind", str(cwd), str(cwd)]
    # Read-only, so that a write there fails rather than lands in a tmpfs no one reads.
    for folder in folders:
        argv += ["--remount-ro", str(folder)]
    argv += ["--bind", str(tmpdir), str(tmpdir)]
    if cwd is not None:
        argv += ["--chdir", str(cwd)]
    return [*argv, "--", *command]


# A containment probe that hangs (a bwrap stuck on a namespace) must not hang the verifier.
_PROBE_TIMEOUT_S = 10.0


def _probe(argv: Sequence[str]) -> str | None:
    """None when `argv` runs and exits 0; else why not."""
    try:
        probe = subprocess.run(argv, capture_output=True, timeout=_PROBE_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if probe.returncode == 0:
        return None
    return probe.stderr.decode(errors="replace").strip()[:200] or f"exit {probe.returncode}"


_UNSHARE = ("unshare", "--net", "--")


_UNSHARE_USER = ("unshare", "--user", "--map-root-user", "--net", "--")


@functools.cache
def containment() -> Containment:
    """The strongest containment this host runs: bubblewrap (probed with the argv a REPL gets),
    else a network namespace (`unshare --net`, in a user namespace when not root), else none;
    each fallback says why the stronger one does not hold."""
    if shutil.which("bwrap") is None:
        no_bwrap = "bwrap is not installed"
    else:
        with tempfile.TemporaryDirectory(prefix="lean-repl-probe-") as tmpdir:
            refused = _probe(bwrap_argv(["true"], tmpdir=Path(tmpdir)))
        if refused is None:
            return Containment(
                "bwrap",
                True,
                True,
                "bubblewrap: no network, `/` read-only (workspace and toolchain), a private "
                "writable TMPDIR, the folders it is given (the data root) emptied, read-only",
            )
        no_bwrap = f"bwrap refused: {refused}"
    if shutil.which("unshare") is None:
        return Containment("none", False, False, f"none: {no_bwrap}; unshare is not installed")
    prefix = _UNSHARE if os.geteuid() == 0 else _UNSHARE_USER
    refused = _probe([*prefix, "true"])
    if refused is None:
        how = f"{' '.join(prefix[:-1])}: the network only ({no_bwrap})"
        return Containment("unshare", True, False, how)
    return Containment("none", False, False, f"none: {no_bwrap}; unshare refused ({refused})")


def describe_containment(enabled: bool) -> dict[str, object]:
    """What a verdict records of its REPL's containment (as `describe_memory_limit` does of
    its memory cap)."""
    if not enabled:
        return {"mechanism": "none", "network": False, "filesystem": False, "how": "off in config"}
    return asdict(containment())


def contained_argv(
    command: Sequence[str], *, tmpdir: Path, hidden: Sequence[Path], cwd: Path | None
) -> list[str]:
    """`command` under this host's `containment()`."""
    mechanism = containment().mechanism
    if mechanism == "bwrap":
        return bwrap_argv(command, tmpdir=tmpdir, hidden=hidden, cwd=cwd)
    if mechanism == "unshare":
        return [*(_UNSHARE if os.geteuid() == 0 else _UNSHARE_USER), *command]
    return list(command)
