"""How a REPL's memory is capped on this host, and the evidence that the cap holds.

A cgroup's `MemoryMax` (a transient `systemd-run --user --scope`) caps what a process tree holds;
RLIMIT_AS caps each process's address space. The cgroup is chosen only when a probe run inside
such a scope reads the requested `memory.max` back from its own cgroup: where the user manager
has no memory controller delegated (shared GPU boxes, containers), `systemd-run` exits 0 and
silently ignores the property (systemd issues #10581, #12362, #31660), and a cap chosen on its
exit code alone would be claimed by every verdict while the REPLs ran uncapped.

The probe is this module run as a program (`python -m prover_assets.lean.memory_cap
/proc/self/cgroup /proc/self/mountinfo`): it prints, as JSON, its own cgroup v2 path (the `0::`
line), where the cgroup2 file system is mounted, and that cgroup's `memory.max` and
`memory.swap.max`. cgroup v1 (no `0::` path under a cgroup2 mount) is never trusted: systemd
maps `MemoryMax` to v2 only.

RLIMIT_AS counts address space, not memory: every `.olean` Mathlib maps (about 5 GB of them) and
each thread's malloc arena count, so a REPL runs with `MALLOC_ARENA_MAX` set either way.
"""

from __future__ import annotations

import contextlib
import functools
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "MALLOC_ARENA_MAX",
    "MemoryCap",
    "cgroup_prefix",
    "describe_memory_limit",
    "judge_probe",
    "memory_cap",
    "memory_limit",
    "own_memory_max",
]

# glibc's arenas per process: two, not eight per core (each reserves 64 MiB of address space).
MALLOC_ARENA_MAX = "2"
PROBE_MB = 64
_PROBE_TIMEOUT_S = 10


@dataclass(frozen=True)
class MemoryCap:
    """The mechanism that caps a REPL's memory here, and what showed it (stable across runs on
    one host: no scope names or process ids, so verdicts of one host compare equal)."""

    mechanism: str  # "cgroup" or "rlimit_as"
    evidence: str


def cgroup_prefix(cap_mb: int) -> tuple[str, ...]:
    """The argv before a command that runs it in a transient scope capped at `cap_mb` MiB."""
    # `--scope` runs the command itself (no fork): the REPL stays this process's child.
    return (
        "systemd-run", "--user", "--scope", "--quiet", "--collect",
        "-p", f"MemoryMax={cap_mb}M", "-p", "MemorySwapMax=0", "--",
    )  # fmt: skip


def _unescaped(field: str) -> str:
    # mountinfo writes a space, tab, newline and backslash in a path as octal escapes.
    for code in ("040", "011", "012", "134"):
        field = field.replace(f"\\{code}", chr(int(code, 8)))
    return field


def _cgroup2_mount(mountinfo: str) -> tuple[str, str] | None:
    """(root of the mount within the cgroup2 hierarchy, mount point) of the first cgroup2 mount."""
    for line in mountinfo.splitlines():
        fields, separator, rest = line.partition(" - ")
        if separator and rest.split(" ", 1)[0] == "cgroup2":
            parts = fields.split(" ")
            return _unescaped(parts[3]), _unescaped(parts[4])
    return None


def own_memory_max(proc_cgroup: Path, mountinfo: Path) -> dict[str, str | None]:
    """What a process reads of its own cgroup v2: its path, the cgroup2 mount, and the
    `memory.max` and `memory.swap.max` there (None where a file or the hierarchy is missing)."""
    found: dict[str, str | None] = {
        "cgroup": None,
        "mount": None,
        "memory_max": None,
        "memory_swap_max": None,
    }
    lines = proc_cgroup.read_text(encoding="utf-8").splitlines()
    path = next((line[3:] for line in lines if line.startswith("0::")), None)
    mount = _cgroup2_mount(mountinfo.read_text(encoding="utf-8"))
    found["cgroup"] = path
    if path is None or mount is None:
        return found
    root, point = mount
    found["mount"] = point
    if root != "/" and not (path == root or path.startswith(root + "/")):
        return found  # the cgroup is outside what this mount shows
    folder = Path(point) / path[len(root.rstrip("/")) :].lstrip("/")
    for key, name in (("memory_max", "memory.max"), ("memory_swap_max", "memory.swap.max")):
        # Absent: no memory controller in this cgroup (None, which the judge names).
        with contextlib.suppress(OSError):
            found[key] = (folder / name).read_text(encoding="utf-8").strip()
    return found


def judge_probe(returncode: int, stdout: str, stderr: str, requested_mb: int) -> MemoryCap:
    """The mechanism a probe scope's outcome shows: `cgroup` only when the scope's own
    `memory.max` reads back the bytes requested."""
    if returncode != 0:
        detail = stderr.strip().splitlines()[-1:] or ["no message"]
        return MemoryCap(
            "rlimit_as", f"systemd-run --user --scope failed (exit {returncode}: {detail[0]})"
        )
    try:
        found = json.loads(stdout)
    except json.JSONDecodeError:
        return MemoryCap(
            "rlimit_as", f"the probe in the scope printed no reading: {stdout[:200]!r}"
        )
    wanted = str(requested_mb << 20)
    read = found.get("memory_max")
    if read == wanted:
        return MemoryCap(
            "cgroup",
            f"memory.max read back inside a systemd-run --user --scope: {read} bytes for "
            f"MemoryMax={requested_mb}M; memory.swap.max {found.get('memory_swap_max')}",
        )
    where = "no cgroup v2 path" if found.get("cgroup") is None else "its cgroup's memory.max"
    return MemoryCap(
        "rlimit_as",
        f"systemd-run --user --scope exited 0 but {where} read {read!r}, not {wanted} "
        "(MemoryMax ignored: no memory controller delegated to the user's systemd)",
    )


@functools.cache
def memory_cap() -> MemoryCap:
    """This host's mechanism, probed once a process."""
    if shutil.which("systemd-run") is None:
        return MemoryCap("rlimit_as", "no systemd-run on PATH")
    probe = [
        *cgroup_prefix(PROBE_MB),
        sys.executable, "-m", "prover_assets.lean.memory_cap",
        "/proc/self/cgroup", "/proc/self/mountinfo",
    ]  # fmt: skip
    try:
        done = subprocess.run(
            probe, capture_output=True, text=True, timeout=_PROBE_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return MemoryCap("rlimit_as", f"the systemd-run probe did not finish: {exc}")
    return judge_probe(done.returncode, done.stdout, done.stderr, PROBE_MB)


def memory_limit() -> str:
    """How a memory cap is enforced on this host: `cgroup` or `rlimit_as` (`memory_cap`)."""
    return memory_cap().mechanism


def describe_memory_limit(cap_mb: int | None) -> dict[str, object]:
    """What a verdict records of its REPL's memory cap: the mechanism and what verified it."""
    if cap_mb is None:
        mechanism, evidence = "none", "no memory_cap_mb"
    else:
        probed = memory_cap()
        mechanism, evidence = probed.mechanism, probed.evidence
    described = {
        "cgroup": "cgroup MemoryMax (systemd-run --user --scope), swap off",
        "rlimit_as": "RLIMIT_AS (address space: mapped .oleans and malloc arenas count)",
        "none": "none: no memory_cap_mb",
    }[mechanism]
    return {
        "mechanism": mechanism,
        "how": described,
        "evidence": evidence,
        "malloc_arena_max": int(MALLOC_ARENA_MAX),
    }


if __name__ == "__main__":
    print(json.dumps(own_memory_max(Path(sys.argv[1]), Path(sys.argv[2]))))
