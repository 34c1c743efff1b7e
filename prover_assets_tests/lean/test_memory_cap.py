"""The REPL's memory cap: a cgroup only where a probe reads the cap back, else RLIMIT_AS."""

import functools
import json
import os
import resource
import sys
from pathlib import Path

import pytest

import prover_assets.lean.memory_cap as memory_cap_module
from prover_assets.lean.memory_cap import (
    MemoryCap,
    describe_memory_limit,
    judge_probe,
    own_memory_max,
)
from prover_assets.lean.repl import ReplProcess
from prover_assets_tests.lean_double import DOUBLE, probe

SCOPE = "/user.slice/user-1000.slice/user@1000.service/app.slice/run-u7.scope"


def cgroup_view(
    folder: Path,
    *,
    cgroup_line: str = f"0::{SCOPE}",
    mount: str | None = "/ {point}",
    files: dict[str, str] | None = None,
) -> tuple[Path, Path]:
    """A hand-built view of /proc/self/cgroup and /proc/self/mountinfo, with the cgroup2 tree
    mounted at `folder/fs` (`mount`: "<root in the hierarchy> <mount point>")."""
    point = folder / "fs"
    point.mkdir(parents=True, exist_ok=True)
    proc_cgroup = folder / "cgroup"
    proc_cgroup.write_text(f"4:memory:/v1/path\n{cgroup_line}\n")
    lines = ["24 30 0:22 / /proc rw,nosuid - proc proc rw"]
    if mount is not None:
        root, where = mount.format(point=point).split(" ")
        lines.append(f"31 24 0:26 {root} {where} rw,nosuid shared:9 - cgroup2 cgroup2 rw")
    mountinfo = folder / "mountinfo"
    mountinfo.write_text("\n".join(lines) + "\n")
    for relative, text in (files or {}).items():
        path = point / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return proc_cgroup, mountinfo


def test_a_scope_reads_its_own_memory_max_under_the_cgroup2_mount(tmp_path):
    files = {f"{SCOPE[1:]}/memory.max": "67108864\n", f"{SCOPE[1:]}/memory.swap.max": "0\n"}
    found = own_memory_max(*cgroup_view(tmp_path, files=files))
    assert found == {
        "cgroup": SCOPE,
        "mount": str(tmp_path / "fs"),
        "memory_max": "67108864",
        "memory_swap_max": "0",
    }


def test_a_mount_of_a_subtree_is_read_relative_to_its_root(tmp_path):
    # A cgroup namespace or a bind mount shows the hierarchy from `/user.slice` down.
    files = {"user-1000.slice/user@1000.service/app.slice/run-u7.scope/memory.max": "1024\n"}
    view = cgroup_view(tmp_path, mount="/user.slice {point}", files=files)
    assert own_memory_max(*view)["memory_max"] == "1024"


def test_a_cgroup_that_is_the_mounts_root_reads_the_mount_points_files(tmp_path):
    view = cgroup_view(
        tmp_path,
        cgroup_line="0::/user.slice",
        mount="/user.slice {point}",
        files={"memory.max": "7\n"},
    )
    assert own_memory_max(*view)["memory_max"] == "7"


def test_a_cgroup_whose_name_starts_with_an_x_is_found_under_a_subtree_mount(tmp_path):
    view = cgroup_view(
        tmp_path,
        cgroup_line="0::/user.slice/Xorg.scope",
        mount="/user.slice {point}",
        files={"Xorg.scope/memory.max": "9\n"},
    )
    assert own_memory_max(*view)["memory_max"] == "9"


def test_a_cgroup_outside_the_mounted_subtree_reads_nothing(tmp_path):
    files = {"memory.max": "1024\n"}
    view = cgroup_view(tmp_path, mount="/other.slice {point}", files=files)
    assert own_memory_max(*view)["memory_max"] is None


def test_a_mount_point_with_a_space_is_unescaped(tmp_path):
    spaced = tmp_path / "with space"
    files = {f"{SCOPE[1:]}/memory.max": "5\n"}
    proc_cgroup, mountinfo = cgroup_view(tmp_path, files=files)
    (tmp_path / "fs").rename(spaced)
    escaped = str(spaced).replace(" ", "\\040")
    mountinfo.write_text(f"31 24 0:26 / {escaped} rw - cgroup2 cgroup2 rw\n")
    assert own_memory_max(proc_cgroup, mountinfo)["memory_max"] == "5"


@pytest.mark.parametrize(
    ("cgroup_line", "mount"),
    [("0::/", "/ {point}"), ("1:name=systemd:/", "/ {point}"), (f"0::{SCOPE}", None)],
    ids=["root_cgroup_no_file", "v1_only", "no_cgroup2_mount"],
)
def test_no_memory_max_is_read_where_the_hierarchy_gives_none(tmp_path, cgroup_line, mount):
    found = own_memory_max(*cgroup_view(tmp_path, cgroup_line=cgroup_line, mount=mount))
    assert found["memory_max"] is None


def reading(memory_max, cgroup=SCOPE):
    return json.dumps({"cgroup": cgroup, "mount": "/sys/fs/cgroup", "memory_max": memory_max})


UNDELEGATED = (
    "systemd-run --user --scope exited 0 but {where} read {read}, not 67108864 "
    "(MemoryMax ignored: no memory controller delegated to the user's systemd)"
)


@pytest.mark.parametrize(
    ("returncode", "stdout", "stderr", "mechanism", "evidence"),
    [
        (
            0,
            json.dumps({"cgroup": SCOPE, "memory_max": "67108864", "memory_swap_max": "0"}),
            "",
            "cgroup",
            "memory.max read back inside a systemd-run --user --scope: 67108864 bytes for "
            "MemoryMax=64M; memory.swap.max 0",
        ),
        (
            0,
            reading("max"),
            "",
            "rlimit_as",
            UNDELEGATED.format(where="its cgroup's memory.max", read="'max'"),
        ),
        (
            0,
            reading(None),
            "",
            "rlimit_as",
            UNDELEGATED.format(where="its cgroup's memory.max", read="None"),
        ),
        (
            0,
            reading(None, cgroup=None),
            "",
            "rlimit_as",
            UNDELEGATED.format(where="no cgroup v2 path", read="None"),
        ),
        (
            0,
            reading("134217728"),
            "",
            "rlimit_as",
            UNDELEGATED.format(where="its cgroup's memory.max", read="'134217728'"),
        ),
        (
            0,
            reading("67108864 "),
            "",
            "rlimit_as",
            UNDELEGATED.format(where="its cgroup's memory.max", read="'67108864 '"),
        ),
        (
            0,
            "Running scope as unit run-u7.scope " + "x" * 300,
            "",
            "rlimit_as",
            "the probe in the scope printed no reading: "
            + repr(("Running scope as unit run-u7.scope " + "x" * 300)[:200]),
        ),
        (
            1,
            "",
            "Warning: one\nWarning: two\nFailed to connect to bus: No medium found\n",
            "rlimit_as",
            "systemd-run --user --scope failed (exit 1: Failed to connect to bus: No medium found)",
        ),
        (1, "", "", "rlimit_as", "systemd-run --user --scope failed (exit 1: no message)"),
    ],
    ids=[
        "delegated",
        "undelegated",
        "no_file",
        "v1",
        "other_cap",
        "not_exact",
        "no_json",
        "bus",
        "silent",
    ],
)
def test_the_cgroup_is_trusted_only_when_the_scope_reads_back_the_bytes_asked_for(
    returncode, stdout, stderr, mechanism, evidence
):
    judged = judge_probe(returncode, stdout, stderr, 64)
    assert (judged.mechanism, judged.evidence) == (mechanism, evidence)


@pytest.mark.parametrize(
    ("cap", "expected"),
    [
        (
            700,
            {
                "mechanism": "cgroup",
                "how": "cgroup MemoryMax (systemd-run --user --scope), swap off",
                "evidence": "read back",
                "malloc_arena_max": 2,
            },
        ),
        (
            None,
            {
                "mechanism": "none",
                "how": "none: no memory_cap_mb",
                "evidence": "no memory_cap_mb",
                "malloc_arena_max": 2,
            },
        ),
    ],
)
def test_a_verdict_records_the_mechanism_what_it_counts_and_its_evidence(
    monkeypatch, cap, expected
):
    monkeypatch.setattr(memory_cap_module, "memory_cap", lambda: MemoryCap("cgroup", "read back"))
    assert describe_memory_limit(cap) == expected


def test_under_rlimit_as_a_verdict_says_what_the_address_space_counts(monkeypatch):
    monkeypatch.setattr(memory_cap_module, "memory_cap", lambda: MemoryCap("rlimit_as", "no bus"))
    assert describe_memory_limit(700) == {
        "mechanism": "rlimit_as",
        "how": "RLIMIT_AS (address space: mapped .oleans and malloc arenas count)",
        "evidence": "no bus",
        "malloc_arena_max": 2,
    }


def stand_in_systemd_run(folder: Path, manager: str) -> Path:
    """A `systemd-run` on PATH that records its arguments and then behaves as a user manager:
    `no_user_bus` fails as one without a user bus; `undelegated` exits 0 and runs the command
    with the property ignored (the probe reads this host's real cgroup files); `delegated` runs
    it as if in a scope whose `memory.max` is the MemoryMax asked for: it writes that view of the
    cgroup files and hands their paths to the command in place of /proc/self's, as a scope's
    own view would show them (it limits nothing: no test here needs the kernel to)."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "systemd-run"
    script.write_text(
        f"#!{sys.executable}\n"
        "import os, sys\n"
        "from pathlib import Path\n"
        f"folder, manager = Path({str(folder)!r}), {manager!r}\n"
        "with open(folder / 'calls', 'a') as calls:\n"
        "    calls.write(' '.join(sys.argv[1:]) + '\\n')\n"
        "cut = sys.argv.index('--')\n"
        "properties, command = sys.argv[1:cut], sys.argv[cut + 1:]\n"
        "if manager == 'no_user_bus':\n"
        "    sys.exit('Failed to connect to bus: No medium found')\n"
        "if manager == 'delegated':\n"
        "    asked = next(p for p in properties if p.startswith('MemoryMax='))\n"
        "    view = folder / f'view-{os.getpid()}'\n"
        f"    scope = view / 'fs' / {SCOPE[1:]!r}\n"
        "    scope.mkdir(parents=True)\n"
        "    (scope / 'memory.max').write_text(f'{int(asked[10:-1]) << 20}\\n')\n"
        "    (scope / 'memory.swap.max').write_text('0\\n')\n"
        f"    (view / 'cgroup').write_text('0::{SCOPE}\\n')\n"
        "    (view / 'mountinfo').write_text(f'31 24 0:26 / {view}/fs rw - cgroup2 cgroup2 rw\\n')\n"
        "    swap = {'/proc/self/cgroup': view / 'cgroup', '/proc/self/mountinfo': view / 'mountinfo'}\n"
        "    command = [str(swap.get(part, part)) for part in command]\n"
        "os.execvp(command[0], command)\n"
    )
    script.chmod(0o755)
    return folder


@pytest.mark.parametrize("manager", ["delegated", "undelegated", "no_user_bus"])
def test_a_repl_runs_in_a_scope_only_where_the_probe_saw_the_cap_hold(
    tmp_path, monkeypatch, manager
):
    bin_dir = stand_in_systemd_run(tmp_path / "bin", manager)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    # A fresh probe for this host, not the session's cached one.
    monkeypatch.setattr(
        memory_cap_module, "memory_cap", functools.cache(memory_cap_module.memory_cap.__wrapped__)
    )
    process = ReplProcess(DOUBLE, memory_cap_mb=700, sandbox=False)
    process.start()
    try:
        seen = probe(process)
    finally:
        process.close()
    calls = (bin_dir / "calls").read_text().splitlines()
    recorded = describe_memory_limit(700)
    assert calls[0].endswith(
        "-m prover_assets.lean.memory_cap /proc/self/cgroup /proc/self/mountinfo"
    )
    if manager == "delegated":  # the probe, then the REPL in its own scope, its address space free
        assert recorded["mechanism"] == "cgroup"
        assert "67108864 bytes for MemoryMax=64M" in recorded["evidence"]
        assert calls[1].split(" -- ")[0] == (
            "--user --scope --quiet --collect -p MemoryMax=700M -p MemorySwapMax=0"
        )
        assert len(calls) == 2 and seen["address_space_limit"] == resource.RLIM_INFINITY
    else:  # only the probe ran: the cap is the address space's, and the verdict says why
        assert recorded["mechanism"] == "rlimit_as"
        assert ("exited 0 but" if manager == "undelegated" else "failed (exit 1") in recorded[
            "evidence"
        ]
        assert len(calls) == 1 and seen["address_space_limit"] == 700 << 20


def test_an_uncapped_repl_records_no_mechanism():
    assert describe_memory_limit(None)["mechanism"] == "none"
