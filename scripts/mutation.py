"""`make mutation`: do the tests catch faults in the code the verdicts and statistics rest on?

Runs mutmut over the modules in `[tool.mutmut] only_mutate` (pyproject.toml, the one list),
each mutant against the tests that reach its function, then prints each module's kill rate
and fails when a module is below the floor or a surviving mutant is not explained in the file
beside its module (`gate.py` -> `gate.survivors.md`, one line per survivor naming it).

    python scripts/mutation.py            # run mutmut, then judge
    python scripts/mutation.py --judge    # judge the last run in mutants/ again
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

FLOOR = 0.90
ROOT = Path(__file__).resolve().parent.parent
MUTANTS = ROOT / "mutants"
LOG = MUTANTS / "mutmut-run.log"
CAUGHT = {"killed", "timeout", "segfault", "caught by type check"}
NOT_CAUGHT = {"survived", "no tests", "suspicious"}
# mutmut's own reading of a mutant run's exit code (mutmut.stats.status_by_exit_code, 3.8.1).
STATUS_BY_EXIT_CODE = {
    None: "not checked",
    1: "killed",
    3: "killed",
    0: "survived",
    5: "no tests",
    33: "no tests",
    34: "skipped",
    35: "suspicious",
    36: "timeout",
    37: "caught by type check",
    -24: "timeout",
    24: "timeout",
    152: "timeout",
    255: "timeout",
    -11: "segfault",
    -9: "segfault",
}


@dataclass
class ModuleResult:
    module: Path
    statuses: Counter[str] = field(default_factory=Counter)
    not_caught: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float:
        caught = sum(self.statuses[s] for s in CAUGHT)
        judged = caught + sum(self.statuses[s] for s in NOT_CAUGHT)
        return caught / judged if judged else 1.0

    @property
    def survivors_file(self) -> Path:
        return ROOT / self.module.with_suffix(".survivors.md")

    def unexplained(self) -> list[str]:
        text = self.survivors_file.read_text() if self.survivors_file.exists() else ""
        return [name for name in self.not_caught if f"`{name}`" not in text]


def run_mutmut() -> None:
    MUTANTS.mkdir(exist_ok=True)
    with LOG.open("w") as log:
        done = subprocess.run(
            [str(Path(sys.executable).with_name("mutmut")), "run"],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            check=False,
        )
    if done.returncode != 0:
        raise SystemExit(f"mutmut run failed (exit {done.returncode}); see {LOG}")


def short_name(key: str) -> str:
    """`prover_assets.lean.gate.x_static_check__mutmut_12` -> `x_static_check__mutmut_12`."""
    return key.rsplit(".", 1)[-1]


def results() -> list[ModuleResult]:
    found = []
    for meta in sorted(MUTANTS.glob("prover_assets/**/*.py.meta")):
        module = meta.relative_to(MUTANTS).with_suffix("")
        result = ModuleResult(module)
        for key, exit_code in json.loads(meta.read_text())["exit_code_by_key"].items():
            status = STATUS_BY_EXIT_CODE.get(exit_code, "suspicious")
            result.statuses[status] += 1
            if status in NOT_CAUGHT:
                result.not_caught.append(short_name(key))
        if result.statuses:
            found.append(result)
    return found


def judge(found: list[ModuleResult]) -> int:
    failures = []
    print(f"{'module':42} {'mutants':>7} {'caught':>6} {'left':>5} {'rate':>6}  unexplained")
    for r in found:
        total = sum(r.statuses.values())
        caught = sum(r.statuses[s] for s in CAUGHT)
        unexplained = r.unexplained()
        print(
            f"{r.module!s:42} {total:7d} {caught:6d} {len(r.not_caught):5d} {r.rate:6.1%}"
            f"  {len(unexplained)}"
        )
        if r.statuses["not checked"]:
            failures.append(f"{r.module}: {r.statuses['not checked']} mutants not checked")
        if r.rate < FLOOR:
            failures.append(f"{r.module}: kill rate {r.rate:.1%} below {FLOOR:.0%}")
        if unexplained:
            failures.append(
                f"{r.module}: {len(unexplained)} survivors not explained in "
                f"{r.survivors_file.relative_to(ROOT)} (first: {unexplained[0]}; "
                f"`mutmut show {unexplained[0]}` prints it)"
            )
    (MUTANTS / "rates.json").write_text(
        json.dumps(
            {str(r.module): {"rate": r.rate, **r.statuses} for r in found}, indent=1, sort_keys=True
        )
    )
    for failure in failures:
        print("FAIL", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    if "--judge" not in sys.argv:
        run_mutmut()
    sys.exit(judge(results()))
