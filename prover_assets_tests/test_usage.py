"""A step's usage is the kernel's count: the CPU seconds its own process spent and those of
the children it waited for (the REPLs, the trainer), measured against processes that burn a
known amount of CPU and say how much."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from prover_assets.records.outputs import Step, StepInputs
from prover_assets.records.usage import UsageMark, usage_since
from prover_assets.verify.stages import StatementAuditResult

# A child that burns CPU until its own clock says `seconds`, then prints what it spent.
BURN = """
import sys, time
start = time.process_time()
while time.process_time() - start < float(sys.argv[1]):
    pass
print(time.process_time())
"""


def burn_in_a_child(seconds: float) -> float:
    done = subprocess.run(
        [sys.executable, "-c", BURN, str(seconds)], capture_output=True, text=True, check=True
    )
    return float(done.stdout)  # the child's own CPU time, start-up included


def burn_here(seconds: float) -> float:
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass
    return time.process_time() - start


def test_the_cpu_of_a_child_waited_for_is_counted_as_the_child_counts_it():
    mark = UsageMark.now()
    spent = burn_in_a_child(0.4) + burn_in_a_child(0.3)
    usage = usage_since(mark)
    assert usage.children_cpu_s == pytest.approx(spent, abs=0.05)
    assert usage.wall_s >= 0.7


def test_the_steps_own_cpu_is_counted_apart_from_its_childrens():
    mark = UsageMark.now()
    spent = burn_here(0.3)
    usage = usage_since(mark)
    assert usage.cpu_s == pytest.approx(spent, abs=0.05)
    assert usage.children_cpu_s < 0.05


def test_every_steps_manifest_records_what_its_attempt_used(tmp_path):
    step = Step(tmp_path, "asset", StatementAuditResult, StepInputs.hash({}), {})
    spent = burn_in_a_child(0.2)
    result = StatementAuditResult(problems=0, checks=0, statuses={}, found={}, simulated=True)
    step.finish(result, [])
    usage = json.loads((tmp_path / "manifest.json").read_text())["usage"]
    assert usage["children_cpu_s"] == pytest.approx(spent, abs=0.05)
    assert usage["wall_s"] >= usage["children_cpu_s"] - 0.05
