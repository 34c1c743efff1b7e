"""Stand-ins for `elan`, `lake` and `git`, for `make lean-workspace` on a machine that can
download no toolchain: each records its arguments (and working directory) in one log, in call
order, and creates the files a real run would. Installed as executables on PATH by
`install_stand_ins`.

`lake update` runs Mathlib's `post_update` hook as the pinned Mathlib's lakefile does: it copies
Mathlib's `lean-toolchain` over the workspace's (STAND_IN_MATHLIB_TOOLCHAIN, else the pinned
v4.9.0-rc1), then, unless MATHLIB_NO_CACHE_ON_UPDATE=1, fetches the cache, and fails `lake
update` when that fails. `lake env CMD...` runs CMD with Lake's variables added (`LEAN_PATH`,
`LEAN_SYSROOT`, `PATH`); `lake build repl` writes the REPL binary, an executable that runs the
REPL double, where Lake puts a dependency's executable.

Environment: STAND_IN_LOG (the log), STAND_IN_STATE (a folder for elan's toolchains and the
stand-ins' counters), STAND_IN_NO_CACHE=1 (every cache fetch fails: no network, or a cache no
longer served), STAND_IN_CACHE_FAILS=N (the first N fetches fail: downloads cut short),
STAND_IN_REPL_RULES (the double's rules file), STAND_IN_HEAD (what `git rev-parse HEAD` says
instead of the pinned commit).
"""

from __future__ import annotations

import errno
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

FULL = 40


def _log(tool: str, argv: list[str]) -> None:
    try:
        with open(os.environ["STAND_IN_LOG"], "a", encoding="utf-8") as log:
            log.write(json.dumps({"tool": tool, "args": argv, "cwd": os.getcwd()}) + "\n")
    except OSError as exc:
        # `lake exe repl` under bubblewrap: nothing but the REPL's own TMPDIR is writable there,
        # so the call goes unlogged, as a real lake would write nothing outside the workspace.
        if exc.errno != errno.EROFS:
            raise


def _full(rev: str) -> str:
    return rev + "0" * (FULL - len(rev))


def elan(argv: list[str]) -> int:
    state = Path(os.environ["STAND_IN_STATE"]) / "toolchains"
    installed = state.read_text().split() if state.exists() else []
    if argv[:2] == ["toolchain", "list"]:
        print("\n".join(installed))
    elif argv[:2] == ["toolchain", "install"]:
        state.parent.mkdir(parents=True, exist_ok=True)
        state.write_text("\n".join([*installed, argv[2]]) + "\n")
    return 0


PINNED_TOOLCHAIN = "leanprover/lean4:v4.9.0-rc1\n"


def _cache_fetched() -> bool:
    """Whether this fetch of Mathlib's cache succeeds (STAND_IN_NO_CACHE, STAND_IN_CACHE_FAILS)."""
    if os.environ.get("STAND_IN_NO_CACHE") == "1":
        print("No cache files for this commit (or no network)", file=sys.stderr)
        return False
    counter = Path(os.environ["STAND_IN_STATE"]) / "cache_fetches"
    counter.parent.mkdir(parents=True, exist_ok=True)
    fetches = int(counter.read_text()) + 1 if counter.exists() else 1
    counter.write_text(str(fetches))
    if fetches <= int(os.environ.get("STAND_IN_CACHE_FAILS", "0")):
        print("curl: (56) Recv failure: Connection reset by peer", file=sys.stderr)
        return False
    return True


def _update(here: Path) -> int:
    revs = re.findall(
        r'require (\w+) from git\n\s+"[^"]+" @ "(\w+)"', Path("lakefile.lean").read_text()
    )
    packages = []
    for name, rev in revs:
        folder = here / ".lake/packages" / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "HEAD_REV").write_text(_full(rev))
        packages.append({"name": name, "rev": _full(rev), "type": "git"})
    Path("lake-manifest.json").write_text(json.dumps({"version": 7, "packages": packages}))
    # Mathlib's post_update hook (lakefile.lean at the pinned commit).
    toolchain = os.environ.get("STAND_IN_MATHLIB_TOOLCHAIN", PINNED_TOOLCHAIN)
    (here / ".lake/packages/mathlib/lean-toolchain").write_text(toolchain)
    (here / "lean-toolchain").write_text(toolchain)
    if os.environ.get("MATHLIB_NO_CACHE_ON_UPDATE") != "1" and not _cache_fetched():
        print("error: mathlib: failed to fetch cache", file=sys.stderr)
        return 1
    return 0


def _lake_variables(here: Path) -> dict[str, str]:
    sysroot = Path(os.environ["STAND_IN_STATE"]) / "toolchain"
    libraries = [here / ".lake/packages" / p / ".lake/build/lib" for p in ("mathlib", "REPL")]
    return {
        "LEAN_SYSROOT": str(sysroot),
        "LEAN_PATH": ":".join([*map(str, libraries), str(sysroot / "lib/lean")]),
        "PATH": f"{sysroot / 'bin'}:{os.environ['PATH']}",
        "LAKE": str(Path(sys.argv[0]).resolve()),
    }


def _write_repl_binary(binary: Path) -> None:
    binary.parent.mkdir(parents=True, exist_ok=True)
    root = str(Path(__file__).parents[2])
    binary.write_text(
        "#!/bin/sh\n"
        f'PYTHONPATH="{root}" exec "{sys.executable}" -m prover_assets_tests.doubles.lean_repl '
        '--rules "$STAND_IN_REPL_RULES"\n'
    )
    binary.chmod(0o755)


def lake(argv: list[str]) -> int:
    here = Path.cwd()
    if argv == ["update"]:
        return _update(here)
    if argv == ["exe", "cache", "get"]:
        return 0 if _cache_fetched() else 1
    if argv == ["build", "repl"]:
        _write_repl_binary(here / ".lake/packages/REPL/.lake/build/bin/repl")
    elif argv[:1] == ["env"] and len(argv) > 1:
        os.execvpe(argv[1], argv[1:], {**os.environ, **_lake_variables(here)})
    return 0


def git(argv: list[str]) -> int:
    if len(argv) == 4 and argv[0] == "-C" and argv[2:] == ["rev-parse", "HEAD"]:
        print(os.environ.get("STAND_IN_HEAD") or (Path(argv[1]) / "HEAD_REV").read_text())
        return 0
    return 1


def install_stand_ins(folder: Path) -> Path:
    """Write `elan`, `lake` and `git` into `folder`; returns it (to put first on PATH)."""
    folder.mkdir(parents=True, exist_ok=True)
    root = Path(__file__).parents[2]
    for tool in ("elan", "lake", "git"):
        script = folder / tool
        script.write_text(
            f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(root)!r})\n"
            "from prover_assets_tests.doubles import lean_tools\n"
            f"lean_tools._log({tool!r}, sys.argv[1:])\n"
            f"sys.exit(lean_tools.{tool}(sys.argv[1:]))\n"
        )
        script.chmod(0o755)
    return folder


def use_stand_ins(folder: Path, monkeypatch: Any) -> Path:
    """The stand-ins on PATH, logging under `folder`, their REPL answering as a sound Lean
    would (`working_instrument`); returns the log's path."""
    from prover_assets_tests.lean_double import working_instrument

    bin_dir = install_stand_ins(folder / "bin")
    rules = folder / "rules.json"
    rules.write_text(json.dumps(working_instrument()))
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("STAND_IN_LOG", str(folder / "calls.jsonl"))
    monkeypatch.setenv("STAND_IN_STATE", str(folder / "state"))
    monkeypatch.setenv("STAND_IN_REPL_RULES", str(rules))
    return folder / "calls.jsonl"
