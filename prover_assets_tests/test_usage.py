"""A step's usage is the kernel's count: the CPU seconds its own process spent and those of
its children (the REPLs, the trainer), waited for or still running, measured against processes
that burn a known amount of CPU and say how much; and a streamed step's attempt journal, which
outlives an attempt killed with kill -9."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from prover_assets.records.outputs import Step, StepInputs
from prover_assets.records.usage import (
    AttemptUsage,
    UsageMark,
    earlier_attempts,
    live_descendants_cpu_s,
    usage_since,
)
from prover_assets.verify.stages import StatementAuditResult
from prover_assets_tests.conftest import ROOT

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


# A child that burns CPU as BURN does, starts a grandchild that burns its own, says what each
# spent (its own clock), then waits, alive, for its stdin to close.
BURN_AND_WAIT = """
import subprocess, sys, time
start = time.process_time()
while time.process_time() - start < float(sys.argv[1]):
    pass
grandchild = subprocess.Popen(
    [sys.executable, "-c", sys.argv[2], sys.argv[1]], stdin=subprocess.PIPE,
    stdout=subprocess.PIPE, text=True,
)
print(grandchild.stdout.readline().strip(), time.process_time(), flush=True)
sys.stdin.read()
"""
BURN_THEN_WAIT = BURN.replace(
    "print(time.process_time())", "print(time.process_time(), flush=True)\nsys.stdin.read()"
)


# A process that runs its arguments as a child, and waits: the root of a tree of its own.
PARENT = "import subprocess, sys; sys.exit(subprocess.call(sys.argv[1:]))"


def test_the_live_descendants_cpu_is_read_from_the_process_tree():
    # the root's child and grandchild each burn 0.3 s and stay alive: none was waited for
    root = subprocess.Popen(
        [sys.executable, "-c", PARENT, sys.executable, "-c", BURN_AND_WAIT, "0.3", BURN_THEN_WAIT],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        grandchild_s, child_s = map(float, root.stdout.readline().split())
        assert live_descendants_cpu_s(root.pid) == pytest.approx(grandchild_s + child_s, abs=0.06)
    finally:
        root.stdin.close()
        root.wait()


# An attempt of a streamed step that burns CPU inside its usage journal until it is killed.
KILLED_ATTEMPT = """
import sys
from pathlib import Path
sys.path.insert(0, {root!r})
from prover_assets.records.outputs import Step, StepInputs
from prover_assets.verify.stages import StatementAuditResult
from prover_assets_tests.conftest import ROOT
step = Step(Path({folder!r}), "asset", StatementAuditResult, StepInputs.hash({{}}), {{}})
with step.journaled(every_s=0.05):
    while True:
        pass
"""


def journal_cpu_s(folder) -> float:
    records = list((folder / "usage").glob("*.json"))
    if not records:
        return 0.0
    (record,) = records
    return AttemptUsage.model_validate_json(record.read_text()).usage.cpu_s


def test_a_killed_attempts_last_record_is_listed_by_the_attempt_that_completes(tmp_path):
    script = KILLED_ATTEMPT.format(root=str(ROOT), folder=str(tmp_path))
    killed = subprocess.Popen([sys.executable, "-c", script])
    deadline = time.monotonic() + 120  # a bound on a hung child, not a speed
    while journal_cpu_s(tmp_path) < 0.3:
        assert killed.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    last = journal_cpu_s(tmp_path)
    step = Step(tmp_path, "asset", StatementAuditResult, StepInputs.hash({}), {})
    with step.journaled():
        burn_here(0.1)
    result = StatementAuditResult(problems=0, checks=0, statuses={}, found={}, simulated=True)
    step.finish(result, [])
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    (earlier,) = manifest["earlier_attempts"]
    assert earlier["ended"] is None  # killed: no end recorded
    assert earlier["usage"]["cpu_s"] == last >= 0.3
    assert earlier["attempt"].endswith(f"-{killed.pid}")
    assert manifest["usage"]["cpu_s"] == pytest.approx(0.1, abs=0.05)  # the completing one's


def test_an_attempt_that_raised_records_that_it_failed(tmp_path):
    step = Step(tmp_path, "asset", StatementAuditResult, StepInputs.hash({}), {})
    with pytest.raises(RuntimeError), step.journaled():
        burn_here(0.1)
        raise RuntimeError("the engine died")
    (record,) = (tmp_path / "usage").glob("*.json")
    entry = AttemptUsage.model_validate_json(record.read_text())
    assert (entry.attempt, entry.ended) == (step.attempt, "failed")
    assert entry.usage.cpu_s >= 0.1
    assert earlier_attempts(tmp_path, "another") == [entry]
    assert earlier_attempts(tmp_path, step.attempt) == []


def test_a_torn_journal_record_is_refused_naming_its_file(tmp_path):
    (tmp_path / "usage").mkdir()
    (tmp_path / "usage" / "1-2.json").write_text('{"attempt": "1-2"')
    with pytest.raises(ValueError, match=r"usage/1-2.json:1: not an attempt's usage record"):
        earlier_attempts(tmp_path, "3-4")
