"""Stand-ins for `elan`, `lake` and `git`, for `make lean-workspace` on a machine that can
download no toolchain: each records its arguments (and working directory) in one log, in call
order, and creates the files a real run would. Installed as executables on PATH by
`install_stand_ins`; `lake exe repl` runs the REPL double.

Environment: STAND_IN_LOG (the log), STAND_IN_STATE (a folder for elan's toolchains),
STAND_IN_NO_CACHE=1 (`lake exe cache get` fails, as when the cache is no longer served),
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


def lake(argv: list[str]) -> int:
    here = Path.cwd()
    if argv == ["update"]:
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
    elif argv == ["exe", "cache", "get"]:
        if os.environ.get("STAND_IN_NO_CACHE") == "1":
            print("No cache files for this commit", file=sys.stderr)
            return 1
    elif argv == ["build", "repl"]:
        binary = here / ".lake/packages/REPL/.lake/build/bin/repl"
        binary.parent.mkdir(parents=True, exist_ok=True)
        binary.write_text("stand-in\n")
    elif argv == ["exe", "repl"]:
        rules = os.environ["STAND_IN_REPL_RULES"]
        double = [sys.executable, "-m", "prover_assets_tests.doubles.lean_repl", "--rules", rules]
        root = str(Path(__file__).parents[2])
        os.execve(sys.executable, double, {**os.environ, "PYTHONPATH": root})
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
